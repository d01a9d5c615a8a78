#pragma once

#include <atomic>
#include <chrono>

#include "weft/core/task.hpp"
#include "weft/sync/event.hpp"

namespace weft::bus::detail {

/// What stops a relay: `stopping` (read acquire, set by stop_relay with release) and `wake`
/// (manual reset, set together with it) to cut short its waits.
///
/// A stop belongs to the run it ends: run_relay clears it when it returns, never when it
/// starts. A relay is usually spawned and its task starts later; a stop_relay() in between
/// (the caller goes on before the relay task first runs) must end that run, not be erased by
/// it, or the run never returns.
struct relay_stop {
    std::atomic<bool> stopping{false};
    event wake{event::reset_mode::manual};
    void request() {
        stopping.store(true, std::memory_order_release);
        wake.set();
    }
    /// After a run returned: the next run starts unstopped.
    void clear() {
        stopping.store(false, std::memory_order_release);
        wake.reset();
    }
    [[nodiscard]] auto requested() const noexcept -> bool {
        return stopping.load(std::memory_order_acquire);
    }
};

/// Waits until `e` is set or `d` passes (or the task is stopped). Never fails.
auto wait_for_event(event& e, std::chrono::milliseconds d) -> task<void>;

}  // namespace weft::bus::detail
