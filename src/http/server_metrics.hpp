#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <functional>
#include <string_view>
#include <vector>

#include "weft/http/request_head.hpp"
#include "weft/metrics/registry.hpp"

namespace weft::http {

struct server_stats;

namespace detail {

/// A server's series in its server_options::metrics registry, made when routes are added so
/// that a request only records: one counter and one histogram per request, no lookup, no lock.
///
/// - `weft_http_requests{route, method, status}`: counter; route is the route's pattern
///   (its template, never the path), method the route's, status the class ("2xx".."5xx").
///   Requests no route matched (404, 405) have route "" and the request's method (one of the
///   standard ones, or "other"), so a client cannot make new series.
/// - `weft_http_request_duration_seconds{route, method}`: histogram (metrics::duration_buckets)
///   from the route's match until its response is ready (middleware and handler; not the write).
/// - Read from server_stats at collection: `weft_http_connections_accepted`,
///   `weft_http_requests_rejected`, `weft_http_connections_timed_out`,
///   `weft_http_tls_handshakes_failed` (counters) and `weft_http_connections_open` (gauge).
class server_metrics {
public:
    using clock = std::chrono::steady_clock;

    /// `stats` is called at each collection (on the collecting thread) while this object lives.
    server_metrics(metrics::registry reg, std::function<server_stats()> stats);

    /// Makes the series of the route just added (routes are numbered in the order added).
    void add_route(std::string_view method, std::string_view pattern);
    /// A request answered with `status` by route `route` (npos: none matched; `m` is then the
    /// request's method), started at `started`.
    void record(std::size_t route, method m, int status, clock::time_point started) noexcept;

private:
    struct route_series {
        std::vector<metrics::counter> by_class;  // 2xx, 3xx, 4xx, 5xx
        metrics::histogram duration;
    };
    metrics::registry reg_;
    metrics::counter_family requests_;
    metrics::histogram_family duration_;
    std::vector<route_series> routes_;
    std::vector<metrics::counter> unmatched_;  // by method (the enum's order), 4xx
    metrics::collector_handle stats_;
};

}  // namespace detail
}  // namespace weft::http
