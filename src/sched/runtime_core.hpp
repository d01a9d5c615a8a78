#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <coroutine>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "blocking_pool.hpp"
#include "timer_wheel.hpp"
#include "weft/core/detail/worker_base.hpp"
#include "weft/sched/detail/context.hpp"
#include "weft/sched/runtime.hpp"

namespace weft::detail {

/// A worker's timers: the wheel plus the lock that lets other threads cancel entries in it.
/// Only the owning worker arms entries and advances the wheel; any thread may cancel.
class timer_queue {
public:
    explicit timer_queue(sched_worker& owner) noexcept : owner_(owner) {}
    std::mutex mu;
    timer_wheel wheel;  // guarded by mu
    [[nodiscard]] auto owner() const noexcept -> sched_worker& { return owner_; }
    /// Timers armed here and not yet fired or cancelled (read without the lock: a hint).
    std::atomic<std::size_t> pending{0};

private:
    sched_worker& owner_;
};

/// One worker thread. Owns its deque (worker_base), timer wheel and park driver.
class sched_worker final : public worker_base {
public:
    sched_worker(runtime_core& rt, unsigned index);
    sched_worker(const sched_worker&) = delete;
    auto operator=(const sched_worker&) -> sched_worker& = delete;
    ~sched_worker() = default;

    void start();
    void join();
    void schedule_remote(std::coroutine_handle<> h) noexcept override;
    void yield_turn(std::coroutine_handle<> h) noexcept override;
    void detached_failure(std::exception_ptr e) noexcept override;

    // runtime::worker_metrics: written by this worker only (load + store, no RMW), read by any.
    std::atomic<std::uint64_t> park_attempts{0};
    std::atomic<std::uint64_t> sleeps{0};
    static void bump(std::atomic<std::uint64_t>& c) noexcept {
        c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }

    [[nodiscard]] auto runtime() noexcept -> runtime_core& { return rt_; }
    [[nodiscard]] auto timers() noexcept -> timer_queue& { return timers_; }
    [[nodiscard]] auto index() const noexcept -> unsigned { return index_; }
    void unpark() noexcept { driver_->unpark(); }
    /// Any thread: run `h` on this worker (not on any other), soon.
    void post(std::coroutine_handle<> h);
    [[nodiscard]] auto inbox_empty() const noexcept -> bool {
        return !inbox_nonempty_.load(std::memory_order_seq_cst);
    }
    [[nodiscard]] auto io_pending() const noexcept -> std::size_t { return driver_->pending(); }
    /// What thieves could take from this worker (its deque; not the LIFO slot). seq_cst: for the
    /// parking protocol.
    [[nodiscard]] auto stealable_size_seq_cst() const noexcept -> std::int64_t {
        return deque_.size_seq_cst();
    }
    [[nodiscard]] auto queued() const noexcept -> std::int64_t {
        return deque_.size() + (lifo_.load(std::memory_order_relaxed) != nullptr ? 1 : 0);
    }
    /// Thieves: one of this worker's oldest entries, still tagged (nullptr: none, or lost a race).
    auto steal_one() noexcept -> void* { return deque_.steal(); }
    /// Thieves: this worker's oldest queued entry (still tagged) and its position.
    auto peek_oldest(std::int64_t& pos) const noexcept -> void* { return deque_.peek_top(pos); }
    /// Handles to resume after timers fired (filled by fire_timers, owner only).
    auto fire_timers() -> bool;

    // Idle bookkeeping, guarded by runtime_core::idle_mu_.
    bool in_idle_list = false;
    // True while this worker counts in runtime_core::searching_ (owner only, except that a
    // waker sets it for the worker it wakes, under idle_mu_, before unparking it).
    bool searching = false;

private:
    void on_push() noexcept override;
    void overflow(std::coroutine_handle<> h) override;
    [[nodiscard]] auto others_may_wait() const noexcept -> bool override;
    void run();
    auto next_task() -> void*;
    auto find_work() -> void*;
    auto become_searching() noexcept -> bool;
    auto steal_once() -> void*;
    /// May this worker steal from `victim` now? (Its oldest entry is not a freshly displaced
    /// task, or has been one for long enough.)
    auto settled(const sched_worker& victim) noexcept -> bool;
    auto take_injected() -> void*;
    void park();

    auto take_inbox() -> void*;

    runtime_core& rt_;
    unsigned index_;
    std::mutex inbox_mu_;
    std::vector<void*> inbox_;                 // guarded by inbox_mu_: tasks posted to this worker
    std::atomic<bool> inbox_nonempty_{false};  // == !inbox_.empty(), readable without the lock
    timer_queue timers_;
    std::unique_ptr<park_driver> driver_;
    std::thread thread_;
    std::uint32_t until_fairness_ = 61;  // tasks until the next fairness check
    bool yielded_ = false;               // a task yielded its turn: the next pick is a fair one
    std::uint64_t rng_;
    /// Per victim: the displaced entry this worker last found oldest there (its position) and
    /// when it first saw it (see settled).
    struct sighting {
        std::int64_t pos = -1;
        std::chrono::steady_clock::time_point since{};
    };
    std::vector<sighting> seen_;
};

/// Shared state of a runtime.
///
/// Parking protocol (no lost wake-ups, one wake per submission):
/// - A submitter publishes work (deque push / injector push), then checks `searching_` and
///   `idle_count_`: if nobody searches and someone is parked, it pops one parked worker from
///   `idle_` (under idle_mu_), counts it as searching and unparks it.
/// - A worker about to park adds itself to `idle_` (under idle_mu_, bumping idle_count_
///   seq_cst), then re-checks every queue; if it finds work it takes itself off the list again.
/// Why no wake-up is lost (C++ memory model, [atomics.order]): the submitter's publication
/// (a deque's bottom_ store, the injector's count) is sequenced before a seq_cst fence F
/// (notify_parked), which is sequenced before its seq_cst load of idle_count. The parker's
/// idle_count increment (a seq_cst RMW) is sequenced before its seq_cst loads of the queues
/// (has_work_for: injector count, deque bottom_/top_ through size_seq_cst, inbox flag). All of
/// these are in the single total order S. If a queue load follows F in S, it sees the
/// publication (a seq_cst fence after a store makes every later-in-S load of that object see
/// it or something later). Otherwise it precedes F, so the RMW, sequenced before it, precedes F
/// in S too, and the submitter's idle_count load, sequenced after F, sees the RMW: it finds
/// the worker parked and wakes it. Relaxed queue loads would not be in S, and nothing would tie
/// them to F (x86's locked RMW orders them anyway; the model, and weaker CPUs, do not).
/// Local deque pushes check idle_count_ with a relaxed load first (a fence per fork would cost
/// more than the fork): the owner is awake and will run that work itself, and re-checks every
/// 61 ticks, so nothing is stranded.
/// A task in another worker's LIFO slot is not work for a parker: only its owner may run it,
/// and the owner is awake (it put it there).
/// - At most half the workers search (steal) at once; the last searcher to find work wakes
///   another parked worker, so a burst fans out one worker at a time.
class runtime_core {
public:
    explicit runtime_core(runtime_options opts);
    runtime_core(const runtime_core&) = delete;
    auto operator=(const runtime_core&) -> runtime_core& = delete;
    ~runtime_core();

    void start();
    void shutdown();
    /// Worker thread: its driver is attached (or failed to).
    void worker_started(std::exception_ptr error);

    void inject(void* h);
    void inject_batch(void* const* hs, std::size_t n);
    auto take_injected(void** out, std::size_t max) -> std::size_t;
    [[nodiscard]] auto injector_empty() const noexcept -> bool {
        return injected_.load(std::memory_order_seq_cst) == 0;
    }

    void notify_parked() noexcept;
    /// Is there work `self` could run: the injector, its own queue, and (may_steal) any other
    /// worker's deque (not its LIFO slot: thieves may not take that)? seq_cst loads: see the
    /// parking protocol above.
    [[nodiscard]] auto has_work_for(const sched_worker& self, bool may_steal) const noexcept
        -> bool;

    [[nodiscard]] auto now_ms() const noexcept -> std::uint64_t;
    [[nodiscard]] auto to_ms_ceil(std::chrono::steady_clock::time_point t) const noexcept
        -> std::uint64_t;
    [[nodiscard]] auto ms_to_ns_from_now(std::uint64_t when_ms) const noexcept -> std::int64_t;

    const runtime_options opts;
    const unsigned planned_workers;  // opts.workers, or the CPU count when that is 0
    std::vector<std::unique_ptr<sched_worker>> workers;
    stop_state root;
    blocking_pool blocking;

    std::mutex idle_mu;
    std::vector<sched_worker*> idle;      // guarded by idle_mu
    std::atomic<unsigned> idle_count{0};  // == idle.size(), readable without the lock
    // Times a worker left the idle list (see quiescent: a snapshot during which it did not
    // change saw every worker parked throughout).
    std::atomic<std::uint64_t> unparks{0};
    std::atomic<unsigned> searching{0};
    std::atomic<bool> shutting_down{false};
    std::atomic<bool> terminate{false};
    std::mutex quiet_mu;
    std::condition_variable quiet_cv;  // a worker parked during shutdown

private:
    [[nodiscard]] auto quiescent() const noexcept -> bool;

    std::mutex start_mu_;
    std::condition_variable start_cv_;
    std::size_t started_ = 0;         // guarded by start_mu_
    std::exception_ptr start_error_;  // guarded by start_mu_
    std::chrono::steady_clock::time_point epoch_;
    mutable std::mutex inject_mu_;
    std::deque<void*> injector_;            // guarded by inject_mu_
    std::atomic<std::size_t> injected_{0};  // == injector_.size()
};

}  // namespace weft::detail
