#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace weft {

/// A clock that moves only when the runtime moves it: the seam behind weft::testing's test
/// clock. A runtime built with one (runtime_options::clock) reads its time from it for every
/// timer (sleep_for, sleep_until, with_timeout, deadline_timer) and for everything that reads
/// weft::runtime_clock on its workers (the HTTP server's timeouts, the memory broker's ack
/// waits and redeliveries, the outbox relay's back-off).
///
/// Time starts at the steady_clock reading of its construction and stands still. The runtime
/// moves it forward when every worker has run out of work (all parked, nothing injected, no
/// blocking call running, no IO completion ready): to the earliest armed timer, one deadline
/// at a time, so what is due fires in deadline order and each wave runs before the next. It
/// never moves past `limit()`: time::max() with auto-advance on, otherwise the furthest point
/// `allow_until` opened (weft::testing::advance raises it and sleeps until it).
///
/// Any thread may read it; the runtime moves it under its own lock, and only forward.
class manual_clock {
public:
    using time_point = std::chrono::steady_clock::time_point;

    explicit manual_clock(bool auto_advance) noexcept
        : now_ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count()),
          limit_ns_(auto_advance ? std::numeric_limits<std::int64_t>::max() : now_ns_.load()) {}
    manual_clock(const manual_clock&) = delete;
    auto operator=(const manual_clock&) -> manual_clock& = delete;

    [[nodiscard]] auto now() const noexcept -> time_point {
        return time_point{std::chrono::nanoseconds{now_ns_.load(std::memory_order_acquire)}};
    }
    /// How far the runtime may move it on its own.
    [[nodiscard]] auto limit() const noexcept -> time_point {
        return time_point{std::chrono::nanoseconds{limit_ns_.load(std::memory_order_acquire)}};
    }
    /// Lets the runtime move time up to `t` (never lowers the limit).
    void allow_until(time_point t) noexcept {
        const std::int64_t ns = t.time_since_epoch().count();
        std::int64_t cur = limit_ns_.load(std::memory_order_relaxed);
        while (cur < ns && !limit_ns_.compare_exchange_weak(cur, ns, std::memory_order_acq_rel)) {
        }
    }
    /// The runtime, under its step lock: moves time to `t` if that is later.
    void move_to(time_point t) noexcept {
        const std::int64_t ns = t.time_since_epoch().count();
        if (ns > now_ns_.load(std::memory_order_relaxed)) {
            now_ns_.store(ns, std::memory_order_release);
        }
    }

private:
    static_assert(std::is_same_v<std::chrono::steady_clock::duration, std::chrono::nanoseconds>);
    // release: a task woken for a deadline reads a time at or past it on any thread.
    std::atomic<std::int64_t> now_ns_;
    std::atomic<std::int64_t> limit_ns_;
};

/// The time of the runtime running the calling thread: its manual_clock when it has one,
/// steady_clock otherwise (and off a runtime worker). Same time_point type as steady_clock, so
/// it drops in wherever a deadline is computed: `runtime_clock::now() + 5s`.
///
/// NOTE: deadlines handed to weft's timers must come from this clock, not from
/// steady_clock::now(), or a runtime with a manual clock waits for a time it may never reach.
struct runtime_clock {
    using duration = std::chrono::steady_clock::duration;
    using rep = duration::rep;
    using period = duration::period;
    using time_point = std::chrono::steady_clock::time_point;
    static constexpr bool is_steady = true;

    /// One thread-local load and a branch before steady_clock::now() when no manual clock is set.
    [[nodiscard]] static auto now() noexcept -> time_point;
    /// The manual clock of the runtime running the calling thread, or nullptr.
    [[nodiscard]] static auto manual() noexcept -> manual_clock*;
};

}  // namespace weft
