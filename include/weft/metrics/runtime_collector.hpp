#pragma once

#include "weft/metrics/registry.hpp"
#include "weft/sched/runtime.hpp"

namespace weft::metrics {

/// Exposes `rt`'s scheduler in `reg`, read at each collection (runtime::metrics and
/// runtime::worker_metrics; nothing is added to the scheduler's own paths):
/// - gauges `weft_runtime_workers`, `weft_runtime_workers_parked`,
///   `weft_runtime_workers_searching`, `weft_runtime_injector_depth`,
///   `weft_runtime_blocking_threads`, `weft_runtime_blocking_busy`,
///   `weft_runtime_blocking_in_flight`;
/// - per worker (label `worker`): gauges `weft_runtime_queue_depth`, `weft_runtime_timers`,
///   counters `weft_runtime_park_attempts`, `weft_runtime_sleeps`, `weft_runtime_wakes`,
///   `weft_worker_stalls` (exposed as `weft_worker_stalls_total`: the stall detector's reports).
///
/// Keep the handle no longer than `rt`: destroying it stops the reading.
///
///     weft::runtime rt;
///     weft::metrics::registry reg;
///     auto keep = weft::metrics::collect_runtime(reg, rt);
[[nodiscard]] auto collect_runtime(registry& reg, const runtime& rt) -> collector_handle;

}  // namespace weft::metrics
