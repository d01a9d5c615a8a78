#include "weft/http/response.hpp"

#include <unistd.h>

#include <charconv>
#include <cstring>
#include <stdexcept>

#include "char_class.hpp"
#include "swar.hpp"

namespace weft::http {

auto reason_phrase(int status) noexcept -> std::string_view {
    switch (status) {
        case 100:
            return "Continue";
        case 101:
            return "Switching Protocols";
        case 200:
            return "OK";
        case 201:
            return "Created";
        case 202:
            return "Accepted";
        case 204:
            return "No Content";
        case 206:
            return "Partial Content";
        case 301:
            return "Moved Permanently";
        case 302:
            return "Found";
        case 303:
            return "See Other";
        case 304:
            return "Not Modified";
        case 307:
            return "Temporary Redirect";
        case 308:
            return "Permanent Redirect";
        case 400:
            return "Bad Request";
        case 401:
            return "Unauthorized";
        case 403:
            return "Forbidden";
        case 404:
            return "Not Found";
        case 405:
            return "Method Not Allowed";
        case 408:
            return "Request Timeout";
        case 409:
            return "Conflict";
        case 411:
            return "Length Required";
        case 412:
            return "Precondition Failed";
        case 413:
            return "Content Too Large";
        case 414:
            return "URI Too Long";
        case 415:
            return "Unsupported Media Type";
        case 416:
            return "Range Not Satisfiable";
        case 417:
            return "Expectation Failed";
        case 426:
            return "Upgrade Required";
        case 429:
            return "Too Many Requests";
        case 431:
            return "Request Header Fields Too Large";
        case 500:
            return "Internal Server Error";
        case 501:
            return "Not Implemented";
        case 502:
            return "Bad Gateway";
        case 503:
            return "Service Unavailable";
        case 504:
            return "Gateway Timeout";
        case 505:
            return "HTTP Version Not Supported";
        default:
            return "Unknown";
    }
}

namespace {

using detail::iequals;

// Header injection: a CR or LF in a name or value would let a handler's data start a new
// field or a new response; NUL is refused by every client.
[[noreturn]] void refuse_value() {
    throw std::invalid_argument("weft::http::response: CR, LF or NUL in a header value");
}

void check_value_bytes(std::string_view value) {
    for (char c : value) {
        // One compare for nearly every byte: CR, LF and NUL are all <= '\r'.
        if (static_cast<unsigned char>(c) <= '\r' && (c == '\r' || c == '\n' || c == '\0')) {
            refuse_value();
        }
    }
}

// Eight bytes at a time (every response's Content-Type passes here): a word with no byte below
// 0x0E holds none of CR, LF and NUL (swar::below flags none exactly then); a word that may hold
// one is looked at byte by byte. A value of 8 bytes or more ends with the word of its last 8
// bytes (overlapping the one before): no byte loop for the tail.
void check_value(std::string_view value) {
    const std::size_t n = value.size();
    if (n < 8) {
        check_value_bytes(value);
        return;
    }
    const char* const p = value.data();
    const auto word = [p](std::size_t i) {
        if (detail::swar::below(detail::swar::load(p + i), 0x0E) != 0) {
            check_value_bytes({p + i, 8});
        }
    };
    for (std::size_t i = 0; i + 8 < n; i += 8) {
        word(i);
    }
    word(n - 8);
}

void check_field(std::string_view name, std::string_view value) {
    if (name.empty()) {
        throw std::invalid_argument("weft::http::response: empty header name");
    }
    for (char c : name) {
        if (!detail::is_tchar(c)) {
            throw std::invalid_argument("weft::http::response: header name is not a token");
        }
    }
    check_value(value);
}

const response::header_list no_headers;

// Whether the Connection list `v` holds the token close (ASCII case-insensitive).
auto has_close(std::string_view v) noexcept -> bool {
    while (!v.empty()) {
        const std::size_t comma = v.find(',');
        std::string_view e = v.substr(0, comma);
        v = comma == std::string_view::npos ? std::string_view{} : v.substr(comma + 1);
        while (!e.empty() && detail::is_ows(e.front())) {
            e.remove_prefix(1);
        }
        while (!e.empty() && detail::is_ows(e.back())) {
            e.remove_suffix(1);
        }
        if (iequals(e, "close")) {
            return true;
        }
    }
    return false;
}

}  // namespace

struct response::rest {
    std::string long_type;       // a Content-Type longer than inline_part::type holds
    header_list headers;         // neither Content-Length nor Connection: they are below
    std::string content_length;  // 1*DIGIT as set; empty: none
    std::string connection;      // as set (values joined by ", "); empty: none
    bool close = false;          // `connection` holds the token close
    bytes bytes_body;
    file_body file;  // owned: closed here unless sent (fd -1)
    stream_body stream;

    rest() = default;
    rest(const rest&) = delete;
    auto operator=(const rest&) -> rest& = delete;
    ~rest() { close_file(); }
    void close_file() noexcept {
        if (file.fd >= 0) {
            ::close(file.fd);
            file.fd = -1;
        }
    }
};

void response::rest_deleter::operator()(rest* p) const noexcept { delete p; }

auto response::get_rest() -> rest& {
    if (!rest_) {
        rest_.reset(new rest());
    }
    return *rest_;
}

auto response::long_type() const noexcept -> std::string_view {
    return rest_ ? std::string_view{rest_->long_type} : std::string_view{};
}

auto response::headers() const noexcept -> const header_list& {
    return rest_ ? rest_->headers : no_headers;
}

auto response::declared_length() const noexcept -> std::optional<std::uint64_t> {
    if (!rest_ || rest_->content_length.empty()) {
        return std::nullopt;
    }
    const std::string& v = rest_->content_length;
    std::uint64_t n = 0;
    (void)std::from_chars(v.data(), v.data() + v.size(), n);  // checked when set
    return n;
}

auto response::rest_closes() const noexcept -> bool { return rest_->close; }

auto response::body_bytes() noexcept -> bytes& { return rest_->bytes_body; }
auto response::body_file() noexcept -> file_body& { return rest_->file; }
auto response::body_stream() noexcept -> stream_body& { return rest_->stream; }

void response::drop_body() noexcept {
    if (rest_) {
        rest_->bytes_body = bytes{};
        rest_->close_file();
        rest_->stream = {};
    }
}

auto response::text(std::string body, int status) -> response {
    static constexpr std::string_view plain = "text/plain; charset=utf-8";
    static_assert(plain.size() <= sizeof inline_part::type);
    response r{status};
    std::memcpy(r.in_.type, plain.data(), plain.size());
    r.in_.type_len = static_cast<std::uint8_t>(plain.size());
    r.text_ = std::move(body);
    r.in_.form = body_form::text;
    return r;
}

auto response::text(std::string body, int status, std::string_view content_type) -> response {
    response r{status};
    r.set_content_type(content_type);
    r.text_ = std::move(body);
    r.in_.form = body_form::text;
    return r;
}

auto response::of_bytes(bytes body, int status, std::string_view content_type) -> response {
    response r{status};
    r.set_content_type(content_type);
    r.get_rest().bytes_body = std::move(body);
    r.in_.form = body_form::bytes;
    return r;
}

auto response::file(int fd,
                    std::uint64_t offset,
                    std::uint64_t length,
                    std::string_view content_type) -> response {
    response r{200};
    r.set_content_type(content_type);  // these two may throw: fd is still the caller's then
    rest& x = r.get_rest();
    x.file = file_body{fd, offset, length};
    r.in_.form = body_form::file;
    return r;
}

auto response::stream(std::function<task<result<void>>(body_writer&)> fn,
                      std::optional<std::uint64_t> length,
                      std::string_view content_type) -> response {
    response r{200};
    r.set_content_type(content_type);
    r.get_rest().stream = stream_body{std::move(fn), length};
    r.in_.form = body_form::stream;
    return r;
}

void response::set_content_type(std::string_view type) {
    check_value(type);
    if (type.size() <= sizeof in_.type) {
        if (!type.empty()) {  // (an empty view's data() may be null: no memcpy from it)
            std::memcpy(in_.type, type.data(), type.size());
        }
        in_.type_len = static_cast<std::uint8_t>(type.size());
        if (rest_) {
            rest_->long_type.clear();
        }
    } else {
        get_rest().long_type = type;
        in_.type_len = 0;
    }
}

auto response::framing_field(std::string_view name, std::string_view value, bool add) -> bool {
    if (iequals(name, "content-length")) {
        // For an unsigned type from_chars reads digits only (no sign, no space, no "0x") and
        // fails on none and on a value over 64 bits.
        std::uint64_t n = 0;
        const char* const end = value.data() + value.size();
        const auto [ptr, ec] = std::from_chars(value.data(), end, n);
        if (ec != std::errc{} || ptr != end) {
            throw std::invalid_argument("weft::http::response: Content-Length is not 1*DIGIT");
        }
        get_rest().content_length = value;  // one Content-Length only
        return true;
    }
    if (iequals(name, "connection")) {
        check_value(value);
        rest& x = get_rest();
        if (add && !x.connection.empty()) {
            x.connection.append(", ").append(value);
        } else {
            x.connection = value;
        }
        x.close = has_close(x.connection);
        return true;
    }
    if (iequals(name, "transfer-encoding")) {
        throw std::invalid_argument(
            "weft::http::response: Transfer-Encoding is the server's (a stream without a length "
            "is sent chunked)");
    }
    return false;
}

void response::add_header(std::string_view name, std::string_view value) {
    if (iequals(name, "content-type")) {
        set_content_type(value);  // one Content-Type only
        return;
    }
    if (framing_field(name, value, true)) {
        return;
    }
    check_field(name, value);
    get_rest().headers.emplace_back(name, value);
}

void response::set_header(std::string_view name, std::string_view value) {
    if (iequals(name, "content-type")) {
        set_content_type(value);
        return;
    }
    if (framing_field(name, value, false)) {
        return;
    }
    check_field(name, value);
    header_list& h = get_rest().headers;
    std::erase_if(h, [&](const auto& f) { return iequals(f.first, name); });
    h.emplace_back(name, value);
}

auto response::header(std::string_view name) const noexcept -> std::optional<std::string_view> {
    if (iequals(name, "content-type")) {
        const std::string_view t = content_type();
        return t.empty() ? std::nullopt : std::optional<std::string_view>{t};
    }
    if (iequals(name, "content-length") || iequals(name, "connection")) {
        const std::string* v = nullptr;
        if (rest_) {
            v = name.size() == 10 ? &rest_->connection : &rest_->content_length;
        }
        return v == nullptr || v->empty() ? std::nullopt : std::optional<std::string_view>{*v};
    }
    for (const auto& [n, v] : headers()) {
        if (iequals(n, name)) {
            return std::string_view{v};
        }
    }
    return std::nullopt;
}

}  // namespace weft::http
