#pragma once

#include <atomic>
#include <cstdint>

#include "weft/bus/outbox_metrics.hpp"

namespace weft::bus::detail {

/// The relay's counters (relaxed: statistics, read as a snapshot).
struct relay_counters {
    std::atomic<std::uint64_t> staged{0};
    std::atomic<std::uint64_t> published{0};
    std::atomic<std::uint64_t> retries{0};
    std::atomic<std::uint64_t> dead_lettered{0};
    std::atomic<std::uint64_t> idle_waits{0};
    std::atomic<std::int64_t> oldest_pending_staged_ms{0};  // 0: nothing pending
    std::atomic<std::uint32_t> window{0};                   // set by the relay at its start
    std::atomic<std::uint64_t> peak_unacked_per_key{0};
    std::atomic<std::uint64_t> window_gaps{0};
};

/// The counters as outbox_metrics (oldest_pending_age measured now).
[[nodiscard]] auto snapshot(const relay_counters& c) noexcept -> outbox_metrics;

}  // namespace weft::bus::detail
