#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "weft/metrics/counter.hpp"
#include "weft/metrics/registry.hpp"

namespace weft::bus::detail {

/// One subscription's series in the metrics registry, labelled {backend, topic, group}; shared
/// by the subscription and every delivery it hands out (a delivery may outlive it). Each
/// counter writes the calling thread's own cell: settling a delivery takes no lock.
/// - deliveries: handed out by next(); redeliveries: those of them with attempt > 1;
/// - acks, nacks: settle calls that succeeded;
/// - dead_letters: sent there by this subscription: term(), or a nack of the last delivery the
///   broker allows (max_deliveries). Those the broker sends after an ack timeout are not seen
///   here.
struct delivery_counters {
    metrics::counter deliveries;
    metrics::counter redeliveries;
    metrics::counter acks;
    metrics::counter nacks;
    metrics::counter dead_letters;
    std::uint32_t max_deliveries = 0;
};

[[nodiscard]] auto make_delivery_counters(metrics::registry& reg,
                                          std::string_view backend,
                                          std::string_view topic,
                                          std::string_view group,
                                          std::uint32_t max_deliveries)
    -> std::shared_ptr<delivery_counters>;

}  // namespace weft::bus::detail
