#include "relay_counters.hpp"

#include <algorithm>
#include <chrono>

#include "relay_row.hpp"

namespace weft::bus::detail {

auto snapshot(const relay_counters& c) noexcept -> outbox_metrics {
    outbox_metrics m;
    m.staged = c.staged.load(std::memory_order_relaxed);
    m.published = c.published.load(std::memory_order_relaxed);
    m.retries = c.retries.load(std::memory_order_relaxed);
    m.dead_lettered = c.dead_lettered.load(std::memory_order_relaxed);
    m.idle_waits = c.idle_waits.load(std::memory_order_relaxed);
    m.unacked_per_key_limit = c.window.load(std::memory_order_relaxed);
    m.peak_unacked_per_key = c.peak_unacked_per_key.load(std::memory_order_relaxed);
    m.window_gaps = c.window_gaps.load(std::memory_order_relaxed);
    const std::int64_t oldest = c.oldest_pending_staged_ms.load(std::memory_order_relaxed);
    if (oldest != 0) {
        m.oldest_pending_age =
            std::chrono::milliseconds{std::max<std::int64_t>(0, now_ms() - oldest)};
    }
    return m;
}

}  // namespace weft::bus::detail
