#pragma once

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

/// After resumption: unregisters from the stop_state; the outcome (ok or operation_canceled).
[[nodiscard]] auto timer_finish(timer_op& op) noexcept -> result<void>;

}  // namespace weft::detail
