#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "blocking_pool.hpp"
#include "io_home_load.hpp"
#include "weft/core/detail/worker_base.hpp"
#include "weft/sched/detail/context.hpp"
#include "weft/sched/detail/io_home.hpp"
#include "weft/sched/runtime.hpp"
#include "worker.hpp"

namespace weft::detail {

/// Ends the process after a failed allocation for a queue of runnable tasks (`queue` names it).
/// The rule for every queue a wake-up goes through (the injector, a worker's inbox): the task is
/// suspended and its wake-up consumed, so it cannot be dropped (whatever waits for it would hang
/// silently) nor run by the waker (another task's thread, inside its completion), and a waker has
/// no caller to report to (schedule_remote and yield_turn are noexcept). These queues keep their
/// storage and allocate only to grow past their high-water mark, so a process that got through
/// its peak load does not reach this again. tokio and Go abort on allocation failure too.
/// Timers fire without allocating (sched_worker::fire_timers).
[[noreturn]] void out_of_memory_queuing(const char* queue) noexcept;

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
/// Local deque pushes (worker_base::notify_idle) take the same path: the bottom_ store, a
/// seq_cst fence, then idle_count, relaxed (the fence orders it; only a count seen above 0
/// goes on to notify_parked). Without that fence a push could miss a worker parking at the same
/// moment, and the pusher's owner is not always there to run the task itself: the task it runs
/// may keep its thread until the pushed one has run (tools/loom's parking model finds that
/// deadlock when the fence is left out).
/// A task in another worker's LIFO slot is not work for a parker: only its owner may run it,
/// and the owner is awake (it put it there).
/// - At most half the workers search (steal) at once; the last searcher to find work wakes
///   another parked worker, so a burst fans out one worker at a time.
/// - While there is an IO home, a local push onto a queue of at most 16 defers its wake-up to
///   the pusher's next pick (sched_worker::on_push, settle_deferred), and parked workers sleep
///   with a watch timeout (home_watch_timeout) that reaches a pusher stuck before its pick.
///   Choosing a home wakes every worker (wake_to_watch): one that parked while there was none
///   sleeps with no watch timeout until then.
///   The deferral is the pusher's choice, not a lost wake-up: the pushed task is on its deque,
///   where the pusher (awake) or a watching worker finds it.
///
/// IO home (runtime_options::consolidate_io). Each worker parks in its own io_uring ring, and a
/// stream's multishot receive is armed on one ring, whose worker wakes for its completions. With
/// two workers and a load that fits one, each ring holds half the streams and each worker sleeps
/// and wakes for its own half (echo, 100 connections, 2 s: 14,900-62,500 sleeps against
/// 4,200-6,200 with one worker), and every wake-up takes a CPU from someone (the client sharing
/// the machine). So while the load fits one worker, the receives gather on one worker's ring
/// (the home) and the others sleep with no IO of their own, woken only when the home calls for
/// help (a batch of completions, the fairness tick); thieves still take its tasks, and a stolen
/// reader leaves its receive at home. The state is one word, `io_home_word`:
///   (epoch << 32) | (home + 1), home = -1 (none) or a worker index; epoch counts the changes.
/// Every worker measures its load over windows of load_window (window_load: the time its
/// thread wanted a CPU, i.e. ran or waited in the run queue, and how often it slept, i.e.
/// blocked: a park whose wait returns at once because completions were already there is no
/// sleep) and, at the end of each, reviews the home (review_io_home):
/// - no home, and the workers together wanted at most one CPU and each slept at least once
///   (nobody saturated): home = the busiest worker;
/// - a home that wanted a CPU for >= spread_busy_permille of each of its last spread_windows
///   windows and slept at most spread_sleeps times in them (it hardly ever ran out of work: its
///   queue stays long and others steal from it): no home. Windows without a sleep are not
///   enough: a home that serves a client which keeps it fed goes a few windows without
///   sleeping now and then (echo, or hello at 100 connections, which sleeps 4 times a window).
/// Hysteresis, so that a stream moves once per change of load, never per sleep: the two rules
/// do not overlap (a home that sleeps often stays; spreading needs spread_windows windows with
/// at most spread_sleeps sleeps in all),
/// a home is kept for at least hold_home, and after spreading none is chosen for hold_spread.
/// A receive moves at its reader's next wait with nothing queued (src/io/recv_queue.cpp): with a
/// home, to the home's ring; with none, one gathered under an earlier epoch moves once to the
/// ring of the worker its reader runs on (the thieves take a share of the streams back).
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
    /// Tasks in the injector now (relaxed: a reading for runtime::metrics).
    [[nodiscard]] auto injected() const noexcept -> std::size_t {
        return injected_.load(std::memory_order_relaxed);
    }
    [[nodiscard]] auto injector_empty() const noexcept -> bool {
        return injected_.load(std::memory_order_seq_cst) == 0;
    }

    /// Wakes one parked worker if nobody searches; true if it woke one.
    auto notify_parked() noexcept -> bool;
    /// Is there work `self` could run: the injector, its own queue, and (may_steal) any other
    /// worker's deque (not its LIFO slot: thieves may not take that)? seq_cst loads: see the
    /// parking protocol above.
    [[nodiscard]] auto has_work_for(const sched_worker& self, bool may_steal) const noexcept
        -> bool;

    /// The runtime's time: opts.clock when set, steady_clock otherwise.
    [[nodiscard]] auto now() const noexcept -> std::chrono::steady_clock::time_point {
        return clock_ != nullptr ? clock_->now() : std::chrono::steady_clock::now();
    }
    [[nodiscard]] auto manual() const noexcept -> manual_clock* { return clock_; }
    /// What step_clock did.
    enum class clock_step : unsigned char {
        due,      ///< a timer is due now: the caller returns from park and fires it
        blocked,  ///< a spawn_blocking call is in flight: look again soon (see park)
        none,     ///< nothing to step to, or others still run: sleep until woken
    };
    /// With a manual clock, called by `self` when it is about to sleep in park: if every worker
    /// is parked and nothing else can make progress (no injected task, no blocking call), moves
    /// the clock to the earliest armed timer of any worker (within the clock's limit) and
    /// wakes the workers.
    auto step_clock(sched_worker& self) -> clock_step;
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

    // ---- IO home (see the class comment) ----
    /// runtime_options::consolidate_io, with stealing, at least 2 workers and a driver of the
    /// runtime's own (a reactor: a futex-parked runtime has no IO to gather).
    const bool gathers_io;
    static constexpr std::chrono::milliseconds load_window{10};
    static constexpr unsigned spread_busy_permille = io_home_spread_busy_permille;
    static constexpr unsigned spread_windows = io_home_spread_windows;
    static constexpr unsigned spread_sleeps = io_home_spread_sleeps;
    static constexpr std::chrono::milliseconds hold_home{200};
    static constexpr std::chrono::milliseconds hold_spread{1000};
    using window_load = io_home_window;
    using load_streak = io_home_streak;
    /// window_load packed in one word (sched_worker::last_window): busy_permille in bits 48-63,
    /// saturated in 32-47, sleeps in 0-31.
    [[nodiscard]] static auto pack(window_load w) noexcept -> std::uint64_t {
        return (static_cast<std::uint64_t>(w.busy_permille) << 48) |
               (static_cast<std::uint64_t>(std::min(w.saturated, 0xffffU)) << 32) | w.sleeps;
    }
    [[nodiscard]] static auto unpack(std::uint64_t v) noexcept -> window_load {
        return {.busy_permille = static_cast<unsigned>(v >> 48),
                .sleeps = static_cast<unsigned>(v & 0xffffffffU),
                .saturated = static_cast<unsigned>((v >> 32) & 0xffffU)};
    }
    /// The home after `home` given every worker's last window (-1: none). Pure: the rules of the
    /// class comment, without the hold times.
    [[nodiscard]] static auto next_io_home(int home, const std::vector<window_load>& w) noexcept
        -> int;
    /// Any worker, at the end of its window: applies next_io_home to the published windows
    /// (unless forced or held), and changes the home (one CAS) when it says so.
    void review_io_home() noexcept;
    /// Changes the home to `worker` (-1: none) and bumps the epoch; forced: for good.
    void set_io_home(int worker, bool forced) noexcept;
    /// A home was chosen: wakes every worker, so that each parks again with its watch timeout
    /// (sched_worker::home_watch_timeout).
    void wake_to_watch() noexcept;
    [[nodiscard]] auto read_io_home() const noexcept -> io_home;
    // (epoch << 32) | (home + 1). Relaxed everywhere: it only steers where receives are armed,
    // and any value is safe to act on (a move to a worker that is no longer home is moved again
    // at a later wait).
    std::atomic<std::uint64_t> io_home_word{0};
    std::atomic<std::int64_t> io_home_changed_ms{-1};  // now_ms() at the last change; -1: never
    std::atomic<bool> io_home_forced{false};
    std::atomic<std::uint64_t> io_home_changes{0};

private:
    [[nodiscard]] auto quiescent() const noexcept -> bool;
    /// Under inject_mu_: a ring of at least `needed` entries, the queued ones kept in order.
    void grow_injector(std::size_t needed) noexcept;

    std::mutex start_mu_;
    std::condition_variable start_cv_;
    std::size_t started_ = 0;         // guarded by start_mu_
    std::exception_ptr start_error_;  // guarded by start_mu_
    manual_clock* const clock_;       // opts.clock.get()
    std::mutex step_mu_;              // one clock step at a time
    std::chrono::steady_clock::time_point epoch_;
    mutable std::mutex inject_mu_;
    // The injector: a FIFO ring of task handles, guarded by inject_mu_. Its oldest entry is at
    // injector_[inject_head_], the next at (inject_head_ + 1) & (injector_.size() - 1).
    // Invariants: injector_.size() is a power of two; 0 <= injected_ <= injector_.size().
    // It never shrinks, so it allocates only to grow past its high-water mark (see inject_batch).
    std::vector<void*> injector_;
    std::size_t inject_head_ = 0;
    std::atomic<std::size_t> injected_{0};  // entries in the ring (written under inject_mu_)
};

}  // namespace weft::detail
