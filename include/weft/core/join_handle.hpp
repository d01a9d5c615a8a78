#pragma once

#include <coroutine>
#include <cstdint>
#include <source_location>
#include <stdexcept>
#include <utility>

#include "weft/core/detail/wait_tag.hpp"
#include "weft/core/detail/worker_base.hpp"
#include "weft/core/task.hpp"

namespace weft {

/// The result of a forked or spawned task: `co_await h` waits for it and yields its value (or
/// rethrows its exception), from any thread. Move-only; owns the child's frame until joined.
/// Dropping an unjoined handle detaches the child: it runs on and frees itself when done, so
/// anything it references must outlive it (prefer joining, or a scope). `detach()` says so
/// explicitly.
///
///     auto h = weft::spawn(fetch(url));
///     ...
///     auto body = co_await std::move(h);
template <typename T>
class [[nodiscard]] join_handle {
public:
    join_handle() noexcept = default;
    explicit join_handle(detail::task_handle<T> h) noexcept : h_(h) {}
    join_handle(join_handle&& o) noexcept : h_(std::exchange(o.h_, {})) {}
    auto operator=(join_handle&& o) noexcept -> join_handle& {
        if (this != &o) {
            detach();
            h_ = std::exchange(o.h_, {});
        }
        return *this;
    }
    ~join_handle() { detach(); }

    /// True once the child finished (its result is ready).
    [[nodiscard]] auto done() const noexcept -> bool {
        return h_ && h_.promise().join_.load(std::memory_order_acquire) == detail::join_done;
    }

    /// Lets the child run on unobserved; it frees its own frame. If it fails, the exception goes
    /// to the runtime's on_detached_failure handler (default: printed to stderr).
    void detach() noexcept {
        if (!h_) {
            return;
        }
        auto h = std::exchange(h_, {});
        // acq_rel: acquire sees the finished child's writes before freeing its frame; release
        // orders our last reads of it before a child that finishes later frees it.
        if (h.promise().join_.exchange(detail::join_detached, std::memory_order_acq_rel) ==
            detail::join_done) {
            detail::destroy_unjoined(h);
        }
    }

    struct awaiter {
        detail::task_handle<T> h;
        detail::wait_tag tag{};
        auto await_ready() noexcept -> bool {
            auto& p = h.promise();
            if (p.join_.load(std::memory_order_acquire) != detail::join_done) {
                return false;
            }
            // A ready join of a spawned task counts against the turn's budget: a loop that
            // only ever joins finished tasks still lets the others run (forks skip this, and
            // the look for the worker: their join is the fork-join fast path).
            if (p.mode_ != detail::task_mode::spawned) {
                return true;
            }
            detail::worker_base* w = detail::current_worker();
            return w == nullptr || !w->consume_budget();
        }
        template <typename P>
        WEFT_PUBLISHES_HANDLE auto await_suspend(std::coroutine_handle<P> waiter) -> bool {
            tag.set(waiter, wait_kind::join);
            auto expected = detail::join_running;
            // release publishes the waiter frame to the child; acquire (on failure) sees the
            // result of a child that just finished.
            if (h.promise().join_.compare_exchange_strong(
                    expected, reinterpret_cast<std::uintptr_t>(waiter.address()),
                    std::memory_order_acq_rel, std::memory_order_acquire)) {
                return true;
            }
            // Already finished: we are here because the turn's budget is spent. Yield.
            if (detail::worker_base* w = detail::current_worker(); w != nullptr) {
                w->yield_turn(waiter);
                return true;
            }
            return false;
        }
        auto await_resume() -> T {
            tag.clear();
            struct free_frame {
                detail::task_handle<T> h;
                ~free_frame() { h.destroy(); }
            } guard{h};
            return h.promise().result();
        }
    };
    auto operator co_await() && noexcept -> awaiter { return awaiter{std::exchange(h_, {})}; }

private:
    detail::task_handle<T> h_;
};

namespace detail {
template <typename T>
struct fork_awaiter {
    task_handle<T> child;
    auto await_ready() noexcept -> bool { return false; }
    template <typename P>
    WEFT_PUBLISHES_HANDLE auto await_suspend(std::coroutine_handle<P> parent)
        -> std::coroutine_handle<> {
        auto& cp = child.promise();
        if constexpr (is_weft_promise<P>) {
            if (cp.stop_ == nullptr) {
                cp.stop_ = parent.promise().stop_;
            }
        }
        cp.continuation_ = parent;
        worker_base* w = tl_worker_unsafe_in_coroutines;  // out of line: see its comment
        if (w == nullptr) {
            cp.mode_ = task_mode::forked_sync;
            return child;
        }
        cp.mode_ = task_mode::forked;
        const task_handle<T> c = child;
        // NOTE: from here on a thief may resume the parent, and with it this awaiter (which lives
        // in the parent's frame): touch neither, only the local copy.
        w->push(parent);
        return c;
    }
    auto await_resume() noexcept -> join_handle<T> { return join_handle<T>{child}; }
};
}  // namespace detail

/// Starts `t` now, on this thread, and lets the rest of the calling coroutine run on (here once
/// `t` suspends or finishes, or on a thief's thread at once): continuation stealing, the
/// fork-join fast path. Join with `co_await std::move(handle)`.
///
///     weft::task<long> fib(int n) {
///         if (n < 2) co_return n;
///         auto a = co_await weft::fork(fib(n - 1));
///         long b = co_await fib(n - 2);
///         co_return co_await std::move(a) + b;
///     }
/// `site` (the caller's) is kept in the child's frame for runtime::dump().
template <typename T>
[[nodiscard]] auto fork(task<T> t,
                        std::source_location site = std::source_location::current()) noexcept
    -> detail::fork_awaiter<T> {
    auto h = t.release();
    h.promise().set_site(site);
    return detail::fork_awaiter<T>{h};
}

/// Queues `t` on the current worker (idle workers may steal it) and returns its handle. The
/// task is cancelled when the runtime shuts down. Must be called on a thread running a weft
/// executor (a runtime worker or inside sync_wait); throws std::logic_error otherwise.
/// `site` (the caller's) and `name` are what runtime::dump() shows of it.
template <typename T>
auto spawn(task_name name, task<T> t, std::source_location site = std::source_location::current())
    -> join_handle<T> {
    detail::worker_base* w = detail::current_worker();
    if (w == nullptr) {
        throw std::logic_error("weft::spawn: no weft executor on this thread");
    }
    auto h = t.release();
    auto& p = h.promise();
    p.stop_ = w->root_stop();
    p.mode_ = detail::task_mode::spawned;
    detail::record_spawn(*w, p, h.address(), site, name.value);
    w->push(h);
    return join_handle<T>{h};
}
template <typename T>
auto spawn(task<T> t, std::source_location site = std::source_location::current())
    -> join_handle<T> {
    return spawn(task_name{}, std::move(t), site);
}

/// `spawn([&]() -> weft::task<T> {...})`: the lambda is kept alive with its task.
template <detail::task_factory Fn>
auto spawn(Fn fn, std::source_location site = std::source_location::current()) {
    return spawn(task_name{}, detail::call_holding(std::move(fn)), site);
}
template <detail::task_factory Fn>
auto spawn(task_name name, Fn fn, std::source_location site = std::source_location::current()) {
    return spawn(name, detail::call_holding(std::move(fn)), site);
}

}  // namespace weft
