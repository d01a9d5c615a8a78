#pragma once

#include <atomic>
#include <chrono>

#include "weft/core/task.hpp"
#include "weft/sync/event.hpp"

namespace weft::bus::detail {

/// What stops a relay: `stopping` (read acquire, set by stop_relay with release) and `wake`
/// (manual reset, set together with it) to cut short its waits.
struct relay_stop {
    std::atomic<bool> stopping{false};
    event wake{event::reset_mode::manual};
    void request() {
        stopping.store(true, std::memory_order_release);
        wake.set();
    }
    [[nodiscard]] auto requested() const noexcept -> bool {
        return stopping.load(std::memory_order_acquire);
    }
};

/// Waits until `e` is set or `d` passes (or the task is stopped). Never fails.
auto wait_for_event(event& e, std::chrono::milliseconds d) -> task<void>;

}  // namespace weft::bus::detail
