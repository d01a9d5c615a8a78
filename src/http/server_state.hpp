#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "connection.hpp"
#include "server_metrics.hpp"
#include "websocket_route.hpp"
#include "weft/core/stop.hpp"
#include "weft/http/router.hpp"
#include "weft/http/server.hpp"
#include "weft/sync/event.hpp"
#include "weft/sync/semaphore.hpp"

namespace weft::http {

struct server::state {
    explicit state(server_options o);

    /// The handler chain for a matched route: the middleware, outermost first, then `h`.
    auto call(request& req, const handler& h) -> task<response>;
    auto call_from(std::size_t i, request& req, const handler& h) -> task<response>;

    /// A connection starts (false: the server is draining; close it) / ends.
    auto enter(detail::connection* c) -> bool;
    /// `c` null: a connection that ended before enter() (a failed TLS handshake).
    void leave(detail::connection* c);

    /// Request metrics and the access log (server_options::metrics, access_log): the
    /// connection calls request_started before a request's route runs and request_done once
    /// its response is ready. Neither reads the clock when both are off.
    [[nodiscard]] auto request_started() const noexcept
        -> detail::server_metrics::clock::time_point {
        return metrics || opts.access_log != nullptr ? detail::server_metrics::clock::now()
                                                     : detail::server_metrics::clock::time_point{};
    }
    void request_done(std::size_t route,
                      const request_head& head,
                      int status,
                      detail::server_metrics::clock::time_point started) noexcept {
        if (metrics) {
            metrics->record(route, head.method(), status, started);
        }
        if (opts.access_log != nullptr && opts.access_log->enabled(log::level::info)) {
            access(route, head, status, started);
        }
    }
    void access(std::size_t route,
                const request_head& head,
                int status,
                detail::server_metrics::clock::time_point started) noexcept;
    std::vector<std::string> patterns;  // by route number: the access log's `route`

    /// server_options::tracer's span for a request (inert without a tracer).
    [[nodiscard]] auto request_span(std::size_t route, const request_head& head) const
        -> trace::span;
    static void end_request_span(trace::span& s, int status);

    server_options opts;
    router routes;
    // What a request's head is parsed under: opts.limits, its body limit raised to the largest
    // route_options::body_limit (server::route keeps it), so that a route may take a larger
    // body than the server's default; each request is held to its route's limit once routed.
    request_limits head_limits;
    std::vector<middleware> layers;
    std::size_t max_open;  // opts.max_connections, or its default
    semaphore slots;       // one per connection that may be open

    std::atomic<std::uint64_t> accepted{0};
    std::atomic<std::uint64_t> requests{0};
    std::atomic<std::uint64_t> rejected{0};
    std::atomic<std::uint64_t> timed_out{0};
    std::atomic<std::uint64_t> tls_failed{0};
    std::atomic<std::uint64_t> writes{0};
    std::atomic<bool> draining{false};
    // Connections accepted and not yet ended: added by the acceptor without the lock (one
    // locked add per connection), taken away in leave() under mu, where shutdown() reads it,
    // so that the last leave() of a drain sees draining and sets `drained`. An acceptor's add
    // that shutdown() does not see yet is a connection that enter() then refuses (draining),
    // and its leave() sets `drained` again: no connection is left uncounted.
    std::atomic<std::uint64_t> open{0};

    std::mutex mu;                        // guards what follows
    detail::connection* conns = nullptr;  // registered connections (intrusive list)
    std::vector<stop_state*> acceptors;
    // Upgraded WebSocket connections: shutdown() sends each its close 1001 (drain()).
    std::vector<detail::websocket_session*> sessions;
    event drained;  // set once draining and no connection is open
    // Last: its collector reads the counters above, and is removed before they go.
    std::unique_ptr<detail::server_metrics> metrics;  // null: no server_options::metrics
};

}  // namespace weft::http
