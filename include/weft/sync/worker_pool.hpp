#pragma once

#include <atomic>
#include <concepts>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <ranges>
#include <stdexcept>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "weft/core/join_handle.hpp"
#include "weft/core/task.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sync/channel.hpp"
#include "weft/sync/detail/waiter.hpp"

namespace weft {

namespace detail {

/// One call of worker_pool::map, living in the caller's frame (no allocation per call). The
/// caller sends its address through the intake channel and waits on `word`.
///
/// `word` states: 0 = pending, 1 = done (out/error written), any other value = the frame address
/// of the caller waiting for it. The worker's exchange (acq_rel) publishes out/error to the
/// caller and sees `home` written by a caller that parked; the caller's CAS (acq_rel) publishes
/// `home` and, on failure, sees the result.
template <typename In, typename Out>
struct pool_job {
    explicit pool_job(In in) noexcept(std::is_nothrow_move_constructible_v<In>)
        : input(std::move(in)) {}
    pool_job(const pool_job&) = delete;
    auto operator=(const pool_job&) -> pool_job& = delete;

    In input;
    std::optional<std::conditional_t<std::is_void_v<Out>, bool, Out>> out;
    std::exception_ptr error;
    std::atomic<std::uintptr_t> word{0};
    waiter_home home;

    /// Worker side: the result is written; wake the caller if it waits.
    void complete() {
        const std::uintptr_t prev = word.exchange(1, std::memory_order_acq_rel);
        if (prev > 1) {
            const waiter_home h = home;  // the caller is parked: its frame (and this job) is alive
            resume_waiter(std::coroutine_handle<>::from_address(reinterpret_cast<void*>(prev)), h);
        }
    }

    struct [[nodiscard]] done_awaiter {
        pool_job* job;
        auto await_ready() const noexcept -> bool {
            return job->word.load(std::memory_order_acquire) == 1;
        }
        WEFT_PUBLISHES_HANDLE auto await_suspend(std::coroutine_handle<> h) noexcept -> bool {
            job->home = waiter_home::here();  // out of line: see its comment
            std::uintptr_t expected = 0;
            return job->word.compare_exchange_strong(
                expected, reinterpret_cast<std::uintptr_t>(h.address()), std::memory_order_acq_rel,
                std::memory_order_acquire);
        }
        void await_resume() const noexcept {}
    };
    auto done() noexcept -> done_awaiter { return done_awaiter{this}; }

    auto take() -> Out {
        if (error) {
            std::rethrow_exception(error);
        }
        if constexpr (!std::is_void_v<Out>) {
            return std::move(*out);
        }
    }
};

template <typename In, typename Out>
struct pool_state {
    using job = pool_job<In, Out>;
    pool_state(std::size_t capacity, std::size_t workers)
        : intake(capacity), live_workers(workers) {}

    channel<job*> intake;
    // In&&, not In: the input is moved once, into the handler's parameter (a by-value
    // std::function signature would move it into its own parameter first).
    std::function<task<Out>(In&&)> async_handler;
    std::function<Out(In&&)> sync_handler;
    std::atomic<std::size_t> live_workers;
};

template <typename In, typename Out>
auto pool_worker(std::shared_ptr<pool_state<In, Out>> s) -> task<void> {
    using job = pool_job<In, Out>;
    for (;;) {
        auto r = co_await s->intake.recv();
        if (!r) {
            break;  // closed and drained, or the runtime is stopping
        }
        job* j = *r;
        try {
            if (s->async_handler) {
                if constexpr (std::is_void_v<Out>) {
                    co_await s->async_handler(std::move(j->input));
                    j->out.emplace(true);
                } else {
                    j->out.emplace(co_await s->async_handler(std::move(j->input)));
                }
            } else {
                if constexpr (std::is_void_v<Out>) {
                    s->sync_handler(std::move(j->input));
                    j->out.emplace(true);
                } else {
                    j->out.emplace(s->sync_handler(std::move(j->input)));
                }
            }
        } catch (...) {
            j->error = std::current_exception();
        }
        j->complete();  // NOTE: j may be gone from here on
    }
    // The last worker to leave closes the intake and fails what is still queued, so no caller
    // waits forever when the workers were cancelled (runtime shutdown).
    if (s->live_workers.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        s->intake.close();
        while (auto r = s->intake.try_recv()) {
            job* j = *r;
            j->error = std::make_exception_ptr(
                std::system_error(std::make_error_code(std::errc::operation_canceled)));
            j->complete();
        }
    }
}

/// map's path when the intake is full: wait for space (cancellable), then for the result.
// NOTE: noinline: see channel::recv_for.
template <typename In, typename Out>
[[gnu::noinline]] auto pool_send_and_wait(pool_state<In, Out>* s, pool_job<In, Out>* j)
    -> task<void> {
    if (auto r = co_await s->intake.send(j); !r) {
        throw std::system_error(r.error());
    }
    co_await j->done();
}

/// What `worker_pool::map` returns: the job lives in the awaiter (the caller's frame), so a
/// map that the intake takes at once (a handler waiting, or a free slot) costs no coroutine
/// frame: one non-blocking send, then one wait on the job word. When the intake is full it
/// starts pool_send_and_wait, with the caller as its continuation.
template <typename In, typename Out>
class [[nodiscard]] pool_map_awaiter {
public:
    pool_map_awaiter(pool_state<In, Out>* s,
                     In&& x) noexcept(std::is_nothrow_move_constructible_v<In>)
        : s_(s), job_(std::move(x)) {}
    pool_map_awaiter(const pool_map_awaiter&) = delete;
    auto operator=(const pool_map_awaiter&) -> pool_map_awaiter& = delete;
    ~pool_map_awaiter() = default;

    auto await_ready() -> bool {
        auto r = s_->intake.try_send(&job_);
        if (r) {
            sent_ = true;
            return false;  // await_suspend waits for the result (or finds it there already)
        }
        if (r.error() == std::errc::operation_would_block) {
            slow_ = pool_send_and_wait(s_, &job_);
            return false;
        }
        error_ = r.error();  // closed
        return true;
    }

    template <typename P>
    WEFT_PUBLISHES_HANDLE auto await_suspend(std::coroutine_handle<P> h)
        -> std::coroutine_handle<> {
        if (!sent_) {
            return typename task<void>::awaiter{slow_.handle()}.await_suspend(h);
        }
        job_.home = waiter_home::here();  // out of line: see its comment
        std::uintptr_t expected = 0;
        // acq_rel: see pool_job's `word` (publishes `home`; on failure, sees the result).
        if (job_.word.compare_exchange_strong(
                expected, reinterpret_cast<std::uintptr_t>(h.address()), std::memory_order_acq_rel,
                std::memory_order_acquire)) {
            return std::noop_coroutine();
        }
        // Done already (a handler on another worker was quicker). Charge the turn's budget as
        // a completed channel operation does, so a loop of such maps still lets others run.
        if (worker_base* w = job_.home.worker; w != nullptr && w->consume_budget()) {
            w->yield_turn(h);
            return std::noop_coroutine();
        }
        return h;
    }

    auto await_resume() -> Out {
        if (slow_.valid()) {
            typename task<void>::awaiter{slow_.handle()}.await_resume();  // rethrows its errors
        } else if (error_) {
            throw std::system_error(error_);
        }
        return job_.take();
    }

private:
    pool_state<In, Out>* s_;
    pool_job<In, Out> job_;
    task<void> slow_;  // only when the intake was full
    std::error_code error_;
    bool sent_ = false;
};

}  // namespace detail

/// A fixed set of long-lived handler tasks on the runtime's workers, fed through a bounded
/// intake channel. `co_await pool.map(x)` runs `handler(x)` on one of them and returns its value
/// (or rethrows its exception); when the intake is full, map waits (back-pressure). Callers from
/// any number of tasks contend only on the intake channel's short critical section; each result
/// comes back through a job word in the caller's own frame.
///
///     weft::worker_pool<int, int> pool{4, [](int x) -> weft::task<int> { co_return x * 2; }};
///     int y = co_await pool.map(21);
///     co_await pool.close();                   // drains queued work, then the handlers end
///
/// `handler` is `In -> task<Out>` or a plain `In -> Out`. map/map_batch may be called from any
/// weft coroutine. A map whose task is cancelled while waiting for intake space fails with
/// `std::system_error(operation_canceled)`; once its job is taken it waits for the result.
/// After close() (or when the runtime stops), map throws `std::system_error(closed)`.
/// Lifetime: the pool may be destroyed at any time after its callers returned; the handler
/// tasks hold the shared state and end once the intake is drained.
template <typename In, typename Out>
class worker_pool {
    using state = detail::pool_state<In, Out>;
    using job = detail::pool_job<In, Out>;

public:
    /// Spawns the handler tasks on the current runtime worker (must be called on one).
    template <typename Fn>
    worker_pool(std::size_t n_workers, Fn handler, std::size_t capacity = 0)
        : s_(make_state(n_workers, std::move(handler), capacity)) {
        for (std::size_t i = 0; i < n_workers; ++i) {
            workers_.push_back(weft::spawn(detail::pool_worker<In, Out>(s_)));
        }
    }
    /// Spawns the handler tasks on `rt` (from any thread).
    template <typename Fn>
    worker_pool(runtime& rt, std::size_t n_workers, Fn handler, std::size_t capacity = 0)
        : s_(make_state(n_workers, std::move(handler), capacity)) {
        for (std::size_t i = 0; i < n_workers; ++i) {
            workers_.push_back(rt.spawn(detail::pool_worker<In, Out>(s_)));
        }
    }
    worker_pool(const worker_pool&) = delete;
    auto operator=(const worker_pool&) -> worker_pool& = delete;
    /// Closes the intake; the handler tasks finish what is queued on their own.
    ~worker_pool() {
        if (s_) {
            s_->intake.close();
        }
    }

    /// `co_await pool.map(x)` -> Out: runs the handler on `x` in the pool; its value, or its
    /// exception rethrown. An awaitable, not a task (no frame per call): co_await it at once.
    auto map(In x) noexcept(std::is_nothrow_move_constructible_v<In>)
        -> detail::pool_map_awaiter<In, Out> {
        return detail::pool_map_awaiter<In, Out>{s_.get(), std::move(x)};
    }

    /// Maps every element of `inputs` (submitted in order, run concurrently); the outputs in
    /// input order. The first handler exception is rethrown after all jobs finished.
    // NOTE: the coroutine members are noinline: see channel::recv_for.
    template <std::ranges::input_range R>
    [[nodiscard, gnu::noinline]] auto map_batch(R&& inputs) -> task<std::vector<Out>>
        requires(!std::is_void_v<Out>)
    {
        std::deque<job> jobs;  // stable addresses while the workers hold them
        for (auto&& x : inputs) {
            jobs.emplace_back(In(std::forward<decltype(x)>(x)));
        }
        std::error_code send_error;
        std::size_t sent = 0;
        for (auto& j : jobs) {
            if (auto r = co_await s_->intake.send(&j); !r) {
                send_error = r.error();
                break;
            }
            ++sent;
        }
        for (std::size_t i = 0; i < sent; ++i) {
            co_await jobs[i].done();
        }
        if (send_error) {
            throw std::system_error(send_error);
        }
        std::vector<Out> outs;
        outs.reserve(jobs.size());
        for (auto& j : jobs) {
            outs.push_back(j.take());
        }
        co_return outs;
    }

    /// Closes the intake and waits until the handlers have finished everything queued.
    [[nodiscard, gnu::noinline]] auto close() -> task<void> {
        s_->intake.close();
        auto handles = std::move(workers_);
        for (auto& h : handles) {
            co_await std::move(h);
        }
    }

    [[nodiscard]] auto size() const noexcept -> std::size_t { return workers_.size(); }

private:
    template <typename Fn>
    static auto make_state(std::size_t n_workers, Fn handler, std::size_t capacity)
        -> std::shared_ptr<state> {
        if (n_workers == 0) {
            throw std::invalid_argument("weft::worker_pool: n_workers must be >= 1");
        }
        auto s = std::make_shared<state>(capacity == 0 ? 2 * n_workers : capacity, n_workers);
        using R = std::invoke_result_t<Fn&, In>;
        if constexpr (detail::is_task<R>::value) {
            s->async_handler = std::move(handler);
        } else {
            s->sync_handler = std::move(handler);
        }
        return s;
    }

    std::shared_ptr<state> s_;
    std::vector<join_handle<void>> workers_;
};

}  // namespace weft
