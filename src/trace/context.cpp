#include "weft/trace/context.hpp"

#include <cstddef>
#include <random>
#include <string>

namespace weft::trace {

namespace {

constexpr char hex_digits[] = "0123456789abcdef";

/// A lowercase hex digit's value, -1 otherwise (W3C: HEXDIGLC; upper case is invalid).
auto lower_hex(char c) noexcept -> int {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1;
}

template <std::size_t N>
auto read_hex(std::string_view s, std::array<std::uint8_t, N>& out) noexcept -> bool {
    for (std::size_t i = 0; i < N; ++i) {
        const int hi = lower_hex(s[2 * i]);
        const int lo = lower_hex(s[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            return false;
        }
        out[i] = static_cast<std::uint8_t>(hi * 16 + lo);
    }
    return true;
}

template <std::size_t N>
auto to_hex(const std::array<std::uint8_t, N>& b) -> std::string {
    std::string s(2 * N, '0');
    for (std::size_t i = 0; i < N; ++i) {
        s[2 * i] = hex_digits[b[i] >> 4];
        s[2 * i + 1] = hex_digits[b[i] & 0xf];
    }
    return s;
}

template <std::size_t N>
auto any_set(const std::array<std::uint8_t, N>& b) noexcept -> bool {
    for (const std::uint8_t x : b) {
        if (x != 0) {
            return true;
        }
    }
    return false;
}

auto blank(char c) noexcept -> bool { return c == ' ' || c == '\t'; }

auto trim(std::string_view s) noexcept -> std::string_view {
    while (!s.empty() && blank(s.front())) {
        s.remove_prefix(1);
    }
    while (!s.empty() && blank(s.back())) {
        s.remove_suffix(1);
    }
    return s;
}

auto lcalpha(char c) noexcept -> bool { return c >= 'a' && c <= 'z'; }
auto digit(char c) noexcept -> bool { return c >= '0' && c <= '9'; }
auto key_char(char c) noexcept -> bool {
    return lcalpha(c) || digit(c) || c == '_' || c == '-' || c == '*' || c == '/';
}

auto valid_key(std::string_view k) noexcept -> bool {
    const std::size_t at = k.find('@');
    if (at == std::string_view::npos) {
        if (k.empty() || k.size() > 256 || !lcalpha(k[0])) {
            return false;
        }
        for (const char c : k.substr(1)) {
            if (!key_char(c)) {
                return false;
            }
        }
        return true;
    }
    const std::string_view tenant = k.substr(0, at);
    const std::string_view system = k.substr(at + 1);
    if (tenant.empty() || tenant.size() > 241 || !(lcalpha(tenant[0]) || digit(tenant[0]))) {
        return false;
    }
    if (system.empty() || system.size() > 14 || !lcalpha(system[0])) {
        return false;
    }
    for (const char c : tenant.substr(1)) {
        if (!key_char(c)) {
            return false;
        }
    }
    for (const char c : system.substr(1)) {
        if (!key_char(c)) {  // a second '@' lands here
            return false;
        }
    }
    return true;
}

/// chr = %x20 / nblk-chr; nblk-chr = %x21-2B / %x2D-3C / %x3E-7E; the last one not blank.
auto valid_value(std::string_view v) noexcept -> bool {
    if (v.empty() || v.size() > 256 || v.back() == ' ') {
        return false;
    }
    for (const char ch : v) {
        const auto c = static_cast<unsigned char>(ch);
        if (c < 0x20 || c > 0x7e || c == ',' || c == '=') {
            return false;
        }
    }
    return true;
}

auto thread_generator() noexcept -> std::mt19937_64& {
    // NOTE: per thread, so no lock; a coroutine that migrates between workers draws from
    // whichever thread runs it, which is as random.
    thread_local std::mt19937_64 gen = [] {
        std::random_device rd;
        std::seed_seq seq{rd(), rd(), rd(), rd()};
        return std::mt19937_64(seq);
    }();
    return gen;
}

template <std::size_t N>
void fill_random(std::array<std::uint8_t, N>& b) noexcept {
    auto& gen = thread_generator();
    do {
        for (std::size_t i = 0; i < N; i += 8) {
            std::uint64_t r = gen();
            for (std::size_t k = i; k < N && k < i + 8; ++k) {
                b[k] = static_cast<std::uint8_t>(r);
                r >>= 8;
            }
        }
    } while (!any_set(b));
}

}  // namespace

auto trace_id::valid() const noexcept -> bool { return any_set(bytes); }
auto trace_id::hex() const -> std::string { return to_hex(bytes); }
auto span_id::valid() const noexcept -> bool { return any_set(bytes); }
auto span_id::hex() const -> std::string { return to_hex(bytes); }

auto parse_traceparent(std::string_view s) -> std::optional<context> {
    // 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
    // 0  3                                36               53
    constexpr std::size_t v00_size = 55;
    if (s.size() < v00_size) {
        return std::nullopt;
    }
    const int v_hi = lower_hex(s[0]);
    const int v_lo = lower_hex(s[1]);
    if (v_hi < 0 || v_lo < 0) {
        return std::nullopt;
    }
    const int version = v_hi * 16 + v_lo;
    if (version == 0xff) {
        return std::nullopt;
    }
    if (version == 0 ? s.size() != v00_size : (s.size() > v00_size && s[v00_size] != '-')) {
        return std::nullopt;
    }
    if (s[2] != '-' || s[35] != '-' || s[52] != '-') {
        return std::nullopt;
    }
    context ctx;
    std::array<std::uint8_t, 1> flags{};
    if (!read_hex(s.substr(3, 32), ctx.trace.bytes) ||
        !read_hex(s.substr(36, 16), ctx.span.bytes) || !read_hex(s.substr(53, 2), flags)) {
        return std::nullopt;
    }
    if (!ctx.valid()) {
        return std::nullopt;
    }
    ctx.flags = static_cast<std::uint8_t>(flags[0] & 1U);
    return ctx;
}

auto valid_tracestate(std::string_view text) noexcept -> bool {
    std::size_t members = 0;
    // Keys seen, as views into `text`; 32 at most, so a linear search is enough.
    std::array<std::string_view, 32> keys{};
    while (true) {
        const std::size_t comma = text.find(',');
        const std::string_view member = trim(text.substr(0, comma));
        if (!member.empty()) {
            const std::size_t eq = member.find('=');
            if (eq == std::string_view::npos || members == keys.size()) {
                return false;
            }
            const std::string_view key = member.substr(0, eq);
            if (!valid_key(key) || !valid_value(member.substr(eq + 1))) {
                return false;
            }
            for (std::size_t i = 0; i < members; ++i) {
                if (keys[i] == key) {
                    return false;
                }
            }
            keys[members++] = key;
        }
        if (comma == std::string_view::npos) {
            return true;
        }
        text.remove_prefix(comma + 1);
    }
}

auto extract(std::optional<std::string_view> tp, std::optional<std::string_view> ts) -> context {
    if (!tp) {
        return {};
    }
    auto ctx = parse_traceparent(*tp);
    if (!ctx) {
        return {};
    }
    if (ts) {
        const std::string_view state = trim(*ts);
        if (valid_tracestate(state)) {
            ctx->state.assign(state);
        }
    }
    return std::move(*ctx);
}

auto traceparent(const context& ctx) -> std::string {
    std::string s;
    s.reserve(55);
    s += "00-";
    s += ctx.trace.hex();
    s += '-';
    s += ctx.span.hex();
    s += '-';
    s += hex_digits[ctx.flags >> 4];
    s += hex_digits[ctx.flags & 0xf];
    return s;
}

auto random_trace_id() noexcept -> trace_id {
    trace_id t;
    fill_random(t.bytes);
    return t;
}

auto random_span_id() noexcept -> span_id {
    span_id t;
    fill_random(t.bytes);
    return t;
}

}  // namespace weft::trace
