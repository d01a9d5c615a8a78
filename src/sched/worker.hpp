#pragma once

// Private to weft::sched: one worker thread of a runtime (runtime_core.hpp holds what the
// workers share).

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "io_home_load.hpp"
#include "timer_wheel.hpp"
#include "weft/core/detail/worker_base.hpp"
#include "weft/sched/detail/context.hpp"
#include "weft/sched/driver.hpp"
#include "weft/sched/runtime.hpp"

namespace weft::detail {

class runtime_core;

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
    std::atomic<std::uint64_t> wakes{0};
    std::atomic<std::uint64_t> deferred_wakes{0};
    /// A push deferred its wake-up (on_push, while there is an IO home) and the owner has not
    /// picked a task since. Written by the owner, read by parked workers on their watch (relaxed: a
    /// hint; a stale value costs one early or late look).
    std::atomic<bool> deferring{false};
    /// This worker's last load window (runtime_core::window_load, consolidate_io only):
    /// runtime_core::pack'ed. Written by this worker at the end of each window, read by
    /// any worker reviewing the IO home (relaxed: a hint; any value read is safe to act on).
    std::atomic<std::uint64_t> last_window{0};
    /// Stalls the monitor reported here (written by the monitor thread only).
    std::atomic<std::uint64_t> stalls{0};
    /// The stall detector's heartbeat: a new odd value as each task's turn starts; even once
    /// the worker waits (parks, stops for a dump, leaves its loop). So an odd value that stays
    /// is one task's turn, and the few loop steps after it until the next turn or park (looking
    /// for work, firing timers) count with it. Owner stores (relaxed: the monitor only compares
    /// values), monitor loads.
    std::atomic<std::uint64_t> beat{0};
    /// The handle the worker resumed last (owner stores, relaxed; readers only compare it with
    /// the dump records' frames, never follow it).
    std::atomic<void*> running{nullptr};
    /// The stop generation (runtime_core::stop_gen) this worker stopped for last. release:
    /// publishes the worker's writes (to frames, queues) to the dumper's acquire.
    std::atomic<std::uint64_t> stopped_gen{0};
    /// Where the stall detector's signal handler writes this worker's native stack. The
    /// monitor numbers each request; the handler answers a request once (a signal that comes
    /// late, after its request timed out, answers the next one instead), so frames are never
    /// written while the monitor reads the answer to the current request.
    struct stack_capture {
        static constexpr int max_depth = 64;
        void* frames[max_depth] = {};
        int depth = 0;  // written by the handler before `answered`
        /// The monitor's latest request (it stores before the signal; the handler loads).
        std::atomic<std::uint64_t> requested{0};
        /// The request whose stack is in frames: release by the handler publishes frames and
        /// depth to the monitor's acquire.
        std::atomic<std::uint64_t> answered{0};
    };
    stack_capture capture;
    [[nodiscard]] auto native_handle() noexcept -> std::thread::native_handle_type {
        return thread_.native_handle();
    }
    /// The tasks spawned on this worker (worker_base::registry).
    task_registry tasks;
    /// Owner: stops here while a dump is being taken (runtime_core::stop_gen is odd).
    void stop_for_dump() noexcept;
    /// Owner, where it waits: the heartbeat goes even (not inside a task).
    void beat_idle() noexcept;
    /// While this worker is stopped for a dump (or is the dumper): calls f(handle address) on
    /// everything queued on it (LIFO slot, deque, inbox).
    template <typename F>
    void for_each_queued(F&& f) {
        if (void* l = lifo_.load(std::memory_order_relaxed)) {
            f(l);
        }
        deque_.for_each_quiescent([&](void* e) { f(untag(e)); });
        std::lock_guard lock(inbox_mu_);
        for (void* h : inbox_) {
            f(h);
        }
    }

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
    /// next_task's look past the LIFO stream (a fairness tick, or the pick after a yield):
    /// timers, IO, posted and injected work, the LIFO slot after a yield, the deque's oldest
    /// task; nullptr if none of them has one. Out of line, so that the common pick (pop) keeps
    /// no stack frame for it.
    [[gnu::noinline]] auto fair_pick(bool tick) -> void*;
    /// runtime_options::seed: gathers everything runnable into ready_ and takes one at random.
    auto next_seeded() -> void*;
    auto find_work() -> void*;
    auto become_searching() noexcept -> bool;
    auto steal_once() -> void*;
    /// May this worker steal from `victim` now? (Its oldest entry is not a freshly displaced
    /// task, or has been one for long enough.)
    auto settled(const sched_worker& victim) noexcept -> bool;
    auto take_injected() -> void*;
    void park();

    auto take_inbox() -> void*;
    /// Owner, when it picked `next` to run: calls a helper if a push it deferred (on_push, IO
    /// home) is still queued behind `next`.
    void settle_deferred(void* next) noexcept;
    /// While there is an IO home: how long a parked worker sleeps at most before it looks at
    /// the queues again (nullopt: no limit).
    [[nodiscard]] auto home_watch_timeout() noexcept -> std::optional<std::int64_t>;
    /// consolidate_io: ends the load window if it is load_window old (publishes it in
    /// last_window, reviews the IO home) and starts the next. Owner only.
    void note_load() noexcept;
    /// This thread's CPU time plus its run-queue wait so far, in ns (CPU time alone where
    /// schedstat cannot be read). Owner only.
    auto wanted_cpu_ns() noexcept -> std::int64_t;
    /// The times this thread blocked so far (its voluntary context switches). Owner only.
    static auto voluntary_switches() noexcept -> std::uint64_t;

    runtime_core& rt_;
    unsigned index_;
    std::mutex inbox_mu_;
    std::vector<void*> inbox_;                 // guarded by inbox_mu_: tasks posted to this worker
    std::vector<void*> inbox_taken_;           // owner only: the last inbox taken, kept for reuse
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
    // The current load window (note_load): when it started, and the time this thread wanted a
    // CPU and the times it had blocked then.
    std::chrono::steady_clock::time_point window_start_{};
    std::int64_t window_cpu_start_ns_ = 0;  // wanted_cpu_ns() then
    int schedstat_fd_ =
        -2;  // this thread's schedstat; -2: not opened yet, -1: none (closed at exit)
    std::uint64_t window_blocks_start_ = 0;  // voluntary_switches() then
    io_home_streak streak_;
    // Pushes since the last pick whose wake-up on_push deferred (IO home), and the newest of
    // them (untagged).
    unsigned deferred_ = 0;
    void* deferred_task_ = nullptr;
    // A helper's next watch timeout (home_watch_timeout), in ns: doubles after each watch that
    // found the home not deferring, back to the least when it found it deferring.
    std::int64_t watch_ns_ = 0;
    bool watched_ = false;  // the last park was a watch that found the home not deferring
    // runtime_options::seed: the tasks gathered for a seeded pick, and the generator's state.
    // Empty whenever the worker parks (a pick is made while it holds any).
    const bool seeded_;
    std::uint64_t seed_state_ = 0;
    std::vector<void*> ready_;
};

}  // namespace weft::detail
