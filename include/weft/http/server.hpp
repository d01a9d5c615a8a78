#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "weft/core/result.hpp"
#include "weft/core/task.hpp"
#include "weft/http/http2_options.hpp"
#include "weft/http/request.hpp"
#include "weft/http/request_limits.hpp"
#include "weft/http/response.hpp"
#include "weft/http/router.hpp"
#include "weft/http/websocket.hpp"
#include "weft/io/byte_listener.hpp"
#include "weft/io/socket_address.hpp"
#include "weft/io/tcp_listener.hpp"
#include "weft/log/logger.hpp"
#include "weft/metrics/registry.hpp"
#include "weft/tls/tls_context.hpp"
#include "weft/trace/tracer.hpp"

namespace weft::http {

/// Runs around the handler: may answer by itself, or call `next(req)` and change its response.
///
///     srv.use([](weft::http::request& req, const weft::http::handler& next)
///                 -> weft::task<weft::http::response> {
///         auto r = co_await next(req);
///         r.set_header("X-Frame-Options", "DENY");
///         co_return r;
///     });
using middleware = std::function<task<response>(request&, const handler& next)>;

/// Limits and timeouts. The defaults follow nginx and Go's net/http in order of magnitude.
struct server_options {
    /// Request line 8 KiB (414), header block 16 KiB and 100 fields (431), body 1 MiB (413,
    /// per route overridable), chunk extensions 4 KiB.
    request_limits limits{};
    /// From a request's first byte until its head is complete, whatever the server does
    /// meanwhile (writing the responses to earlier pipelined requests included).
    std::chrono::milliseconds header_timeout{std::chrono::seconds{10}};
    /// Longest wait for the next piece of a body (progress: any byte restarts it). The body
    /// must also keep min_rate.
    std::chrono::milliseconds body_timeout{std::chrono::seconds{30}};
    /// Longest wait for the client to take more of a response (progress: any byte it takes
    /// restarts it; a client that stops reading is dropped). A slow but steady reader is
    /// served for as long as it keeps min_rate.
    std::chrono::milliseconds send_timeout{std::chrono::seconds{30}};
    /// The least a slow client must keep up, in bytes a second, while the server waits on it
    /// for a request body or for room to write a response: after min_rate_grace of waiting, a
    /// transfer that has moved fewer than min_rate bytes for each further second waited is
    /// dropped (as Apache's mod_reqtimeout `body=20,MinRate=500`). Only time spent waiting for
    /// the client counts, never the handler's own. So a body trickled a byte at a time, each
    /// within body_timeout, still ends. 0: no minimum (the progress timeouts alone).
    std::uint32_t min_rate = 500;
    /// The waiting a body or a response write is allowed before min_rate applies.
    std::chrono::milliseconds min_rate_grace{std::chrono::seconds{20}};
    /// An idle keep-alive connection is closed after this.
    std::chrono::milliseconds keep_alive_timeout{std::chrono::seconds{60}};
    /// shutdown(): how long requests in flight may take before they are cancelled.
    std::chrono::milliseconds drain_timeout{std::chrono::seconds{30}};
    /// After an error response, how long the server reads and discards what the client still
    /// sends before closing, so the client reads the response instead of a reset.
    std::chrono::milliseconds linger_timeout{std::chrono::seconds{1}};
    /// Open connections at most; at the limit the server stops accepting (the kernel's backlog
    /// holds the rest). 0: 90% of RLIMIT_NOFILE. serve() sizes the process's descriptor table
    /// for them at once, up to 65,536 (see weft::reserve_descriptors).
    std::size_t max_connections = 0;
    /// Pipelined requests answered before their responses are written out together.
    std::size_t max_pipelined = 16;
    /// The Server field's value; empty: no Server field.
    std::string server_name = "weft";
    /// listen(): a connection is accepted once its request's first bytes have arrived
    /// (TCP_DEFER_ACCEPT, as nginx's `listen ... deferred`; a client that connects and sends
    /// nothing is accepted after about this long). The first read then finds the request:
    /// a connection that serves one request costs one wake-up of the server instead of two
    /// and, on io_uring, arms no receive. 0: accepted at once.
    std::chrono::seconds defer_accept{1};
    /// HTTPS: a server context (weft::tls_context::server) makes every accepted connection
    /// TLS. Its handshake comes first, bounded by the context's handshake_timeout (a drain
    /// waits for it that long at most); a failed one closes it (server_stats::tls_failed).
    /// Files are sent through TLS (read, then encrypted), not with sendfile.
    std::optional<tls_context> tls{};
    /// HTTP/2 (h2c with prior knowledge, h2 by ALPN) and its limits; see http2_options.
    http2_options http2{};
    /// listen(): called with each bound address once it is listening (port 0 picks one).
    std::function<void(const socket_address&)> on_listening{};
    /// A registry to count requests in: by route template, method and status class, a latency
    /// histogram per route, and the server_stats counters (docs/guide/operating.md lists them).
    /// Empty (the default): nothing is recorded. Serve it with metrics_handler.
    std::optional<metrics::registry> metrics{};
    /// The access log: one `info` record per answered request (method, path, route, status,
    /// duration_ms) in this logger, which must outlive the server. Null (the default): none.
    log::logger* access_log = nullptr;
    /// A span per request in this tracer (which must outlive the server): kind server, named
    /// "METHOD /route/{template}" (the method alone when no route matched), a child of the
    /// request's traceparent when it has a valid one, with http.request.method, http.route and
    /// http.response.status_code (status error for a 5xx), ended once the response is ready.
    /// The handler reads its context with request::trace_context(). Null (the default): no
    /// span and no clock read; trace_context() still gives the context the client sent.
    trace::tracer* tracer = nullptr;
};

/// Counters, read at any time (each one is exact; together they are a snapshot in motion).
struct server_stats {
    std::uint64_t accepted = 0;        ///< connections accepted
    std::uint64_t open = 0;            ///< connections open now
    std::uint64_t requests = 0;        ///< requests answered (including error responses)
    std::uint64_t rejected = 0;        ///< requests refused by the parser (4xx / 5xx, then closed)
    std::uint64_t timed_out = 0;       ///< connections dropped by a header/body/send/idle timeout
    std::uint64_t tls_failed = 0;      ///< TLS handshakes that failed or timed out (then closed)
    std::uint64_t writes = 0;          ///< vectored writes of responses (pipelining coalesces)
    std::uint64_t deadline_moves = 0;  ///< per-connection deadline re-filed earlier in place
};

/// An HTTP/1.1 server. Routes and middleware are added first; then `serve` (one listener) or
/// `listen` (binds; in thread-per-core mode one SO_REUSEPORT listener per worker) runs it until
/// `shutdown()` drains it or the serving task is cancelled.
///
///     weft::http::server srv;
///     srv.route(weft::http::method::get, "/", [](weft::http::request&)
///                   -> weft::task<weft::http::response> {
///         co_return weft::http::response::text("Hello, World!");
///     });
///     co_await srv.listen(weft::socket_address::parse("0.0.0.0", 8080).value());
///
/// Each connection runs in one task: it reads, parses (zero-copy, views into the received
/// bytes), runs the handler, and writes. Every complete request already received is answered
/// before the responses go out in one vectored write (at most max_pipelined at a time). One
/// deadline per connection, moved in place on the worker's timer wheel, enforces the timeouts.
///
/// CONNECT is answered 501 and the connection closed, whatever the routes: weft has no tunnel,
/// and a 2xx would keep the connection as HTTP while the client starts its tunnel (RFC 9110
/// 9.3.6), so bytes sent for the tunnel would be read as requests.
class server {
public:
    explicit server(server_options o = {});
    server(const server&) = delete;
    auto operator=(const server&) -> server& = delete;
    ~server();

    /// Routes `method` requests for `pattern` to `h` (router.hpp for patterns). Before serving.
    void route(http::method m, std::string_view pattern, handler h, route_options o = {});
    void route(std::string_view method, std::string_view pattern, handler h, route_options o = {});
    /// Serves WebSocket upgrades (RFC 6455) of GET `pattern`: the handshake is checked
    /// (version 13, the key, `o.check_origin`, a subprotocol from `o.subprotocols`), the
    /// middleware runs on the upgrade request (it may refuse it), and on 101 the connection
    /// becomes `h`'s. Before serving. The connection stays the server's: shutdown() sends it
    /// close 1001 and waits for the client's close up to o.close_timeout.
    void websocket(std::string_view pattern, websocket_handler h, websocket_options o = {});
    /// Adds a middleware; the first added runs outermost. Before serving.
    void use(middleware m);

    /// Accepts and serves connections on `l` until shutdown() or cancellation; returns when
    /// every connection it accepted has ended.
    [[nodiscard]] auto serve(tcp_listener& l) -> task<void>;
    /// serve over a listener of byte_streams (weft::testing's simulated network). Throws
    /// std::logic_error with the TLS option: TLS runs over a tcp_stream only.
    [[nodiscard]] auto serve(byte_listener& l) -> task<void>;
    /// Binds `addr` and serves it: on a thread-per-core runtime (`stealing = false`) one
    /// SO_REUSEPORT listener per worker, each served on its own worker; otherwise one.
    [[nodiscard]] auto listen(socket_address addr) -> task<result<void>>;
    /// Graceful drain: stops accepting, closes idle keep-alive connections at once, lets
    /// requests in flight finish (their responses say `Connection: close`), and after
    /// drain_timeout cancels what is left. Returns when every connection has ended.
    [[nodiscard]] auto shutdown() -> task<void>;

    [[nodiscard]] auto stats() const noexcept -> server_stats;
    [[nodiscard]] auto options() const noexcept -> const server_options&;

    struct state;  // src/http/server.cpp

private:
    std::shared_ptr<state> st_;
};

}  // namespace weft::http
