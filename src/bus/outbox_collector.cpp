#include "weft/bus/outbox_collector.hpp"

#include <chrono>
#include <utility>
#include <vector>

namespace weft::bus {

auto collect_outbox(metrics::registry& reg, std::string name, std::function<outbox_metrics()> read)
    -> metrics::collector_handle {
    return reg.add_collector([name = std::move(name),
                              read = std::move(read)](std::vector<metrics::family_snapshot>& out) {
        const outbox_metrics m = read();
        auto one = [&](const char* family, const char* help, metrics::metric_type t, double v) {
            out.push_back({.name = family,
                           .help = help,
                           .type = t,
                           .label_names = {"outbox"},
                           .series = {{.label_values = {name}, .value = v}}});
        };
        const auto c = metrics::metric_type::counter;
        const auto g = metrics::metric_type::gauge;
        one("weft_outbox_staged", "Events staged in committed transactions.", c,
            static_cast<double>(m.staged));
        one("weft_outbox_published", "Events the broker acknowledged.", c,
            static_cast<double>(m.published));
        one("weft_outbox_retries", "Publishes tried again after a transient failure.", c,
            static_cast<double>(m.retries));
        one("weft_outbox_dead_lettered", "Events the broker rejected for good.", c,
            static_cast<double>(m.dead_lettered));
        one("weft_outbox_idle_waits", "Times the relay found nothing to publish.", c,
            static_cast<double>(m.idle_waits));
        const std::uint64_t done = m.published + m.dead_lettered;
        one("weft_outbox_pending", "Events staged here and not yet published or dead-lettered.", g,
            m.staged > done ? static_cast<double>(m.staged - done) : 0.0);
        one("weft_outbox_relay_lag_seconds",
            "How long the oldest event the relay holds has been staged.", g,
            std::chrono::duration<double>(m.oldest_pending_age).count());
    });
}

}  // namespace weft::bus
