#pragma once

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdint>

#include "weft/core/result.hpp"
#include "weft/core/stop.hpp"

namespace weft::detail {

class timer_queue;

/// One pending sleep, embedded in the sleeping coroutine's frame (no allocation). Linked into
/// the timer wheel of the worker it was armed on and, for cancellation, into its stop_state.
///
/// `state` (guarded by the owning timer_queue's mutex):
///   idle      - not armed yet (or never: expired at once)
///   armed     - in the wheel; the waiter is suspended
///   fired     - taken out by its worker, waiter queued to run
///   cancelled - taken out by a stop request (or refused to arm), waiter queued to run / resumed
/// Whoever moves it out of `armed` owns resuming the waiter, exactly once.
struct timer_op : stop_callback_node {
    enum class state : std::uint8_t { idle, armed, fired, cancelled };

    timer_op() noexcept : stop_callback_node(&timer_op::on_stop) {}
    timer_op(const timer_op&) = delete;
    auto operator=(const timer_op&) -> timer_op& = delete;

    static void on_stop(stop_callback_node* n) noexcept;

    timer_op* wheel_prev = nullptr;
    timer_op* wheel_next = nullptr;
    std::uint64_t when_ms = 0;  // runtime clock, milliseconds, rounded up
    std::uint8_t level = 0;
    std::uint8_t slot = 0;
    state st = state::idle;
    bool registered = false;  // in stop's callback list
    std::coroutine_handle<> waiter;
    timer_queue* owner = nullptr;
    stop_state* stop = nullptr;
};

/// Arms `op` on the current runtime worker. Returns false when the caller must not suspend
/// (deadline already passed, or cancellation already requested). Throws std::logic_error off a
/// runtime worker thread.
[[nodiscard]] auto timer_arm(timer_op& op,
                             std::chrono::steady_clock::time_point deadline,
                             stop_state* stop,
                             std::coroutine_handle<> waiter) -> bool;

/// Like timer_arm, for a deadline that may move while armed (weft::deadline_timer): the
/// deadline is read from `deadline_ns` (steady_clock nanoseconds) under the wheel's lock, after
/// `armed_on` is published, so a concurrent timer_move either sees the queue or the arm sees
/// the moved deadline. It arms at no later than `cap_ns`.
[[nodiscard]] auto timer_arm_movable(timer_op& op,
                                     const std::atomic<std::int64_t>& deadline_ns,
                                     std::int64_t cap_ns,
                                     std::atomic<timer_queue*>& armed_on,
                                     stop_state* stop,
                                     std::coroutine_handle<> waiter) -> bool;
/// Re-files an armed movable timer at the deadline now in `deadline_ns`, in place on its wheel
/// (remove + insert, O(1)); wakes the owning worker when it moved earlier and the caller runs
/// elsewhere, so that worker does not sleep past it. Does nothing if not armed.
void timer_move(timer_op& op,
                const std::atomic<std::int64_t>& deadline_ns,
                std::atomic<timer_queue*>& armed_on) noexcept;
/// After resumption: unregisters from the stop_state; the outcome (ok or operation_canceled).
[[nodiscard]] auto timer_finish(timer_op& op) noexcept -> result<void>;

}  // namespace weft::detail
