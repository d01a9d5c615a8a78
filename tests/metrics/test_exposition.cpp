#include <gtest/gtest.h>

#include <string>

#include "weft/metrics/exposition.hpp"
#include "weft/metrics/registry.hpp"

namespace {

using weft::metrics::exposition_format;
using weft::metrics::registry;

auto sample_registry() -> registry {
    registry reg;
    auto req = reg.add_counter_family("http_requests", "Requests \\ served\nby route.",
                                      {"route", "status"});
    req.with({"/items/{id}", "2xx"}).inc(3);
    req.with({"a\"b\\c\nd", "5xx"}).inc();
    auto open = reg.add_gauge("connections_open", "Open \"now\".");
    open.add(2.5);
    auto lat = reg.add_histogram("latency_seconds", "Latency.", {0.5, 1});
    lat.observe(0.5);
    lat.observe(2);
    return reg;
}

TEST(exposition, prometheus_text_format) {
    EXPECT_EQ(sample_registry().render(exposition_format::prometheus_text),
              "# HELP connections_open Open \"now\".\n"
              "# TYPE connections_open gauge\n"
              "connections_open 2.5\n"
              "# HELP http_requests_total Requests \\\\ served\\nby route.\n"
              "# TYPE http_requests_total counter\n"
              "http_requests_total{route=\"/items/{id}\",status=\"2xx\"} 3\n"
              "http_requests_total{route=\"a\\\"b\\\\c\\nd\",status=\"5xx\"} 1\n"
              "# HELP latency_seconds Latency.\n"
              "# TYPE latency_seconds histogram\n"
              "latency_seconds_bucket{le=\"0.5\"} 1\n"
              "latency_seconds_bucket{le=\"1\"} 1\n"
              "latency_seconds_bucket{le=\"+Inf\"} 2\n"
              "latency_seconds_sum 2.5\n"
              "latency_seconds_count 2\n");
}

TEST(exposition, openmetrics_format) {
    EXPECT_EQ(sample_registry().render(exposition_format::openmetrics),
              "# HELP connections_open Open \\\"now\\\".\n"
              "# TYPE connections_open gauge\n"
              "connections_open 2.5\n"
              "# HELP http_requests Requests \\\\ served\\nby route.\n"
              "# TYPE http_requests counter\n"
              "http_requests_total{route=\"/items/{id}\",status=\"2xx\"} 3\n"
              "http_requests_total{route=\"a\\\"b\\\\c\\nd\",status=\"5xx\"} 1\n"
              "# HELP latency_seconds Latency.\n"
              "# TYPE latency_seconds histogram\n"
              "latency_seconds_bucket{le=\"0.5\"} 1\n"
              "latency_seconds_bucket{le=\"1\"} 1\n"
              "latency_seconds_bucket{le=\"+Inf\"} 2\n"
              "latency_seconds_sum 2.5\n"
              "latency_seconds_count 2\n"
              "# EOF\n");
}

TEST(exposition, labels_of_a_histogram_come_before_le) {
    registry reg;
    reg.add_histogram_family("rpc_seconds", "", {"method"}, {1}).with({"GET"}).observe(3);
    EXPECT_EQ(reg.render(exposition_format::prometheus_text),
              "# TYPE rpc_seconds histogram\n"
              "rpc_seconds_bucket{method=\"GET\",le=\"1\"} 0\n"
              "rpc_seconds_bucket{method=\"GET\",le=\"+Inf\"} 1\n"
              "rpc_seconds_sum{method=\"GET\"} 3\n"
              "rpc_seconds_count{method=\"GET\"} 1\n");
}

TEST(exposition, negotiation_by_accept) {
    using weft::metrics::negotiate;
    EXPECT_EQ(negotiate(""), exposition_format::prometheus_text);
    EXPECT_EQ(negotiate("*/*"), exposition_format::prometheus_text);
    EXPECT_EQ(negotiate("text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
              exposition_format::prometheus_text);
    // What Prometheus 2.x sends.
    EXPECT_EQ(negotiate("application/openmetrics-text;version=1.0.0,application/"
                        "openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;"
                        "q=0.1"),
              exposition_format::openmetrics);
    EXPECT_EQ(negotiate("text/plain, Application/OpenMetrics-Text ; q=0.3"),
              exposition_format::openmetrics);
    EXPECT_EQ(negotiate("application/openmetrics-text; q=0"), exposition_format::prometheus_text);
    EXPECT_EQ(negotiate("application/openmetrics-text;q=0.0"), exposition_format::prometheus_text);
    EXPECT_EQ(weft::metrics::content_type(exposition_format::openmetrics),
              "application/openmetrics-text; version=1.0.0; charset=utf-8");
    EXPECT_EQ(weft::metrics::content_type(exposition_format::prometheus_text),
              "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace
