#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "weft/core/result.hpp"
#include "weft/core/task.hpp"
#include "weft/http/client.hpp"
#include "weft/http/client_stream.hpp"
#include "weft/io/byte_stream.hpp"
#include "weft/io/resolve.hpp"
#include "weft/tls/tls_context.hpp"
#include "weft/trace/tracer.hpp"

namespace weft::http {

/// What the pooled client refuses on its own account (client_category()).
enum class client_errc {
    bad_url = 1,         ///< not an absolute http:// or https:// URL
    too_many_redirects,  ///< more than client_options::max_redirects
    redirect_downgrade,  ///< a redirect from https to http (client_options::allow_downgrade)
    /// The server did not process the request (HTTP/2: above a GOAWAY's last stream, or
    /// REFUSED_STREAM); an idempotent one was sent again once, this one was not.
    unprocessed,
};

[[nodiscard]] auto client_category() noexcept -> const std::error_category&;

[[nodiscard]] inline auto make_error_code(client_errc e) noexcept -> std::error_code {
    return {static_cast<int>(e), client_category()};
}

/// How client_pool connects, reuses, retries and follows.
struct client_options {
    /// Connections to one origin (scheme, host, port), in use and idle together; a request that
    /// finds them all in use waits for one.
    std::size_t max_per_host = 8;
    /// Idle connections kept across all origins; past it, the one idle longest is closed.
    std::size_t max_idle = 64;
    /// An idle connection older than this is closed instead of reused.
    std::chrono::milliseconds idle_timeout{30000};
    /// TCP connect (every address of the host together).
    std::chrono::milliseconds connect_timeout{10000};
    /// The TLS handshake of an https origin.
    std::chrono::milliseconds tls_handshake_timeout{10000};
    /// The whole request: waiting for a connection, every retry and redirect, the request body
    /// sent, and with request() the response body read (with open(): up to the response head).
    std::chrono::milliseconds request_timeout{30000};
    /// Each receive of a response (head or body, whole or streamed): no byte within it is
    /// timed_out and the connection is closed, so a server that stalls mid-body is let go.
    std::chrono::milliseconds read_timeout{30000};
    /// Response head and (decoded) body limits: message_size past them.
    std::size_t max_response_head = 64 * 1024;
    std::uint64_t max_response_body = std::uint64_t{64} << 20;
    /// Redirects followed (301, 302, 303, 307, 308); 0: none, the 3xx response is returned.
    int max_redirects = 0;
    /// Follow a redirect from https to http.
    bool allow_downgrade = false;
    /// Retries of idempotent requests (GET, HEAD, PUT, DELETE, OPTIONS, TRACE) whose reused
    /// connection failed before any byte of the response: allowed while retries stay within
    /// `retry_ratio` of the requests of the last 10 s plus `retry_min_per_second` per second.
    double retry_ratio = 0.2;
    int retry_min_per_second = 3;
    /// How host names are resolved.
    resolve_options resolve{};
    /// Opens the connection to an origin in place of resolving and connecting over TCP: a
    /// byte_stream to the URL's host (as written) and port, such as weft::testing's simulated
    /// network gives. `host` stays valid until the returned task has completed. An https origin
    /// runs TLS over it; connect_timeout bounds it as it bounds a TCP connect. Empty (the
    /// default): TCP.
    ///
    ///     o.connect_stream = [&net](std::string_view host, std::uint16_t port) {
    ///         return net.connect("client", host, port);
    ///     };
    std::function<task<result<std::unique_ptr<byte_stream>>>(std::string_view host,
                                                             std::uint16_t port)>
        connect_stream{};
    /// https origins: ALPN offers h2 and http/1.1 (http/1.1 alone when false). With h2 agreed,
    /// the origin has one connection whose streams carry its requests concurrently, as many at
    /// once as the server's SETTINGS_MAX_CONCURRENT_STREAMS allows (the rest wait their turn);
    /// max_per_host does not apply to it. An origin that chose http/1.1 keeps it.
    bool http2 = true;
    /// https origins: verification on, the system trust store. An empty alpn is filled from
    /// `http2`; a given one is offered as it is.
    tls_client_options tls{};
    /// A client span (named by the method, with http.request.method, url.full and
    /// http.response.status_code) for each request that carries a valid trace context, in
    /// this tracer (which must outlive the pool); its context is the traceparent sent. Null
    /// (the default): the request's own context is sent as it is.
    trace::tracer* tracer = nullptr;
};

/// One request. `headers` are added as given (Host, Content-Length, Transfer-Encoding are the
/// client's). `trace`: the context the request continues (request::trace_context() in a
/// handler); when valid, traceparent (and tracestate) are sent, replacing any in `headers`.
///
/// The body is `body`, or, when `body_stream` is set, what it produces: each call returns the
/// next piece (valid until the next call), an empty view at the end, or an error that ends the
/// request with it. Its length is `body_length` when known (sent as Content-Length; producing
/// another length is invalid_argument), else it goes chunked on HTTP/1.1. A streamed body is
/// produced once: such a request is never retried, and is redirected only by a 303 (or a
/// 301/302 of a POST), which drops the body.
///
/// NOTE: g++ 12 destroys a braced temporary written inside a co_await expression twice
/// (`co_await pool.open({.url = u})`): build the request in a variable and move it in.
struct client_request {
    std::string method = "GET";
    std::string url{};
    std::vector<std::pair<std::string, std::string>> headers{};
    std::string body{};
    trace::context trace{};
    std::function<task<result<std::string_view>>()> body_stream{};
    std::optional<std::uint64_t> body_length{};
};

/// Counts a test or an operator reads (a snapshot).
struct client_pool_stats {
    std::uint64_t connections_opened = 0;
    std::uint64_t requests = 0;
    std::uint64_t retries = 0;
    std::size_t idle = 0;                 ///< idle HTTP/1.1 connections
    std::uint64_t http2_connections = 0;  ///< connections opened on which h2 was agreed
};

namespace detail {
struct client_pool_state;
}

/// An HTTP/1.1 and HTTP/2 client over pooled connections, per origin. Takes absolute URLs
/// (http:// and https://, verified with SNI and ALPN through weft::tls); resolves names with
/// weft::resolve and connects with weft::connect (both families, staggered). HTTP/2 is used
/// where the server agrees to it by ALPN (client_options::http2).
///
/// HTTP/2: an origin that agreed h2 has one connection at a time; its reader task drives it
/// and each request is a stream on it. A request above the last stream of a GOAWAY, or refused
/// (REFUSED_STREAM), is sent again once on the origin's next connection if it is idempotent
/// (client_errc::unprocessed otherwise); a stream reset by the server fails its request alone
/// (connection_reset); the connection lost fails every request in flight on it.
///
/// Reuse: after a response read whole on a connection the server keeps open, the connection
/// goes back to its origin's idle list; one that failed, or whose response was cut short or
/// ambiguous, is closed. A request on a reused connection that fails before any byte of the
/// response came back (the server closed it while idle) is sent again once on a new
/// connection if it is idempotent and the retry budget allows; a POST gets the error.
///
/// Errors (values): client_category() ones, resolve_category() ones, bad_message for a
/// malformed or ambiguous response (Content-Length with Transfer-Encoding), message_size past
/// the limits, timed_out (request_timeout), the transport's, operation_canceled.
///
/// Threads: any task on a weft runtime, any number at once. The pool must outlive the requests
/// in flight on it.
///
///     weft::http::client_pool http{{.max_per_host = 4}};
///     auto r = co_await http.get("https://example.com/");   // result<client_response>
///     if (r && r->status == 200) { use(r->body); }
class client_pool {
public:
    explicit client_pool(client_options options = {});
    ~client_pool();
    client_pool(const client_pool&) = delete;
    auto operator=(const client_pool&) -> client_pool& = delete;

    /// The response with its body read whole (open() and client_stream::read_all()).
    [[nodiscard]] auto request(client_request req) -> task<result<client_response>>;
    /// The response once its head has come; its body is read from the stream as it arrives.
    [[nodiscard]] auto open(client_request req) -> task<result<client_stream>>;
    [[nodiscard]] auto get(std::string url) -> task<result<client_response>>;
    [[nodiscard]] auto post(std::string url, std::string body, std::string content_type)
        -> task<result<client_response>>;

    [[nodiscard]] auto stats() const -> client_pool_stats;

private:
    std::unique_ptr<detail::client_pool_state> s_;
};

}  // namespace weft::http

template <>
struct std::is_error_code_enum<weft::http::client_errc> : std::true_type {};
