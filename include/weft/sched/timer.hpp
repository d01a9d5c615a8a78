#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <coroutine>
#include <exception>
#include <limits>
#include <optional>
#include <system_error>
#include <type_traits>
#include <utility>

#include "weft/core/detail/wait_tag.hpp"
#include "weft/core/detail/worker_base.hpp"
#include "weft/core/join_handle.hpp"
#include "weft/core/result.hpp"
#include "weft/core/stop.hpp"
#include "weft/core/task.hpp"
#include "weft/sched/detail/deadline_after.hpp"
#include "weft/sched/detail/timer_op.hpp"
#include "weft/sched/runtime_clock.hpp"

namespace weft {

/// `co_await sleep_for(d)` / `sleep_until(t)`: suspends the task on its worker's timer wheel
/// (1 ms resolution, never early). Yields `operation_canceled` as soon as the task's stop is
/// requested, and the timer is unlinked at that moment. Needs a runtime worker.
/// `sleep_until(time_point::max())`, and `sleep_for` of a duration that reaches past the
/// clock's range (`duration::max()`), sleep until cancelled; a negative duration does not sleep.
class [[nodiscard]] sleep_awaiter {
public:
    explicit sleep_awaiter(std::chrono::steady_clock::time_point deadline) noexcept
        : deadline_(deadline) {}
    sleep_awaiter(const sleep_awaiter&) = delete;
    auto operator=(const sleep_awaiter&) -> sleep_awaiter& = delete;

    auto await_ready() const noexcept -> bool { return false; }
    template <typename P>
    WEFT_PUBLISHES_HANDLE auto await_suspend(std::coroutine_handle<P> h) -> bool {
        tag_.set(h, wait_kind::timer);
        return detail::timer_arm(op_, deadline_, detail::stop_of(h), h);
    }
    auto await_resume() noexcept -> result<void> {
        tag_.clear();
        return detail::timer_finish(op_);
    }

private:
    std::chrono::steady_clock::time_point deadline_;
    detail::timer_op op_;
    detail::wait_tag tag_;  // runtime::dump: waiting on a timer
};

[[nodiscard]] inline auto sleep_until(std::chrono::steady_clock::time_point t) noexcept
    -> sleep_awaiter {
    return sleep_awaiter{t};
}

template <typename Rep, typename Period>
[[nodiscard]] auto sleep_for(std::chrono::duration<Rep, Period> d) noexcept -> sleep_awaiter {
    return sleep_awaiter{detail::deadline_after(d)};
}

/// A deadline that moves while a task waits for it: `expires_at(t)` re-files the pending wait
/// in place on the worker's timer wheel, or, when `t` is later than the time it is armed for,
/// only records it (the wait wakes at the armed time, sees the later deadline and sleeps on).
/// So a deadline that moves with every request of a connection costs a store and a clock read
/// per move, and no timer is created or cancelled per request.
///
/// One task waits at a time; `expires_at` may be called from any thread.
///
///     weft::deadline_timer dl;                 // never expires until set
///     // watchdog:   for (;;) { auto r = co_await dl.wait(); if (!r || dl.expired()) break; }
///     // connection: dl.expires_after(10s); ... dl.expires_after(60s);
class deadline_timer {
public:
    using clock = runtime_clock;

    deadline_timer() noexcept = default;
    explicit deadline_timer(clock::time_point t) noexcept : ns_(to_ns(t)) {}
    deadline_timer(const deadline_timer&) = delete;
    auto operator=(const deadline_timer&) -> deadline_timer& = delete;

    /// Moves the deadline to `t` (clock::time_point::max(): never).
    void expires_at(clock::time_point t) noexcept {
        const std::int64_t ns = to_ns(t);
        ns_.store(ns, std::memory_order_seq_cst);
        if (ns < armed_ns_.load(std::memory_order_relaxed)) {
            detail::timer_move(op_, ns_, armed_on_);
        }
    }
    /// Moves the deadline to now + `d`, saturated: past the clock's range it is never.
    template <typename Rep, typename Period>
    void expires_after(std::chrono::duration<Rep, Period> d) noexcept {
        expires_at(detail::deadline_after(d));
    }
    [[nodiscard]] auto expiry() const noexcept -> clock::time_point {
        return clock::time_point{std::chrono::nanoseconds{ns_.load(std::memory_order_seq_cst)}};
    }
    /// Whether the deadline has passed.
    [[nodiscard]] auto expired() const noexcept -> bool { return clock::now() >= expiry(); }

    class [[nodiscard]] awaiter {
    public:
        awaiter(deadline_timer& t, std::int64_t cap_ns) noexcept : t_(t), cap_ns_(cap_ns) {}
        auto await_ready() const noexcept -> bool { return false; }
        template <typename P>
        WEFT_PUBLISHES_HANDLE auto await_suspend(std::coroutine_handle<P> h) -> bool {
            t_.armed_ns_.store(std::min(t_.ns_.load(std::memory_order_seq_cst), cap_ns_),
                               std::memory_order_relaxed);
            return detail::timer_arm_movable(t_.op_, t_.ns_, cap_ns_, t_.armed_on_,
                                             detail::stop_of(h), h);
        }
        auto await_resume() noexcept -> result<void> {
            t_.armed_on_.store(nullptr, std::memory_order_seq_cst);
            t_.armed_ns_.store(std::numeric_limits<std::int64_t>::max(), std::memory_order_relaxed);
            return detail::timer_finish(t_.op_);
        }

    private:
        deadline_timer& t_;
        std::int64_t cap_ns_;
    };

    /// Waits until the deadline as it was when the wait was armed, or moved earlier since; ok
    /// then (check expired(): it may have moved later), operation_canceled when the task's stop
    /// is requested. Needs a runtime worker.
    [[nodiscard]] auto wait() noexcept -> awaiter {
        return awaiter{*this, std::numeric_limits<std::int64_t>::max()};
    }
    /// Like wait(), but wakes by `cap` at the latest. A watchdog that waits with a cap no later
    /// than the shortest deadline it will be given keeps every later move a plain store: the
    /// wait is never armed past a deadline set afterwards.
    [[nodiscard]] auto wait(clock::time_point cap) noexcept -> awaiter {
        return awaiter{*this, to_ns(cap)};
    }

private:
    static auto to_ns(clock::time_point t) noexcept -> std::int64_t {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
    }

    std::atomic<std::int64_t> ns_{std::numeric_limits<std::int64_t>::max()};
    // The deadline the pending wait was armed for (max when none): a later move only stores.
    std::atomic<std::int64_t> armed_ns_{std::numeric_limits<std::int64_t>::max()};
    std::atomic<detail::timer_queue*> armed_on_{nullptr};
    detail::timer_op op_;
};

namespace detail {
template <typename T>
struct is_result : std::false_type {};
template <typename T>
struct is_result<result<T>> : std::true_type {};

/// Does `e` report a cancellation (a std::system_error holding operation_canceled, as
/// `result::value()` throws on a cancelled operation)? Only such a failure can have been caused
/// by with_timeout's deadline.
inline auto is_cancellation(const std::exception_ptr& e) noexcept -> bool {
    try {
        std::rethrow_exception(e);
    } catch (const std::system_error& se) {
        return se.code() == std::errc::operation_canceled;
    } catch (...) {
        return false;
    }
}

inline auto timeout_timer(std::chrono::steady_clock::time_point deadline,
                          stop_state& work,
                          std::atomic<bool>& timed_out) -> task<void> {
    if (auto r = co_await sleep_until(deadline); r) {
        timed_out.store(true, std::memory_order_relaxed);
        work.request_stop();
    }
}
}  // namespace detail

/// Runs `t`; if it has not finished after `d`, cancels it, waits for it to wind down and yields
/// `timed_out`. A value the task produced anyway (it finished before it saw the cancellation)
/// is returned, never dropped; a task that reports its own cancellation after the deadline (a
/// result holding operation_canceled, or a std::system_error holding it) becomes `timed_out`.
/// Any other exception propagates, whenever it was thrown. A `d` that reaches past the clock's
/// range (`duration::max()`) never times out.
///
///     auto r = co_await weft::with_timeout(100ms, fetch());   // result<T>
template <typename T, typename Rep, typename Period>
auto with_timeout(std::chrono::duration<Rep, Period> d, task<T> t)
    -> task<result<std::conditional_t<std::is_void_v<T>, void, T>>> {
    using R = result<std::conditional_t<std::is_void_v<T>, void, T>>;
    const auto deadline = detail::deadline_after(d);
    stop_state* parent = co_await detail::current_stop{};
    linked_stop_state work_stop(parent);
    linked_stop_state timer_stop(parent);
    std::atomic<bool> timed_out{false};
    auto timer = detail::timeout_timer(deadline, work_stop, timed_out);
    detail::set_stop(timer, &timer_stop);
    auto timer_handle = co_await fork(std::move(timer));
    detail::set_stop(t, &work_stop);
    std::optional<std::conditional_t<std::is_void_v<T>, bool, T>> value;
    std::exception_ptr error;
    try {
        if constexpr (std::is_void_v<T>) {
            co_await std::move(t);
            value.emplace(true);
        } else {
            value.emplace(co_await std::move(t));
        }
    } catch (...) {
        error = std::current_exception();
    }
    timer_stop.request_stop();
    co_await std::move(timer_handle);
    const bool expired = timed_out.load(std::memory_order_relaxed);
    if (error) {
        if (expired && detail::is_cancellation(error)) {
            co_return R{std::errc::timed_out};
        }
        std::rethrow_exception(error);  // a failure of its own, even if it came late
    }
    if constexpr (detail::is_result<T>::value) {
        if (expired && !*value && value->error() == std::errc::operation_canceled) {
            co_return R{std::errc::timed_out};
        }
    }
    if constexpr (std::is_void_v<T>) {
        co_return R{};
    } else {
        co_return R{std::move(*value)};
    }
}

}  // namespace weft
