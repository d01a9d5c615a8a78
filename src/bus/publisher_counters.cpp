#include "publisher_counters.hpp"

#include <string>
#include <utility>
#include <vector>

namespace weft::bus::detail {

auto make_publisher_counters(metrics::registry& reg,
                             std::string_view backend,
                             std::function<double()> in_flight)
    -> std::unique_ptr<publisher_counters> {
    const std::vector<std::string> labels{"backend"};
    auto one = [&](std::string_view name, std::string_view help) {
        return reg.add_counter_family(name, help, labels).with({backend});
    };
    auto c = std::make_unique<publisher_counters>(publisher_counters{
        .published = one("weft_bus_published", "Messages handed to the broker."),
        .acked = one("weft_bus_publish_acked", "Publishes the broker acknowledged."),
        .failed = one("weft_bus_publish_failed", "Publishes that failed."),
        .ack_seconds = reg.add_histogram_family("weft_bus_publish_ack_seconds",
                                                "Time from publish to the broker's ack.", labels,
                                                metrics::duration_buckets())
                           .with({backend}),
        .in_flight = {},
    });
    // Several publishers on one backend give series with the same labels: the registry adds
    // them up at collection.
    c->in_flight = reg.add_collector([b = std::string(backend), read = std::move(in_flight)](
                                         std::vector<metrics::family_snapshot>& out) {
        out.push_back({.name = "weft_bus_publish_in_flight",
                       .help = "Messages sent and not yet acknowledged or failed.",
                       .type = metrics::metric_type::gauge,
                       .label_names = {"backend"},
                       .series = {{.label_values = {b}, .value = read()}}});
    });
    return c;
}

}  // namespace weft::bus::detail
