#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string_view>

#include "weft/metrics/counter.hpp"
#include "weft/metrics/histogram.hpp"
#include "weft/metrics/registry.hpp"

namespace weft::bus::detail {

/// One publisher's series in the metrics registry, labelled {backend}:
/// - published: messages handed to the broker; acked and failed: their outcomes (published ==
///   acked + failed + in flight);
/// - ack_seconds: from handing a message over to its acknowledgement;
/// - in flight: a gauge read from the publisher at collection (`in_flight`), so it is exact
///   and costs the publish path nothing.
/// The counters write the calling thread's own cell (no lock on the publish path).
struct publisher_counters {
    metrics::counter published;
    metrics::counter acked;
    metrics::counter failed;
    metrics::histogram ack_seconds;
    metrics::collector_handle in_flight;
};

/// `in_flight` is called at each collection until the counters are destroyed.
[[nodiscard]] auto make_publisher_counters(metrics::registry& reg,
                                           std::string_view backend,
                                           std::function<double()> in_flight)
    -> std::unique_ptr<publisher_counters>;

}  // namespace weft::bus::detail
