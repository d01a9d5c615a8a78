#pragma once

// Reading one HTTP/1.1 response from a connection's receive buffer, shared by http::client and
// http::client_pool. Strict where a lax reader lets a response be read two ways (RFC 9112
// §6.3): Content-Length together with Transfer-Encoding, differing Content-Length values, a
// Transfer-Encoding other than chunked are refused, not guessed at; the head is bounded.

#include <algorithm>
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

/// How the body of a response is delimited.
enum class response_framing : std::uint8_t { none, length, chunked, close };

/// A response head as read: the response without its body, and how its body is delimited.
struct response_start {
    client_response head;
    response_framing framing = response_framing::none;
    std::uint64_t length = 0;  ///< framing::length
};

/// Reads the next response head from `buf` (what was received and not yet consumed), calling
/// `fill()` (-> task<result<void>>, appends to `buf`) for more, and consumes it from `buf`.
/// On an error the connection must not be reused.
/// Errors: bad_message (malformed or ambiguous framing), message_size (the head over
/// `limits.head`, a Content-Length over `limits.body`), the transport's (io_errc::eof when the
/// peer closed before the head was whole).
template <typename Fill>
auto read_head(std::string& buf, Fill fill, bool head_request, response_limits limits)
    -> task<result<response_start>> {
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
    response_start start;
    client_response& out = start.head;
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
        start.framing = response_framing::none;
    } else if (out.chunked) {
        start.framing = response_framing::chunked;
    } else if (length) {
        if (*length > limits.body) {
            co_return std::make_error_code(std::errc::message_size);  // before any of it is read
        }
        start.framing = *length == 0 ? response_framing::none : response_framing::length;
        start.length = *length;
    } else {
        start.framing = response_framing::close;
        out.keep_alive = false;
    }
    co_return start;
}

/// The body of one response, read piece by piece as it arrives: each next() returns the body
/// bytes decoded from what one receive brought (an empty view at the end). The view lives
/// until the next call. Errors as read_head's, and bad_message for a malformed chunk.
class response_body_reader {
public:
    response_body_reader(const response_start& start, response_limits limits)
        : framing_(start.framing), left_(start.length), limit_(limits.body) {
        if (framing_ == response_framing::chunked) {
            request_limits lim;
            lim.body = limits.body;
            decoder_ = body_decoder{{body_kind::chunked, 0}, lim};
        }
    }

    /// True once the body ended (next() returned the empty view).
    [[nodiscard]] auto done() const noexcept -> bool { return done_; }

    template <typename Fill>
    auto next(std::string& buf, Fill fill) -> task<result<std::string_view>> {
        piece_.clear();
        switch (framing_) {
            case response_framing::none:
                done_ = true;
                co_return std::string_view{};
            case response_framing::length:
                if (left_ == 0) {
                    done_ = true;
                    co_return std::string_view{};
                }
                if (buf.empty()) {
                    if (auto r = co_await fill(); !r) {
                        co_return r.error();
                    }
                }
                {
                    const auto n =
                        static_cast<std::size_t>(std::min<std::uint64_t>(left_, buf.size()));
                    piece_.assign(buf, 0, n);
                    buf.erase(0, n);
                    left_ -= n;
                }
                co_return std::string_view{piece_};
            case response_framing::chunked:
                for (;;) {
                    const body_step s = decoder_.decode(buf);
                    if (s.status == body_status::data) {
                        piece_.append(s.data);
                    }
                    buf.erase(0, s.consumed);
                    if (s.status == body_status::done) {
                        if (piece_.empty()) {
                            done_ = true;
                        }
                        co_return std::string_view{piece_};
                    }
                    if (s.status == body_status::error) {
                        co_return decoder_.error() == parse_error::body_too_large
                            ? std::make_error_code(std::errc::message_size)
                            : bad_response();
                    }
                    if (s.status == body_status::need_more) {
                        if (!piece_.empty()) {
                            co_return std::string_view{piece_};
                        }
                        if (auto r = co_await fill(); !r) {
                            co_return r.error();
                        }
                    }
                }
            case response_framing::close:
                if (buf.empty()) {
                    if (auto r = co_await fill(); !r) {
                        if (r.error() == io_errc::eof) {
                            done_ = true;
                            co_return std::string_view{};
                        }
                        co_return r.error();
                    }
                }
                received_ += buf.size();
                if (received_ > limit_) {
                    co_return std::make_error_code(std::errc::message_size);
                }
                piece_ = std::move(buf);
                buf.clear();
                co_return std::string_view{piece_};
        }
        co_return bad_response();
    }

private:
    response_framing framing_;
    std::uint64_t left_;
    std::uint64_t limit_;
    std::uint64_t received_ = 0;
    body_decoder decoder_{};
    std::string piece_;
    bool done_ = false;
};

/// read_head and the whole body: the response with its body, decoded.
template <typename Fill>
auto read_response(std::string& buf, Fill fill, bool head_request, response_limits limits)
    -> task<result<client_response>> {
    auto start = co_await read_head(buf, fill, head_request, limits);
    if (!start) {
        co_return start.error();
    }
    response_body_reader body{*start, limits};
    for (;;) {
        auto piece = co_await body.next(buf, fill);
        if (!piece) {
            co_return piece.error();
        }
        if (body.done()) {
            break;
        }
        start->head.body.append(*piece);
    }
    co_return std::move(start->head);
}

}  // namespace weft::http::detail
