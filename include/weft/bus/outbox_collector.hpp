#pragma once

#include <functional>
#include <string>

#include "weft/bus/outbox_metrics.hpp"
#include "weft/metrics/registry.hpp"

namespace weft::bus {

/// Exposes an outbox's counters in `reg`, read from `read` (an outbox's metrics()) at each
/// collection, labelled `outbox="<name>"`:
/// - counters `weft_outbox_staged`, `weft_outbox_published`, `weft_outbox_retries`,
///   `weft_outbox_dead_lettered`, `weft_outbox_idle_waits`;
/// - gauges `weft_outbox_pending` (staged and neither published nor dead-lettered yet, counted
///   in this process: staged - published - dead_lettered, at least 0) and
///   `weft_outbox_relay_lag_seconds` (outbox_metrics::oldest_pending_age: how long the oldest
///   event the relay holds has waited).
///
/// Keep the handle no longer than the outbox.
///
///     auto keep = weft::bus::collect_outbox(reg, "orders", [&] { return outbox.metrics(); });
[[nodiscard]] auto collect_outbox(metrics::registry& reg,
                                  std::string name,
                                  std::function<outbox_metrics()> read)
    -> metrics::collector_handle;

}  // namespace weft::bus
