#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <source_location>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "weft/core/join_handle.hpp"
#include "weft/core/stop.hpp"
#include "weft/core/task.hpp"
#include "weft/sched/detail/context.hpp"
#include "weft/sched/driver.hpp"
#include "weft/sched/runtime_clock.hpp"
#include "weft/sched/task_dump.hpp"

namespace weft {

struct runtime_options {
    /// Worker threads; 0 means one per CPU this process may use (weft::available_cpus(): the
    /// affinity mask, capped by the cgroup's CPU quota).
    unsigned workers = 0;
    /// false: thread-per-core mode. Workers never steal; each runs what was queued on it.
    bool stealing = true;
    /// Upper bound on the threads of the blocking pool (spawn_blocking); they start on demand
    /// and stay until the runtime ends.
    unsigned max_blocking_threads = 64;
    /// How worker `i` sleeps when idle. Empty (the default): in a program that links weft::io,
    /// a reactor per worker (io_uring when the kernel allows it, else epoll; WEFT_IO_BACKEND
    /// forces one), so sockets, files and signals work with no set-up; in a program of
    /// weft::sched alone, a futex. A runtime without reactors is the opt-out:
    /// `.make_driver = [](unsigned) { return weft::make_futex_driver(); }` (IO on it throws
    /// std::logic_error). weft::io_runtime_options() names an IO backend.
    std::function<std::unique_ptr<park_driver>(unsigned worker)> make_driver = {};
    /// Called on the worker where a detached task (its join_handle dropped) ended with an
    /// exception; it must not throw. Default (empty): print "weft: a detached task failed:
    /// <what()>" to stderr. A failure is never dropped silently.
    std::function<void(std::exception_ptr)> on_detached_failure = {};
    /// How long the destructor waits, after requesting stop on every task, for them to finish.
    /// Empty (the default): as long as it takes. Past it, what is still running is reported on
    /// stderr and left behind: threads inside a spawn_blocking call are detached (they finish
    /// the call and exit; the tasks waiting for them are never resumed nor freed), and tasks
    /// that ignored their cancellation are never resumed again.
    std::optional<std::chrono::milliseconds> shutdown_timeout = {};
    /// Gather IO on one worker while the load fits one (weft::io on io_uring): when the workers
    /// together are busy less than one CPU, every stream's multishot receive is moved to the
    /// ring of the busiest worker, so the others sleep with no IO of their own and are woken
    /// only for injected or spawned work; when it saturates, the receives spread again to the
    /// workers their readers run on. Each move costs one cancel and re-arm per stream per
    /// change of load, never one per sleep (see src/sched/runtime_core.hpp, "IO home"). Applies
    /// to runtimes with stealing, at least 2 workers and a make_driver (given, or the reactors
    /// a program with weft::io gets by default); on epoll nothing moves (readiness waits stay
    /// where they are), only the home's choice and its quieter fairness tick apply. On by
    /// default: it keeps the echo server's p99 at or below tokio's (docs/design/decisions.md).
    bool consolidate_io = true;
    /// Where the runtime reads its time. Empty (the default): steady_clock. A manual_clock
    /// (weft::testing's test clock) makes every timer on this runtime follow it: time stands
    /// still while tasks run and jumps to the next deadline when all of them are idle. Checked
    /// as one pointer where time is read; the default path makes no virtual call.
    std::shared_ptr<manual_clock> clock = {};
    /// Deterministic scheduling (weft::testing's seeded runtime): one worker (`workers` is
    /// taken as 1) that picks the next task to run at random among everything runnable, with a
    /// generator seeded by this value, so a seed names one interleaving and replays it. Empty
    /// (the default): the ordinary scheduler.
    std::optional<std::uint64_t> seed = {};
    /// The stall detector: a worker that stays inside one task (has not come back to its
    /// scheduler loop) for longer than this is reported once per stall (on_stall) and counted
    /// (worker_metrics::stalls). A monitor thread samples each worker's heartbeat every half
    /// threshold; the workers' cost is two relaxed stores per task they run. Empty: off.
    std::optional<std::chrono::milliseconds> stall_threshold = std::chrono::milliseconds{100};
    /// Called on the monitor thread for each stall; must not throw. Default (empty): the
    /// report's to_string() on stderr (the task, its spawn site, the worker's native stack).
    std::function<void(const stall_report&)> on_stall = {};
    /// A signal on which this runtime prints dump() to stderr (SIGUSR1, say). The handler only
    /// counts the signal; the monitor thread takes and prints the dump within half a stall
    /// threshold (or 50 ms). The handler is the process's for that signal from then on (the
    /// previous one is not restored). 0 (the default): none.
    int dump_signal = 0;
    /// Whether spawned tasks are recorded for dump(). On: every task spawned on this runtime
    /// gets a record (id, name, site, what it waits on), and dump() lists each live task with
    /// its state and chain; the stall detector names the stalled task. Off (the default): a
    /// spawn keeps only its site in the task's frame, and dump() lists no tasks (only the
    /// workers that did not stop); a stall report has the native stack but no task.
    /// docs/design/decisions.md has the cost of each setting.
    bool task_records = false;
};

/// What a worker has done so far (see runtime::worker_metrics).
struct worker_metrics {
    /// Times the worker ran out of tasks and went to park.
    std::uint64_t park_attempts = 0;
    /// Of those, the times it actually slept in its driver (the rest found work to do first).
    std::uint64_t sleeps = 0;
    /// Times the worker woke a parked worker for work it queued (a push, a spawn, a batch of
    /// completions; the wake-ups of injected work and of the last searcher are not counted).
    std::uint64_t wakes = 0;
    /// Pushes on the IO home (runtime_options::consolidate_io) that woke nobody at once because
    /// the home was expected to run them next; wakes counts the times it called a helper later.
    std::uint64_t deferred_wakes = 0;
    /// Stalls the stall detector reported on this worker (runtime_options::stall_threshold).
    std::uint64_t stalls = 0;
    /// Tasks queued on the worker now (its deque and LIFO slot; a moment's reading).
    std::uint64_t queued = 0;
    /// Timers armed on the worker and not yet fired or cancelled (a moment's reading).
    std::uint64_t timers = 0;
};

/// The runtime as a whole, read at one moment (each field on its own, not as a snapshot).
struct runtime_metrics {
    unsigned workers = 0;
    /// Workers parked (asleep or about to sleep) with nothing to run.
    unsigned parked = 0;
    /// Workers looking for work to steal.
    unsigned searching = 0;
    /// Tasks queued from outside the workers, not yet taken by one.
    std::uint64_t injected = 0;
    /// Threads of the blocking pool (spawn_blocking), and of those the ones inside a call.
    unsigned blocking_threads = 0;
    unsigned blocking_busy = 0;
    /// Blocking calls queued or running.
    std::uint64_t blocking_in_flight = 0;
};

/// The M:N scheduler: N worker threads, each with a bounded work-stealing deque, a timer wheel
/// and a park driver; a global injector for work from other threads; a bounded pool for
/// blocking calls.
///
/// `block_on` and `spawn` may be called from any thread (block_on not from a worker: it would
/// wait on the thread that has to do the work). The destructor requests stop on every task it
/// runs (sleeps, waits and IO end with operation_canceled), waits until all of them have
/// finished and nothing is left to do (or runtime_options::shutdown_timeout has passed), then
/// joins the workers.
///
///     weft::runtime rt{{.workers = 2}};
///     int v = rt.block_on(compute());
class runtime {
public:
    explicit runtime(runtime_options opts = {});
    runtime(const runtime&) = delete;
    auto operator=(const runtime&) -> runtime& = delete;
    ~runtime();

    /// Runs `t` on the workers and blocks the calling thread until it finishes; returns its
    /// value or rethrows its exception. dump() names it "block_on", spawned at `site`.
    template <typename T>
    auto block_on(task<T> t, std::source_location site = std::source_location::current()) -> T;

    /// Queues `t` on the runtime; it is cancelled at shutdown like every other task. `site`
    /// (the caller's) and `name` are what dump() shows of it.
    template <typename T>
    auto spawn(task_name name,
               task<T> t,
               std::source_location site = std::source_location::current()) -> join_handle<T>;
    template <typename T>
    auto spawn(task<T> t, std::source_location site = std::source_location::current())
        -> join_handle<T> {
        return spawn(task_name{}, std::move(t), site);
    }
    /// `rt.spawn([&]() -> weft::task<T> {...})`: the lambda is kept alive with its task.
    template <detail::task_factory Fn>
    auto spawn(Fn fn, std::source_location site = std::source_location::current()) {
        return spawn(task_name{}, detail::call_holding(std::move(fn)), site);
    }
    template <detail::task_factory Fn>
    auto spawn(task_name name, Fn fn, std::source_location site = std::source_location::current()) {
        return spawn(name, detail::call_holding(std::move(fn)), site);
    }

    /// Every live task of this runtime: id, name, spawn site, state, what it waits on and its
    /// chain of awaiting coroutines (see task_dump). Any thread, also a task on a worker (an
    /// admin route): the workers stop in their loops while it is taken (see task_dump for a
    /// worker that does not). Costs the running program nothing until it is asked for.
    [[nodiscard]] auto dump() -> task_dump;

    [[nodiscard]] auto worker_count() const noexcept -> unsigned;
    /// Counters of worker `i` (any thread; each counter is read on its own, not as a snapshot).
    [[nodiscard]] auto worker_metrics(unsigned i) const -> worker_metrics;
    /// The runtime's gauges now (any thread; takes the blocking pool's lock once).
    [[nodiscard]] auto metrics() const -> runtime_metrics;
    /// The root cancellation of every task on this runtime.
    [[nodiscard]] auto stop() noexcept -> stop_state&;

private:
    void inject(std::coroutine_handle<> h);
    /// Gives a task spawned through this runtime its site and dump record.
    void record(detail::promise_base& p, void* frame, std::source_location site, const char* name);
    [[noreturn]] static void block_on_from_worker();

    std::unique_ptr<detail::runtime_core> core_;
};

/// What a task can learn of the runtime it runs on (this_runtime()).
struct runtime_info {
    unsigned workers = 0;       ///< worker threads
    bool stealing = true;       ///< false: thread-per-core (runtime_options::stealing)
    unsigned worker_index = 0;  ///< the worker running the caller
};

/// The runtime running the calling thread, or nullopt off a runtime worker.
[[nodiscard]] auto this_runtime() noexcept -> std::optional<runtime_info>;

/// `co_await weft::switch_to_worker(i)`: continue on worker `i` of the current runtime. With
/// stealing off (thread-per-core) everything the task spawns afterwards stays on that worker.
/// Throws std::out_of_range for a bad index, std::logic_error off a runtime worker.
struct [[nodiscard]] switch_to_worker {
    unsigned index;
    auto await_ready() const noexcept -> bool { return false; }
    auto await_suspend(std::coroutine_handle<> h) const -> bool;
    void await_resume() const noexcept {}
};

namespace detail {
template <typename T>
auto block_on_root(task<T> t,
                   std::optional<std::conditional_t<std::is_void_v<T>, bool, T>>& out,
                   std::exception_ptr& error,
                   std::atomic<std::uint32_t>& done) -> task<void> {
    try {
        if constexpr (std::is_void_v<T>) {
            co_await std::move(t);
            out.emplace(true);
        } else {
            out.emplace(co_await std::move(t));
        }
    } catch (...) {
        error = std::current_exception();
    }
    // release publishes out/error to the blocked caller.
    done.store(1, std::memory_order_release);
    // NOTE: the caller may already have returned; notify_one only hands the address to the
    // kernel and does not read the object.
    done.notify_one();
}
}  // namespace detail

template <typename T>
auto runtime::block_on(task<T> t, std::source_location site) -> T {
    if (detail::tl_sched_worker != nullptr) {
        block_on_from_worker();
    }
    std::optional<std::conditional_t<std::is_void_v<T>, bool, T>> out;
    std::exception_ptr error;
    std::atomic<std::uint32_t> done{0};
    auto root = detail::block_on_root(std::move(t), out, error, done);
    detail::set_stop(root, &stop());
    auto h = root.release();
    h.promise().mode_ = detail::task_mode::spawned;
    h.promise().join_.store(detail::join_detached, std::memory_order_relaxed);  // frees itself
    record(h.promise(), h.address(), site, "block_on");
    inject(h);
    while (done.load(std::memory_order_acquire) == 0) {
        done.wait(0, std::memory_order_acquire);
    }
    if (error) {
        std::rethrow_exception(error);
    }
    if constexpr (!std::is_void_v<T>) {
        return std::move(*out);
    }
}

template <typename T>
auto runtime::spawn(task_name name, task<T> t, std::source_location site) -> join_handle<T> {
    auto h = t.release();
    auto& p = h.promise();
    p.stop_ = &stop();
    p.mode_ = detail::task_mode::spawned;
    record(p, h.address(), site, name.value);
    inject(h);
    return join_handle<T>{h};
}

}  // namespace weft
