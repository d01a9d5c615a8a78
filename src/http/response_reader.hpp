#pragma once

// Reading one HTTP/1.1 response from a connection's receive buffer, shared by http::client and
// http::client_pool. Strict where a lax reader lets a response be read two ways (RFC 9112
// §6.3): Content-Length together with Transfer-Encoding, differing Content-Length values, a
// Transfer-Encoding other than chunked are refused, not guessed at; the head is bounded.

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "char_class.hpp"
#include "weft/core/result.hpp"
#include "weft/core/task.hpp"
#include "weft/http/body_decoder.hpp"
#include "weft/http/client.hpp"
#include "weft/io/error.hpp"

namespace weft::http::detail {

struct response_limits {
    std::size_t head = 64 * 1024;                 ///< status line and fields
    std::uint64_t body = std::uint64_t{1} << 30;  ///< the body, decoded
};

[[nodiscard]] inline auto bad_response() -> std::error_code {
    return std::make_error_code(std::errc::bad_message);
}

[[nodiscard]] inline auto trim_ows(std::string_view s) -> std::string_view {
    while (!s.empty() && is_ows(s.front())) {
        s.remove_prefix(1);
    }
    while (!s.empty() && is_ows(s.back())) {
        s.remove_suffix(1);
    }
    return s;
}

/// Reads the next response from `buf` (what was received and not yet consumed), calling
/// `fill()` (-> task<result<void>>, appends to `buf`) for more. On success the response's bytes
/// are consumed from `buf`; on an error the connection must not be reused.
/// Errors: bad_message (malformed or ambiguous framing, a chunked body cut short by a bad
/// chunk), message_size (a head or body over `limits`), the transport's (io_errc::eof when the
/// peer closed before the response was whole).
template <typename Fill>
auto read_response(std::string& buf, Fill fill, bool head_request, response_limits limits)
    -> task<result<client_response>> {
    std::size_t end;
    while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
        if (buf.size() > limits.head) {
            co_return std::make_error_code(std::errc::message_size);
        }
        if (auto r = co_await fill(); !r) {
            co_return r.error();
        }
    }
    if (end + 4 > limits.head) {
        co_return std::make_error_code(std::errc::message_size);
    }
    client_response out;
    std::string_view head{buf.data(), end + 2};
    const std::size_t eol = head.find("\r\n");
    std::string_view line = head.substr(0, eol);
    if (line.size() < 12 || line.substr(0, 7) != "HTTP/1." || line[8] != ' ' ||
        (line[7] != '0' && line[7] != '1')) {
        co_return bad_response();
    }
    out.version_minor = line[7] - '0';
    if (std::from_chars(line.data() + 9, line.data() + 12, out.status).ec != std::errc{} ||
        out.status < 100 || out.status > 999) {
        co_return bad_response();
    }
    out.keep_alive = out.version_minor == 1;
    std::optional<std::uint64_t> length;
    bool has_te = false;
    for (std::size_t at = eol + 2; at < head.size();) {
        const std::size_t e = head.find("\r\n", at);
        const std::string_view field = head.substr(at, e - at);
        at = e + 2;
        const std::size_t colon = field.find(':');
        if (colon == std::string_view::npos || colon == 0 || is_ows(field[colon - 1])) {
            co_return bad_response();
        }
        const std::string_view name = field.substr(0, colon);
        const std::string_view value = trim_ows(field.substr(colon + 1));
        if (iequals(name, "content-length")) {
            std::uint64_t v = 0;
            const auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
            if (ec != std::errc{} || p != value.data() + value.size() || (length && *length != v)) {
                co_return bad_response();
            }
            length = v;
        } else if (iequals(name, "transfer-encoding")) {
            if (has_te || !iequals(value, "chunked")) {
                co_return bad_response();  // only chunked alone is read; anything else is ambiguous
            }
            has_te = true;
            out.chunked = true;
        } else if (iequals(name, "connection")) {
            if (iequals(value, "close")) {
                out.keep_alive = false;
            } else if (iequals(value, "keep-alive")) {
                out.keep_alive = true;
            }
        }
        out.headers.emplace_back(name, value);
    }
    if (has_te && length) {
        co_return bad_response();  // RFC 9112 §6.3: a smuggling vector; refused, never guessed
    }
    buf.erase(0, end + 4);
    const bool no_body =
        head_request || out.status / 100 == 1 || out.status == 204 || out.status == 304;
    if (no_body) {
        co_return out;
    }
    if (out.chunked) {
        request_limits lim;
        lim.body = limits.body;
        body_decoder d{{body_kind::chunked, 0}, lim};
        for (;;) {
            const body_step s = d.decode(buf);
            if (s.status == body_status::data) {
                out.body.append(s.data);
            }
            buf.erase(0, s.consumed);
            if (s.status == body_status::done) {
                co_return out;
            }
            if (s.status == body_status::error) {
                co_return bad_response();
            }
            if (s.status == body_status::need_more) {
                if (auto r = co_await fill(); !r) {
                    co_return r.error();
                }
            }
        }
    }
    if (length) {
        if (*length > limits.body) {
            co_return std::make_error_code(std::errc::message_size);
        }
        while (buf.size() < *length) {
            if (auto r = co_await fill(); !r) {
                co_return r.error();
            }
        }
        out.body = buf.substr(0, static_cast<std::size_t>(*length));
        buf.erase(0, static_cast<std::size_t>(*length));
        co_return out;
    }
    // Delimited by the close.
    for (;;) {
        if (buf.size() > limits.body) {
            co_return std::make_error_code(std::errc::message_size);
        }
        auto r = co_await fill();
        if (!r) {
            if (r.error() == io_errc::eof) {
                break;
            }
            co_return r.error();
        }
    }
    out.body = std::move(buf);
    buf.clear();
    out.keep_alive = false;
    co_return out;
}

}  // namespace weft::http::detail
