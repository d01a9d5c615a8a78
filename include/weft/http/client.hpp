#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "weft/core/result.hpp"
#include "weft/core/task.hpp"
#include "weft/io/byte_stream.hpp"
#include "weft/io/socket_address.hpp"
#include "weft/io/tcp_stream.hpp"

namespace weft::http {

/// A response as the client read it (its body whole, decoded if it was chunked).
struct client_response {
    int status = 0;
    int version_minor = 1;
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;
    bool chunked = false;    ///< the body came chunked
    bool keep_alive = true;  ///< the server keeps the connection open after it
    bool http2 = false;      ///< it came on an HTTP/2 stream (version_minor is then 1)

    /// The first value of `name` (ASCII case-insensitive).
    [[nodiscard]] auto header(std::string_view name) const -> std::optional<std::string_view>;
};

/// A small HTTP/1.1 client over one connection, for tests, examples and benchmarks: keep-alive,
/// pipelining (send several requests, then read their responses in order), chunked and
/// Content-Length bodies, bodies delimited by the close, and a raw mode that sends bytes
/// exactly as given (for malformed requests). The string_view arguments of these tasks are
/// read when the task runs: keep what they view alive until it is awaited. Not a general-purpose
/// client: no TLS, no redirects, no pooling.
///
///     auto c = (co_await weft::http::client::connect(addr)).value();
///     auto r = (co_await c.get("/")).value();          // r.status, r.body
///     co_await c.send("POST", "/echo", "hello");       // pipelined:
///     co_await c.send("GET", "/");
///     auto a = co_await c.read_response();  auto b = co_await c.read_response();
class client {
public:
    [[nodiscard]] static auto connect(socket_address addr) -> task<result<client>>;
    explicit client(tcp_stream s) noexcept : s_(std::move(s)) {}
    /// Over a connected byte_stream (weft::testing's simulated network): the same requests
    /// and responses; stream() is then a closed tcp_stream.
    explicit client(std::unique_ptr<byte_stream> s) noexcept : other_(std::move(s)) {}

    /// Sends one request (Host and Content-Length added; `headers` are "Name: value" lines
    /// without CRLF) without waiting for its response.
    [[nodiscard]] auto send(std::string_view method,
                            std::string_view target,
                            std::string_view body = {},
                            std::vector<std::string> headers = {}) -> task<result<void>>;
    /// Sends `bytes` as they are.
    [[nodiscard]] auto send_raw(std::string_view bytes) -> task<result<void>>;
    /// Reads the next response (to a HEAD request: `head_request`, which has no body).
    [[nodiscard]] auto read_response(bool head_request = false) -> task<result<client_response>>;
    /// send + read_response.
    [[nodiscard]] auto request(std::string_view method,
                               std::string_view target,
                               std::string_view body = {},
                               std::vector<std::string> headers = {})
        -> task<result<client_response>>;
    [[nodiscard]] auto get(std::string_view target) -> task<result<client_response>> {
        return request("GET", target);
    }
    /// Reads until the server closes; what was buffered and not yet read comes first.
    [[nodiscard]] auto read_until_close() -> task<result<std::string>>;

    [[nodiscard]] auto stream() noexcept -> tcp_stream& { return s_; }

private:
    auto fill() -> task<result<void>>;
    auto write_all(std::span<const std::byte> buf) -> task<result<void>> {
        return other_ ? other_->write_all(buf) : s_.write_all(buf);
    }
    auto read_some(std::span<std::byte> buf) -> task<result<std::size_t>> {
        return other_ ? other_->read_some(buf) : s_.read_some(buf);
    }

    tcp_stream s_;
    std::unique_ptr<byte_stream> other_;  // when connected over a byte_stream
    std::string buf_;                     // received, not yet consumed
};

}  // namespace weft::http
