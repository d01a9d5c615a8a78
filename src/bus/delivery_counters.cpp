#include "delivery_counters.hpp"

#include <string>
#include <vector>

namespace weft::bus::detail {

auto make_delivery_counters(metrics::registry& reg,
                            std::string_view backend,
                            std::string_view topic,
                            std::string_view group,
                            std::uint32_t max_deliveries) -> std::shared_ptr<delivery_counters> {
    const std::vector<std::string> labels{"backend", "topic", "group"};
    auto one = [&](std::string_view name, std::string_view help) {
        return reg.add_counter_family(name, help, labels).with({backend, topic, group});
    };
    return std::make_shared<delivery_counters>(delivery_counters{
        .deliveries = one("weft_bus_deliveries", "Deliveries handed to subscriptions."),
        .redeliveries = one("weft_bus_redeliveries", "Deliveries after the first of a message."),
        .acks = one("weft_bus_delivery_acks", "Deliveries acknowledged."),
        .nacks = one("weft_bus_delivery_nacks", "Deliveries failed back to the broker."),
        .dead_letters = one("weft_bus_dead_letters", "Messages a subscription dead-lettered."),
        .max_deliveries = max_deliveries,
    });
}

}  // namespace weft::bus::detail
