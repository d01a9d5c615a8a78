#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "weft/core/result.hpp"
#include "weft/core/task.hpp"
#include "weft/http/client.hpp"

namespace weft::http {

namespace detail {
/// Where a client_stream's body comes from: an HTTP/1.1 connection or an HTTP/2 stream.
class client_body_source {
public:
    client_body_source() = default;
    client_body_source(const client_body_source&) = delete;
    auto operator=(const client_body_source&) -> client_body_source& = delete;
    virtual ~client_body_source() = default;
    /// The next piece of the body, an empty view at its end; valid until the next call.
    [[nodiscard]] virtual auto read() -> task<result<std::string_view>> = 0;
};
}  // namespace detail

/// A response whose body is read as it arrives (client_pool::open). response() is the status
/// and fields (its body stays empty); read() returns the body piece by piece, decoded, as
/// each receive brings it, held to client_options::max_response_body in total and to
/// client_options::read_timeout per read.
///
/// The connection it came on is busy until the body was read to its end: then an HTTP/1.1
/// connection goes back to the pool (if the server keeps it), and an HTTP/2 stream is done.
/// Destroyed before the end, an HTTP/1.1 connection is closed (its position in the response is
/// lost) and an HTTP/2 stream is reset (the connection stays).
///
/// Errors of read() (values): timed_out (no byte within read_timeout), message_size (past the
/// limit), bad_message (a malformed chunk), connection_reset (an HTTP/2 stream reset by the
/// server), the transport's (io_errc::eof: the server closed before the end). After an error
/// the stream is over. One task reads it at a time; the pool must outlive it.
///
///     auto s = (co_await pool.open({.url = "https://example.com/big"})).value();
///     for (;;) { auto piece = (co_await s.read()).value(); if (piece.empty()) break; use(piece); }
class client_stream {
public:
    client_stream(client_response head, std::unique_ptr<detail::client_body_source> body) noexcept;
    client_stream(client_stream&&) noexcept;
    auto operator=(client_stream&&) noexcept -> client_stream&;
    ~client_stream();

    /// The status and fields; body empty (read_all fills it only if asked to).
    [[nodiscard]] auto response() noexcept -> client_response& { return head_; }
    /// The next piece of the body; an empty view at its end (and after it). The view is valid
    /// until the next call. Cancel safety: cancelled, the stream is over (as after an error).
    [[nodiscard]] auto read() -> task<result<std::string_view>>;
    /// Every remaining piece, together.
    [[nodiscard]] auto read_all() -> task<result<std::string>>;

private:
    client_response head_;
    std::unique_ptr<detail::client_body_source> body_;
};

}  // namespace weft::http
