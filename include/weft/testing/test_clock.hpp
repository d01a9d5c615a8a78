#pragma once

#include <chrono>
#include <memory>

#include "weft/core/task.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/runtime_clock.hpp"

namespace weft::testing {

struct test_clock_options {
    /// Jump to the next deadline whenever every task is idle (tokio's auto-advance): a test that
    /// sleeps for an hour, or waits for a ten-minute ack timeout, runs in no wall time. false:
    /// time moves only inside advance().
    bool auto_advance = true;
    /// Worker threads. One (the default) is the deterministic choice: with more, the clock
    /// steps when all of them are parked, but only the last one's reactor is polled first.
    unsigned workers = 1;
};

/// runtime_options for a runtime on a new test clock: time starts paused at the moment of the
/// call and moves as described at weft::manual_clock. Every timer of that runtime follows it
/// (sleep_for, sleep_until, with_timeout, deadline_timer, the HTTP server's timeouts, the
/// memory broker's ack waits and redeliveries, the outbox relay's back-off); read it with
/// weft::runtime_clock::now() on the runtime's workers.
///
///     weft::runtime rt{weft::testing::test_clock_runtime()};
///     rt.block_on([]() -> weft::task<void> { co_await weft::sleep_for(10min); }());  // at once
[[nodiscard]] auto test_clock_runtime(test_clock_options o = {}) -> runtime_options;

/// Inside a task of a runtime on a test clock: moves time forward by `d` (to the clock's 1 ms
/// resolution), firing every timer due on the way in deadline order, each wave running until
/// the runtime is idle before time moves on; returns when the clock has reached now + d.
/// Works with auto-advance on or off (off: this is the only way time moves). Throws
/// std::logic_error on a runtime without a test clock.
[[nodiscard]] auto advance(std::chrono::nanoseconds d) -> task<void>;

}  // namespace weft::testing
