#include "server_metrics.hpp"

#include <cstdint>
#include <string>
#include <utility>

#include "weft/http/server.hpp"

namespace weft::http::detail {

namespace {

constexpr std::array<std::string_view, 4> status_classes{"2xx", "3xx", "4xx", "5xx"};
// The names of the method enum's values, in its order.
constexpr std::array<std::string_view, 10> method_names{
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "other"};

auto scalar(std::string name, std::string help, metrics::metric_type t, std::uint64_t v)
    -> metrics::family_snapshot {
    return {.name = std::move(name),
            .help = std::move(help),
            .type = t,
            .series = {metrics::series_snapshot{.value = static_cast<double>(v)}}};
}

}  // namespace

server_metrics::server_metrics(metrics::registry reg, std::function<server_stats()> stats)
    : reg_(std::move(reg)),
      requests_(reg_.add_counter_family("weft_http_requests",
                                        "HTTP requests answered, by route template, method and "
                                        "status class.",
                                        {"route", "method", "status"})),
      duration_(reg_.add_histogram_family(
          "weft_http_request_duration_seconds",
          "Time from a request's route match until its response was ready.",
          {"route", "method"},
          metrics::duration_buckets())) {
    for (std::string_view m : method_names) {
        unmatched_.push_back(requests_.with({"", m, "4xx"}));
    }
    stats_ = reg_.add_collector([stats =
                                     std::move(stats)](std::vector<metrics::family_snapshot>& out) {
        const server_stats s = stats();
        const auto counter = metrics::metric_type::counter;
        out.push_back(
            scalar("weft_http_connections_accepted", "Connections accepted.", counter, s.accepted));
        out.push_back(scalar("weft_http_connections_open", "Connections open now.",
                             metrics::metric_type::gauge, s.open));
        out.push_back(scalar("weft_http_requests_rejected",
                             "Requests refused by the parser (answered 4xx/5xx, then closed).",
                             counter, s.rejected));
        out.push_back(scalar("weft_http_connections_timed_out",
                             "Connections dropped by a header, body, send or idle timeout.",
                             counter, s.timed_out));
        out.push_back(scalar("weft_http_tls_handshakes_failed",
                             "TLS handshakes that failed or timed out.", counter, s.tls_failed));
    });
}

void server_metrics::add_route(std::string_view method, std::string_view pattern) {
    route_series r{.by_class = {}, .duration = duration_.with({pattern, method})};
    for (std::string_view c : status_classes) {
        r.by_class.push_back(requests_.with({pattern, method, c}));
    }
    routes_.push_back(std::move(r));
}

void server_metrics::record(std::size_t route,
                            method m,
                            int status,
                            clock::time_point started) noexcept {
    if (route >= routes_.size()) {
        unmatched_[static_cast<std::size_t>(m) % unmatched_.size()].inc();
        return;
    }
    route_series& r = routes_[route];
    const int c = status / 100 - 2;  // final statuses only: 200..999 (the connection checks)
    r.by_class[static_cast<std::size_t>(c < 0 ? 0 : (c > 3 ? 3 : c))].inc();
    r.duration.observe(std::chrono::duration<double>(clock::now() - started).count());
}

}  // namespace weft::http::detail
