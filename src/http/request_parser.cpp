#include "weft/http/request_parser.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#include "char_class.hpp"
#include "scan.hpp"
#include "swar.hpp"

// The parser is a state machine over the bytes of one request head. Each state examines the
// bytes from pos_ on and either finishes its token (moving to the next state) or, at the end of
// the input, saves where it is and returns `incomplete`; the next parse() resumes in the same
// state at the same byte. Long runs (the target, field values) are skipped by the scan_ops of
// the active scan path, short ones (method, field names) by the class table.
//
// Invariants between calls:
//   pos_ <= input size, and no byte before pos_ is examined again;
//   mark_ <= pos_ is where the current token started (method, target, version, field name);
//   while in the target, aux_ is the first '?' (0: none yet); in the value states, aux_ is the
//   colon after the field name and vstart_ the value's first byte;
//   the request line must end (LF consumed) by line_limit_, the header section by
//   fields_start_ + block_limit_: reaching either mark unfinished is the limit error.

namespace weft::http {

namespace {

using detail::is_ows;
using detail::is_tchar;

// Offsets are 32-bit (request_head::piece): keep every head well under 4 GiB.
constexpr std::size_t max_section = std::size_t{1} << 30;

[[nodiscard]] auto is_digit(char c) noexcept -> bool { return c >= '0' && c <= '9'; }

// Bytes p[0..3] as one word, in memory order (compared only with another load4).
[[nodiscard]] auto load4(const char* p) noexcept -> std::uint32_t {
    std::uint32_t v = 0;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// `name` (a validated token) equals the lowercase literal `lower` (letters and '-'), ignoring
// case. Setting bit 5 folds A-Z onto a-z; of the other bytes it maps only non-token ones
// (controls) onto the '-' of a literal, and `name` has none. A word at a time: the field
// names a head is checked for are 4 to 17 bytes, each compared in two or three loads.
[[nodiscard]] auto name_is(std::string_view name, std::string_view lower) noexcept -> bool {
    const std::size_t n = name.size();
    if (n != lower.size()) {
        return false;
    }
    const char* const a = name.data();
    const char* const b = lower.data();
    if (n >= 8) {
        constexpr std::uint64_t fold = detail::swar::ones * 0x20;
        for (std::size_t i = 0; i + 8 < n; i += 8) {
            if ((detail::swar::load(a + i) | fold) != detail::swar::load(b + i)) {
                return false;
            }
        }
        return (detail::swar::load(a + n - 8) | fold) == detail::swar::load(b + n - 8);
    }
    if (n >= 4) {
        constexpr std::uint32_t fold = 0x20202020U;
        return (load4(a) | fold) == load4(b) && (load4(a + n - 4) | fold) == load4(b + n - 4);
    }
    for (std::size_t i = 0; i < n; ++i) {
        if (static_cast<char>(a[i] | 0x20) != b[i]) {
            return false;
        }
    }
    return true;
}

[[nodiscard]] auto classify(std::string_view m) noexcept -> method {
    switch (m.size()) {
        case 3:
            if (m == "GET") {
                return method::get;
            }
            if (m == "PUT") {
                return method::put;
            }
            break;
        case 4:
            if (m == "POST") {
                return method::post;
            }
            if (m == "HEAD") {
                return method::head;
            }
            break;
        case 5:
            if (m == "PATCH") {
                return method::patch;
            }
            if (m == "TRACE") {
                return method::trace;
            }
            break;
        case 6:
            if (m == "DELETE") {
                return method::delete_;
            }
            break;
        case 7:
            if (m == "CONNECT") {
                return method::connect;
            }
            if (m == "OPTIONS") {
                return method::options;
            }
            break;
        default:
            break;
    }
    return method::other;
}

// RFC 3986 host [ ":" port ]: IP-literal (bracketed IPv6 or IPvFuture), IPv4address or
// reg-name (an IPv4 address is a reg-name too). The host may be empty unless `need_host`;
// the port (digits) may be empty unless `need_port`. No userinfo (RFC 9110 4.2.4).
[[nodiscard]] auto valid_authority(std::string_view a, bool need_host, bool need_port) noexcept
    -> bool {
    std::size_t i = 0;
    const std::size_t n = a.size();
    if (n > 0 && a[0] == '[') {
        const std::size_t close = a.find(']');
        if (close == std::string_view::npos || close == 1) {
            return false;
        }
        const std::string_view inner = a.substr(1, close - 1);
        if (inner[0] == 'v' || inner[0] == 'V') {
            // IPvFuture: "v" 1*HEXDIG "." 1*( unreserved / sub-delims / ":" )
            std::size_t j = 1;
            while (j < inner.size() && detail::is_hex(inner[j])) {
                ++j;
            }
            if (j == 1 || j + 1 >= inner.size() || inner[j] != '.') {
                return false;
            }
            for (++j; j < inner.size(); ++j) {
                if (!detail::has(inner[j], detail::regname_bit) && inner[j] != ':') {
                    return false;
                }
            }
        } else {
            for (char c : inner) {
                if (!detail::is_hex(c) && c != ':' && c != '.') {
                    return false;
                }
            }
        }
        i = close + 1;
    } else {
        while (i < n && a[i] != ':') {
            // Runs of reg-name bytes four at a time (a Host value is mostly one run: letters,
            // digits and dots up to the ':'), then one byte: a '%' escape or the end of the run.
            while (i + 4 <= n && (detail::char_classes[static_cast<unsigned char>(a[i])] &
                                  detail::char_classes[static_cast<unsigned char>(a[i + 1])] &
                                  detail::char_classes[static_cast<unsigned char>(a[i + 2])] &
                                  detail::char_classes[static_cast<unsigned char>(a[i + 3])] &
                                  detail::regname_bit) != 0) {
                i += 4;
            }
            if (i == n || a[i] == ':') {
                break;
            }
            if (a[i] == '%') {
                if (i + 2 >= n || !detail::is_hex(a[i + 1]) || !detail::is_hex(a[i + 2])) {
                    return false;
                }
                i += 3;
            } else if (detail::has(a[i], detail::regname_bit)) {
                ++i;
            } else {
                return false;
            }
        }
    }
    if (need_host && i == 0) {
        return false;
    }
    if (i == n) {
        return !need_port;
    }
    if (a[i] != ':') {
        return false;
    }
    const std::string_view port = a.substr(i + 1);
    if (need_port && port.empty()) {
        return false;
    }
    for (const char c : port) {
        if (!is_digit(c)) {
            return false;
        }
    }
    return true;
}

// The last Host value found valid on this thread (up to 62 bytes). The requests of a
// connection, and most of a server's, name the same host, and validity is a function of the
// bytes alone: a value equal to this one is valid without a second look; any other is checked
// in full (and kept if valid). Trivially destructible: no guard on a thread_local access.
struct valid_host_memo {
    std::uint8_t len = 0;  // 0: none kept
    char bytes[62] = {};
};
thread_local valid_host_memo tl_valid_host;

[[nodiscard]] auto valid_host(std::string_view v) noexcept -> bool {
    valid_host_memo& m = tl_valid_host;
    if (v.size() == m.len && !v.empty() && detail::swar::same_bytes(v.data(), m.bytes, v.size())) {
        return true;
    }
    if (!valid_authority(v, false, false)) {
        return false;
    }
    if (v.size() <= sizeof m.bytes) {
        std::memcpy(m.bytes, v.data(), v.size());
        m.len = static_cast<std::uint8_t>(v.size());
    }
    return true;
}

// Calls f(element) for each non-empty element of a comma-separated list (RFC 9110 5.6.1:
// empty elements are ignored), with surrounding whitespace removed.
template <typename F>
void for_each_element(std::string_view list, F&& f) {
    while (!list.empty()) {
        const std::size_t comma = list.find(',');
        std::string_view e = list.substr(0, comma);
        list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
        while (!e.empty() && is_ows(e.front())) {
            e.remove_prefix(1);
        }
        while (!e.empty() && is_ows(e.back())) {
            e.remove_suffix(1);
        }
        if (!e.empty()) {
            f(e);
        }
    }
}

}  // namespace

request_parser::request_parser(const request_limits& limits) noexcept
    : limits_(limits),
      line_limit_(static_cast<std::uint32_t>(std::min(limits.request_line, max_section) + 2)),
      block_limit_(static_cast<std::uint32_t>(std::min(limits.header_block, max_section))) {}

void request_parser::reset(const request_limits& limits) noexcept {
    limits_ = limits;
    line_limit_ = static_cast<std::uint32_t>(std::min(limits.request_line, max_section) + 2);
    block_limit_ = static_cast<std::uint32_t>(std::min(limits.header_block, max_section));
    reset();
}

void request_parser::reset() noexcept {
    head_.clear();
    state_ = state::lead;
    vpos_ = 0;
    error_ = parse_error::none;
    pos_ = mark_ = aux_ = vstart_ = fields_start_ = 0;
    content_length_ = 0;
    hosts_ = 0;
    has_content_length_ = has_transfer_encoding_ = chunked_last_ = other_coding_ = false;
    chunked_seen_ = connection_close_ = connection_keep_alive_ = false;
}

auto request_parser::parse(std::string_view input) -> parse_status {
    if (state_ == state::done) {
        return parse_status::complete;
    }
    if (state_ == state::failed) {
        return parse_status::error;
    }
    if (input.size() < pos_) {
        // The contract is "the same bytes, then more": fewer means the caller lost some.
        // Resuming at pos_ would read past the input, so this is an error, never a read.
        state_ = state::failed;
        error_ = parse_error::input_shrank;
        return parse_status::error;
    }
    const char* const base = input.data();
    head_.base_ = base;
    const detail::scan_ops& scan = detail::active_scan();
    const auto off = [base](const char* q) { return static_cast<std::uint32_t>(q - base); };

    state st = state_;
    const char* p = base + pos_;
    std::size_t limit =
        st < state::field ? std::size_t{line_limit_} : std::size_t{fields_start_} + block_limit_;
    const char* end = base + std::min(input.size(), limit);

    const auto fail = [&](parse_error e) {
        pos_ = off(p);
        state_ = state::failed;
        error_ = e;
        return parse_status::error;
    };

    for (;;) {
        switch (st) {
            case state::lead_lf:
                if (p == end) {
                    goto out;
                }
                if (*p != '\n') {
                    return fail(parse_error::bare_cr);
                }
                ++p;
                st = state::lead;
                continue;
            case state::lead:
                if (p == end) {
                    goto out;
                }
                if (*p == '\r') {
                    ++p;
                    st = state::lead_lf;
                    continue;
                }
                if (*p == '\n') {
                    return fail(parse_error::bare_lf);
                }
                mark_ = off(p);
                st = state::method;
                [[fallthrough]];
            case state::method:
                // GET, most requests' method, as one word: the byte loop stops at the same SP
                // (and classify() would name it get).
                if (off(p) == mark_ && end - p >= 4 && load4(p) == load4("GET ")) {
                    p += 3;
                    head_.method_ = method::get;
                } else {
                    while (p != end && is_tchar(*p)) {
                        ++p;
                    }
                }
                if (p == end) {
                    goto out;
                }
                if (off(p) == mark_) {
                    return fail(*p == ' ' || *p == '\t' ? parse_error::bad_request_line
                                                        : parse_error::bad_method);
                }
                if (*p != ' ') {
                    return fail(parse_error::bad_method);
                }
                head_.method_name_ = {mark_, off(p) - mark_};
                ++p;
                mark_ = off(p);
                aux_ = 0;
                st = state::target;
                [[fallthrough]];
            case state::target:
                for (;;) {
                    p = scan.target_stop(p, end);
                    if (p == end) {
                        goto out;
                    }
                    if (*p != '?') {
                        break;
                    }
                    if (aux_ == 0) {
                        aux_ = off(p);
                    }
                    ++p;
                }
                if (*p != ' ' || off(p) == mark_) {
                    if (*p == '#') {
                        return fail(parse_error::bad_target);
                    }
                    // A CR or LF here is a line without a version (HTTP/0.9); a second SP an
                    // empty target.
                    return fail(*p == ' ' || *p == '\r' || *p == '\n'
                                    ? parse_error::bad_request_line
                                    : parse_error::bad_target);
                }
                head_.target_ = {mark_, off(p) - mark_};
                ++p;
                mark_ = off(p);
                vpos_ = 0;
                st = state::version;
                [[fallthrough]];
            case state::version:
                // The usual version, "HTTP/1." and a digit, as one word (the byte loop below
                // accepts exactly these too, and tells every other form's error).
                if (vpos_ == 0 && end - p >= 8) {
                    const std::uint64_t w = detail::swar::load(p);
                    constexpr std::uint64_t first7 = 0x00FFFFFFFFFFFFFFULL;
                    if ((w & first7) == (detail::swar::load("HTTP/1.0") & first7) &&
                        is_digit(p[7])) {
                        p += 8;
                        vpos_ = 8;
                    }
                }
                for (; vpos_ < 8; ++vpos_, ++p) {
                    if (p == end) {
                        goto out;
                    }
                    const char c = *p;
                    const bool ok = vpos_ < 5    ? c == "HTTP/"[vpos_]
                                    : vpos_ == 6 ? c == '.'
                                                 : is_digit(c);
                    if (!ok) {
                        return fail(c == '\r'   ? parse_error::bad_version
                                    : c == '\n' ? parse_error::bare_lf
                                                : parse_error::bad_version);
                    }
                }
                st = state::line_cr;
                [[fallthrough]];
            case state::line_cr:
                if (p == end) {
                    goto out;
                }
                if (*p != '\r') {
                    return fail(*p == '\n' ? parse_error::bare_lf : parse_error::bad_version);
                }
                ++p;
                st = state::line_lf;
                [[fallthrough]];
            case state::line_lf:
                if (p == end) {
                    goto out;
                }
                if (*p != '\n') {
                    return fail(parse_error::bare_cr);
                }
                ++p;
                fields_start_ = off(p);
                if (const parse_error e = finish_request_line(base); e != parse_error::none) {
                    return fail(e);
                }
                limit = std::size_t{fields_start_} + block_limit_;
                end = base + std::min(input.size(), limit);
                st = state::field;
                [[fallthrough]];
            case state::field:
                if (p == end) {
                    goto out;
                }
                if (!is_tchar(*p)) {
                    if (*p == '\r') {
                        ++p;
                        st = state::end_lf;
                        continue;
                    }
                    if (is_ows(*p)) {
                        return fail(head_.count_ == 0 ? parse_error::whitespace_before_first_field
                                                      : parse_error::obs_fold);
                    }
                    return fail(*p == '\n' ? parse_error::bare_lf : parse_error::bad_field_name);
                }
                mark_ = off(p);
                // Host, the field every HTTP/1.1 request has, as one word and its colon: the
                // byte loop stops at the same colon (a folded byte equal to a letter of "host"
                // is that letter in either case, both tokens).
                if (end - p >= 5 && (load4(p) | 0x20202020U) == load4("host") && p[4] == ':') {
                    p += 4;
                } else {
                    ++p;
                }
                st = state::name;
                [[fallthrough]];
            case state::name:
                while (p != end && is_tchar(*p)) {
                    ++p;
                }
                if (p == end) {
                    goto out;
                }
                if (*p != ':') {
                    return fail(is_ows(*p)   ? parse_error::whitespace_before_colon
                                : *p == '\n' ? parse_error::bare_lf
                                             : parse_error::bad_field_name);
                }
                aux_ = off(p);
                ++p;
                st = state::value_ows;
                [[fallthrough]];
            case state::value_ows:
                while (p != end && is_ows(*p)) {
                    ++p;
                }
                if (p == end) {
                    goto out;
                }
                vstart_ = off(p);
                st = state::value;
                [[fallthrough]];
            case state::value:
                p = scan.value_stop(p, end);
                if (p == end) {
                    goto out;
                }
                if (*p != '\r') {
                    return fail(*p == '\n' ? parse_error::bare_lf : parse_error::bad_field_value);
                }
                ++p;
                st = state::value_lf;
                [[fallthrough]];
            case state::value_lf: {
                if (p == end) {
                    goto out;
                }
                if (*p != '\n') {
                    return fail(parse_error::bare_cr);
                }
                // The value ends before the CR and any whitespace before it (it cannot start
                // with whitespace: value_ows skipped that).
                std::uint32_t vend = off(p) - 1;
                while (vend > vstart_ && is_ows(base[vend - 1])) {
                    --vend;
                }
                ++p;
                if (const parse_error e =
                        finish_field(base, {mark_, aux_ - mark_}, {vstart_, vend - vstart_});
                    e != parse_error::none) {
                    return fail(e);
                }
                st = state::field;
                continue;
            }
            case state::end_lf:
                if (p == end) {
                    goto out;
                }
                if (*p != '\n') {
                    return fail(parse_error::bare_cr);
                }
                ++p;
                pos_ = off(p);
                head_.size_ = pos_;
                if (const parse_error e = finish_head(); e != parse_error::none) {
                    return fail(e);
                }
                state_ = state::done;
                return parse_status::complete;
            case state::done:
            case state::failed:
                break;
        }
    }
out:
    if (off(p) == limit) {
        // The section is unfinished at its limit: whatever follows, it is over.
        return fail(st < state::field ? parse_error::request_line_too_long
                                      : parse_error::header_block_too_large);
    }
    pos_ = off(p);
    state_ = st;
    return parse_status::incomplete;
}

auto request_parser::finish_request_line(const char* base) noexcept -> parse_error {
    // mark_ is the version's first byte; its form was checked byte by byte.
    if (base[mark_ + 5] != '1') {
        return parse_error::unsupported_version;
    }
    head_.version_minor_ = base[mark_ + 7] == '0' ? 0 : 1;
    if (head_.method_ == method::other) {  // not named by the method state's GET word
        head_.method_ = classify(head_.method_name());
    }

    const request_head::piece t = head_.target_;
    const std::string_view target = head_.target();
    const std::uint32_t t_end = t.off + t.len;
    // The first '?' (aux_) splits path and query.
    const std::uint32_t q = aux_ != 0 ? aux_ : t_end;
    const auto set_query = [&] {
        if (aux_ != 0) {
            head_.has_query_ = true;
            head_.query_ = {aux_ + 1, t_end - aux_ - 1};
        }
    };

    if (head_.method_ == method::connect) {
        // authority-form, and only it (RFC 9112 3.2.3): host ":" port.
        if (aux_ != 0 || !valid_authority(target, true, true)) {
            return parse_error::bad_target;
        }
        head_.form_ = target_form::authority;
        head_.authority_ = t;
        return parse_error::none;
    }
    if (target[0] == '/') {
        head_.form_ = target_form::origin;
        head_.path_ = {t.off, q - t.off};
        set_query();
        return parse_error::none;
    }
    if (target == "*") {
        if (head_.method_ != method::options) {
            return parse_error::bad_target;
        }
        head_.form_ = target_form::asterisk;
        head_.path_ = t;
        return parse_error::none;
    }
    // absolute-form: scheme "://" authority path-abempty [ "?" query ]. Only hierarchical
    // URIs with an authority name a server; the authority must have a host (RFC 9110 4.2.1).
    std::size_t i = 0;
    const std::size_t before_query = q - t.off;
    while (i < before_query &&
           ((target[i] >= 'a' && target[i] <= 'z') || (target[i] >= 'A' && target[i] <= 'Z') ||
            (i > 0 &&
             (is_digit(target[i]) || target[i] == '+' || target[i] == '-' || target[i] == '.')))) {
        ++i;
    }
    if (i == 0 || target.substr(i, 3) != "://" || i + 3 > before_query) {
        return parse_error::bad_target;
    }
    const std::size_t a_start = i + 3;
    std::size_t a_end = a_start;
    while (a_end < before_query && target[a_end] != '/') {
        ++a_end;
    }
    const std::string_view authority = target.substr(a_start, a_end - a_start);
    if (!valid_authority(authority, true, false)) {
        return parse_error::bad_target;
    }
    head_.form_ = target_form::absolute;
    head_.authority_ = {t.off + static_cast<std::uint32_t>(a_start),
                        static_cast<std::uint32_t>(authority.size())};
    head_.path_ = {t.off + static_cast<std::uint32_t>(a_end),
                   static_cast<std::uint32_t>(before_query - a_end)};
    set_query();
    return parse_error::none;
}

auto request_parser::finish_field(const char* base,
                                  request_head::piece name,
                                  request_head::piece value) -> parse_error {
    if (head_.count_ >= limits_.fields) {
        return parse_error::too_many_fields;
    }
    head_.add_field(name, value);
    const std::string_view n{base + name.off, name.len};
    const std::string_view v{base + value.off, value.len};
    switch (n.size()) {
        case 4:
            if (name_is(n, "host")) {
                if (++hosts_ > 1) {
                    return parse_error::repeated_host;
                }
                if (!valid_host(v)) {
                    return parse_error::bad_host;
                }
                head_.host_ = value;
            }
            break;
        case 6:
            if (name_is(n, "expect") && head_.version_minor_ >= 1) {
                parse_error e = parse_error::none;
                for_each_element(v, [&](std::string_view x) {
                    if (detail::iequals(x, "100-continue")) {
                        head_.expect_continue_ = true;
                    } else {
                        e = parse_error::unsupported_expectation;
                    }
                });
                return e;
            }
            break;
        case 10:
            if (name_is(n, "connection")) {
                for_each_element(v, [&](std::string_view x) {
                    if (detail::iequals(x, "close")) {
                        connection_close_ = true;
                    } else if (detail::iequals(x, "keep-alive")) {
                        connection_keep_alive_ = true;
                    }
                });
            }
            break;
        case 14:
            if (name_is(n, "content-length")) {
                if (has_transfer_encoding_) {
                    return parse_error::content_length_with_transfer_encoding;
                }
                // 1*DIGIT, nothing else: no sign, no hex, no inner spaces, no list (RFC 9110 8.6
                // lets a recipient reject "42, 42"; weft does, as Go and hyper do).
                if (v.empty()) {
                    return parse_error::bad_content_length;
                }
                std::uint64_t len = 0;
                for (char c : v) {
                    if (!is_digit(c)) {
                        return parse_error::bad_content_length;
                    }
                    const auto d = static_cast<std::uint64_t>(c - '0');
                    if (len > (std::numeric_limits<std::uint64_t>::max() - d) / 10) {
                        return parse_error::bad_content_length;
                    }
                    len = len * 10 + d;
                }
                if (has_content_length_ && len != content_length_) {
                    return parse_error::conflicting_content_length;
                }
                has_content_length_ = true;
                content_length_ = len;
            }
            break;
        case 17:
            if (name_is(n, "transfer-encoding")) {
                if (head_.version_minor_ == 0) {
                    return parse_error::transfer_encoding_in_http10;
                }
                if (has_content_length_) {
                    return parse_error::content_length_with_transfer_encoding;
                }
                has_transfer_encoding_ = true;
                bool any = false;
                parse_error e = parse_error::none;
                for_each_element(v, [&](std::string_view x) {
                    any = true;
                    if (detail::iequals(x, "chunked")) {
                        if (chunked_seen_) {
                            e = parse_error::bad_transfer_encoding;  // chunked twice
                        }
                        chunked_seen_ = chunked_last_ = true;
                        return;
                    }
                    // transfer-coding = token *( OWS ";" OWS transfer-parameter ): a coding
                    // whose name is not a token is malformed (400), not unknown (501).
                    std::string_view name = x.substr(0, x.find(';'));
                    while (!name.empty() && is_ows(name.back())) {
                        name.remove_suffix(1);
                    }
                    if (name.empty() || !std::all_of(name.begin(), name.end(), is_tchar)) {
                        e = parse_error::bad_transfer_encoding;
                    }
                    other_coding_ = true;  // chunked with a parameter too: not the chunked coding
                    chunked_last_ = false;
                });
                if (!any) {
                    return parse_error::bad_transfer_encoding;
                }
                return e;
            }
            break;
        default:
            break;
    }
    return parse_error::none;
}

auto request_parser::finish_head() noexcept -> parse_error {
    if (head_.version_minor_ >= 1 && hosts_ == 0) {
        return parse_error::missing_host;
    }
    if (has_transfer_encoding_) {
        // A list whose last coding is not chunked leaves the body's length unknowable: 400
        // (RFC 9112 6.3). One that ends in chunked is framed, but a coding before it (gzip or an
        // unknown one: weft implements none but chunked) cannot be decoded: 501 (RFC 9112 6.1).
        if (!chunked_last_) {
            return parse_error::chunked_not_last;
        }
        if (other_coding_) {
            return parse_error::unsupported_transfer_coding;
        }
        head_.framing_ = {body_kind::chunked, 0};
    } else if (has_content_length_) {
        if (content_length_ > limits_.body) {
            return parse_error::body_too_large;
        }
        head_.framing_ = {body_kind::content_length, content_length_};
    }
    head_.keep_alive_ = !connection_close_ && (head_.version_minor_ >= 1 || connection_keep_alive_);
    return parse_error::none;
}

}  // namespace weft::http
