#include "response_head.hpp"

#include <charconv>
#include <cstring>
#include <ctime>
#include <optional>

#include "http_date.hpp"
#include "swar.hpp"

namespace weft::http::detail {

namespace {

// Appends `v` at p; returns the end.
auto put(char* p, std::string_view v) noexcept -> char* {
    std::memcpy(p, v.data(), v.size());
    return p + v.size();
}

// Bytes p[0..3] as one word, in memory order (compared only with another load4).
auto load4(const char* p) noexcept -> std::uint32_t {
    std::uint32_t v = 0;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// a[0, n) == b[0, n), for the cache key's strings (a Server name such as "weft", a
// Content-Type): no byte loop from 4 bytes on (two overlapping words of 4, or swar's of 8).
auto same_key_bytes(const char* a, const char* b, std::size_t n) noexcept -> bool {
    if (n >= 8) {
        return swar::same_bytes(a, b, n);
    }
    if (n >= 4) {
        return load4(a) == load4(b) && load4(a + n - 4) == load4(b + n - 4);
    }
    for (std::size_t i = 0; i < n; ++i) {
        if (a[i] != b[i]) {
            return false;
        }
    }
    return true;
}

// Appends the decimal digits of `v`; returns the end. A body under 1,000 bytes (most in-memory
// responses) takes one to three digits without to_chars' length count and table.
auto put_length(char* p, std::uint64_t v) noexcept -> char* {
    if (v < 10) {
        *p++ = static_cast<char>('0' + v);
        return p;
    }
    if (v < 100) {
        p[0] = static_cast<char>('0' + v / 10);
        p[1] = static_cast<char>('0' + v % 10);
        return p + 2;
    }
    if (v < 1000) {
        p[0] = static_cast<char>('0' + v / 100);
        p[1] = static_cast<char>('0' + v / 10 % 10);
        p[2] = static_cast<char>('0' + v % 10);
        return p + 3;
    }
    return std::to_chars(p, p + 20, v).ptr;
}

// The start of a head: the status line, Server (if named), Date and Content-Type (if any).
// At most head_start_max(reason, server, date, type) bytes.
auto put_head_start(char* p,
                    int status,
                    std::string_view reason,
                    std::string_view server,
                    std::string_view date,
                    std::string_view type) noexcept -> char* {
    p = put(p, "HTTP/1.1 ");
    *p++ = static_cast<char>('0' + status / 100 % 10);
    *p++ = static_cast<char>('0' + status / 10 % 10);
    *p++ = static_cast<char>('0' + status % 10);
    *p++ = ' ';
    p = put(p, reason);
    p = put(p, "\r\n");
    if (!server.empty()) {
        p = put(p, "Server: ");
        p = put(p, server);
        p = put(p, "\r\n");
    }
    p = put(p, "Date: ");
    p = put(p, date);
    p = put(p, "\r\n");
    if (!type.empty()) {
        p = put(p, "Content-Type: ");
        p = put(p, type);
        p = put(p, "\r\n");
    }
    return p;
}

constexpr auto head_start_max(std::string_view reason,
                              std::string_view server,
                              std::string_view date,
                              std::string_view type) noexcept -> std::size_t {
    return 13 + reason.size() + 2 + 10 + server.size() + 8 + date.size() + 16 + type.size();
}

// The start of the last head written on this thread (put_head_start's bytes), reused while the
// next head's status, Server, Date and Content-Type are the same: most responses of a server
// share all four, so their head is one copy of this, then Content-Length and the end. Rebuilt
// when one differs (the Date once a second); a Server or Content-Type too long for it is never
// kept (such heads are rendered in full). Trivially destructible, so the thread_local needs no
// guard on access. NOTE: only read from ordinary functions (append_response_head), never
// across a coroutine's suspension (see take_request_state).
struct head_start_cache {
    std::time_t second = -1;  // http_date()'s second when rendered; -1: nothing kept
    int status = 0;
    std::uint8_t server_len = 0;
    std::uint8_t type_len = 0;
    std::uint16_t len = 0;
    char server[64] = {};
    char type[64] = {};
    char text[256] = {};
};
thread_local head_start_cache tl_head_start;
static_assert(head_start_max(std::string_view{"Request Header Fields Too Large"},
                             std::string_view{"0123456789012345678901234567890123456789012345678901"
                                              "234567890123"},
                             std::string_view{"Sun, 06 Nov 1994 08:49:37 GMT"},
                             std::string_view{"0123456789012345678901234567890123456789012345678901"
                                              "234567890123"}) <= sizeof head_start_cache::text);

}  // namespace

auto append_response_head(output_buffer& out,
                          const response& r,
                          std::string_view server_name,
                          const head_framing& framing,
                          std::string_view small_body) -> std::size_t {
    const int status = r.status();
    const std::string_view server = server_name;
    const http_date_value now = http_date();
    const std::string_view date = now.text;
    const std::string_view type = r.content_type();
    head_start_cache& c = tl_head_start;
    bool from_cache = c.second == now.second && c.status == status && c.type_len == type.size() &&
                      c.server_len == server.size() &&
                      same_key_bytes(c.type, type.data(), type.size()) &&
                      same_key_bytes(c.server, server.data(), server.size());
    if (!from_cache && type.size() <= sizeof c.type && server.size() <= sizeof c.server) {
        const char* const end =
            put_head_start(c.text, status, reason_phrase(status), server, date, type);
        c.len = static_cast<std::uint16_t>(end - c.text);
        if (!type.empty()) {  // (an empty view's data() may be null: no memcpy from it)
            std::memcpy(c.type, type.data(), type.size());
        }
        c.type_len = static_cast<std::uint8_t>(type.size());
        if (!server.empty()) {
            std::memcpy(c.server, server.data(), server.size());
        }
        c.server_len = static_cast<std::uint8_t>(server.size());
        c.status = status;
        c.second = now.second;
        from_cache = true;
    }
    const std::string_view reason = from_cache ? std::string_view{} : reason_phrase(status);
    std::size_t need =
        (from_cache ? c.len : head_start_max(reason, server, date, type)) + 96 + small_body.size();
    const response::header_list& fields = r.headers();
    for (const auto& [name, value] : fields) {
        need += name.size() + value.size() + 4;
    }
    char* const begin = out.prepare(need);
    char* p = from_cache ? put(begin, {c.text, c.len})
                         : put_head_start(begin, status, reason, server, date, type);
    for (const auto& [name, value] : fields) {
        p = put(p, name);
        p = put(p, ": ");
        p = put(p, value);
        p = put(p, "\r\n");
    }
    if (status >= 200 && status != 204) {
        std::uint64_t length = framing.length;
        bool chunked = framing.chunked;
        std::optional<std::uint64_t> stated;
        if (status == 304 || (framing.head_request && r.form() == body_form::none)) {
            stated = r.declared_length();
        }
        if (stated) {
            length = *stated;
            chunked = false;
        } else if (status == 304) {
            length = UINT64_MAX;
            chunked = false;
        }
        if (chunked) {
            p = put(p, "Transfer-Encoding: chunked\r\n");
        } else if (length != UINT64_MAX) {
            p = put(p, "Content-Length: ");
            p = put_length(p, length);
            p = put(p, "\r\n");
        }
    }
    if (!framing.keep) {
        p = put(p, "Connection: close\r\n\r\n");
    } else if (framing.version_minor == 0) {
        p = put(p, "Connection: keep-alive\r\n\r\n");
    } else {
        p = put(p, "\r\n");
    }
    if (!small_body.empty()) {
        p = put(p, small_body);
    }
    const auto len = static_cast<std::size_t>(p - begin);
    out.commit(len);
    return len;
}

}  // namespace weft::http::detail
