#include "runtime_core.hpp"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <exception>
#include <limits>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#include "weft/sched/cpu_count.hpp"
#include "weft/sched/detail/deadline_after.hpp"
#include "weft/sched/detail/default_driver.hpp"

namespace weft::detail {

namespace {
auto with_driver(runtime_options o) -> runtime_options {
    if (!o.make_driver) {
        o.make_driver = default_driver_factory();
    }
    return o;
}
}  // namespace

runtime_core::runtime_core(runtime_options o)
    : opts(with_driver(std::move(o))),
      planned_workers(opts.seed           ? 1U
                      : opts.workers != 0 ? opts.workers
                                          : available_cpus()),
      blocking(opts.max_blocking_threads == 0 ? 1 : opts.max_blocking_threads),
      gathers_io(opts.consolidate_io && opts.stealing && planned_workers > 1 &&
                 static_cast<bool>(opts.make_driver)),
      clock_(opts.clock.get()),
      epoch_(now()) {
    const unsigned n = planned_workers;
    workers.reserve(n);
    for (unsigned i = 0; i < n; ++i) {
        workers.push_back(std::make_unique<sched_worker>(*this, i));
    }
    idle.reserve(n);
    // Room for every worker to overflow a full deque into it at once (sched_worker::overflow
    // moves half of one), so the runtime's own traffic rarely grows it.
    injector_.resize(std::bit_ceil(static_cast<std::size_t>(n) * (work_deque::capacity / 2)));
}

runtime_core::~runtime_core() = default;

void runtime_core::start() {
    for (auto& w : workers) {
        w->start();
    }
    // Wait until every worker has set up its driver (a reactor creates its ring or epoll there):
    // a failure is the constructor's, not a crash on a worker thread later.
    std::unique_lock lock(start_mu_);
    start_cv_.wait(lock, [&] { return started_ == workers.size(); });
    if (start_error_) {
        lock.unlock();
        terminate.store(true, std::memory_order_seq_cst);
        for (auto& w : workers) {
            w->unpark();
        }
        for (auto& w : workers) {
            w->join();
        }
        std::rethrow_exception(start_error_);
    }
}

void runtime_core::worker_started(std::exception_ptr error) {
    {
        std::lock_guard lock(start_mu_);
        if (error && !start_error_) {
            start_error_ = std::move(error);
        }
        ++started_;
    }
    start_cv_.notify_all();
}

auto runtime_core::quiescent() const noexcept -> bool {
    // A snapshot that cannot miss a task on its way to a queue:
    // - every worker parked, and none left its park while we looked (the unpark count is the
    //   same at the end): a parked worker runs nothing, so nothing it runs can start work;
    // - counters of work on its way (blocking jobs, armed timers, IO in flight) before the
    //   queues it ends in: whoever completes such work queues the task first and lowers the
    //   count after (seq_cst RMW), so a count read as lowered shows the task in its queue.
    const std::uint64_t unparks_before = unparks.load(std::memory_order_seq_cst);
    if (idle_count.load(std::memory_order_seq_cst) != workers.size()) {
        return false;
    }
    if (blocking.in_flight() != 0) {
        return false;
    }
    for (const auto& w : workers) {
        if (w->timers().pending.load(std::memory_order_seq_cst) != 0 || w->io_pending() != 0) {
            return false;
        }
    }
    if (!injector_empty()) {
        return false;
    }
    for (const auto& w : workers) {
        if (w->queued() != 0 || !w->inbox_empty()) {
            return false;
        }
    }
    return unparks.load(std::memory_order_seq_cst) == unparks_before;
}

void runtime_core::shutdown() {
    shutting_down.store(true, std::memory_order_seq_cst);
    root.request_stop();  // cancellation callbacks queue every cancelled waiter
    const auto deadline = opts.shutdown_timeout
                              ? std::optional(deadline_after(*opts.shutdown_timeout))
                              : std::nullopt;
    bool quiet = false;
    {
        std::unique_lock lock(quiet_mu);
        // Workers notify quiet_cv each time one parks while shutting down; the timeout only
        // guards against a notification racing the predicate check (it does not drive work).
        while (!(quiet = quiescent()) &&
               (!deadline || std::chrono::steady_clock::now() < *deadline)) {
            quiet_cv.wait_for(lock, std::chrono::milliseconds(50));
        }
    }
    if (!quiet) {
        const std::size_t calls = blocking.abandon();
        std::fprintf(stderr,
                     "weft: runtime shutdown_timeout (%lld ms) passed: %zu blocking call(s) "
                     "still running are left to finish on detached threads; tasks still "
                     "waiting or queued are never resumed\n",
                     static_cast<long long>(opts.shutdown_timeout->count()), calls);
    }
    terminate.store(true, std::memory_order_seq_cst);
    for (auto& w : workers) {
        w->unpark();
    }
    for (auto& w : workers) {
        w->join();
    }
    blocking.stop_threads();
}

void runtime_core::inject(void* h) { inject_batch(&h, 1); }

void runtime_core::inject_batch(void* const* hs, std::size_t n) {
    {
        std::lock_guard lock(inject_mu_);
        const std::size_t count = injected_.load(std::memory_order_relaxed);
        if (count + n > injector_.size()) {
            grow_injector(count + n);
        }
        const std::size_t mask = injector_.size() - 1;
        for (std::size_t i = 0; i < n; ++i) {
            injector_[(inject_head_ + count + i) & mask] = hs[i];
        }
        injected_.store(count + n, std::memory_order_seq_cst);
    }
    notify_parked();
}

void runtime_core::grow_injector(std::size_t needed) noexcept {
    std::vector<void*> bigger;
    try {
        bigger.resize(std::bit_ceil(needed));
    } catch (const std::bad_alloc&) {
        out_of_memory_queuing("the injector");
    }
    const std::size_t count = injected_.load(std::memory_order_relaxed);
    const std::size_t mask = injector_.size() - 1;
    for (std::size_t i = 0; i < count; ++i) {
        bigger[i] = injector_[(inject_head_ + i) & mask];
    }
    injector_.swap(bigger);
    inject_head_ = 0;
}

void out_of_memory_queuing(const char* queue) noexcept {
    std::fprintf(stderr, "weft: out of memory queuing a runnable task (%s)\n", queue);
    std::terminate();
}

auto runtime_core::take_injected(void** out, std::size_t max) -> std::size_t {
    if (injected_.load(std::memory_order_relaxed) == 0) {
        return 0;
    }
    std::lock_guard lock(inject_mu_);
    const std::size_t count = injected_.load(std::memory_order_relaxed);
    // Take a fair share, so one worker does not drain a burst the others could share.
    std::size_t n = std::min(max, count / workers.size() + 1);
    n = std::min(n, count);
    const std::size_t mask = injector_.size() - 1;
    for (std::size_t i = 0; i < n; ++i) {
        out[i] = injector_[(inject_head_ + i) & mask];
    }
    inject_head_ = (inject_head_ + n) & mask;
    injected_.store(count - n, std::memory_order_seq_cst);
    return n;
}

auto runtime_core::notify_parked() noexcept -> bool {
    // seq_cst: orders the caller's publication of work before these loads (see the class
    // comment; the matching store is the parker's idle_count increment).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (searching.load(std::memory_order_seq_cst) != 0 ||
        idle_count.load(std::memory_order_seq_cst) == 0) {
        return false;
    }
    sched_worker* w = nullptr;
    {
        std::lock_guard lock(idle_mu);
        if (idle.empty() || searching.load(std::memory_order_relaxed) != 0) {
            return false;
        }
        w = idle.back();
        idle.pop_back();
        w->in_idle_list = false;
        idle_count.fetch_sub(1, std::memory_order_seq_cst);
        unparks.fetch_add(1, std::memory_order_seq_cst);
        // The woken worker starts out searching, so that further submissions do not wake more
        // workers until it found work or gave up.
        w->searching = true;
        searching.fetch_add(1, std::memory_order_seq_cst);
    }
    w->unpark();
    return true;
}

auto runtime_core::has_work_for(const sched_worker& self, bool may_steal) const noexcept -> bool {
    if (!injector_empty() || self.stealable_size_seq_cst() != 0) {  // (own LIFO slot: empty)
        return true;
    }
    if (may_steal) {
        for (const auto& w : workers) {
            if (w->stealable_size_seq_cst() != 0) {
                return true;
            }
        }
    }
    return false;
}

auto runtime_core::now_ms() const noexcept -> std::uint64_t {
    const auto d = now() - epoch_;
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

auto runtime_core::to_ms_ceil(std::chrono::steady_clock::time_point t) const noexcept
    -> std::uint64_t {
    if (t <= epoch_) {
        return 0;
    }
    return static_cast<std::uint64_t>(
        std::chrono::ceil<std::chrono::milliseconds>(t - epoch_).count());
}

auto runtime_core::ms_to_ns_from_now(std::uint64_t when_ms) const noexcept -> std::int64_t {
    const auto target = epoch_ + std::chrono::milliseconds(when_ms);
    const auto d = target - now();
    return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

auto runtime_core::step_clock(sched_worker& self) -> clock_step {
    std::lock_guard step(step_mu_);
    // Idle: every worker on the idle list (self included), nothing injected and no blocking
    // call that could still queue work (the caller polled its reactor and found nothing; the
    // other workers' reactors are not polled, so a runtime with a manual clock and IO should
    // have one worker, as weft::testing's runtimes do).
    if (idle_count.load(std::memory_order_seq_cst) != workers.size() || !injector_empty()) {
        return clock_step::none;
    }
    if (blocking.in_flight() != 0) {
        // Its thread queues the task, then lowers the count: a wake-up can come before the
        // count drops, and none comes after it.
        return clock_step::blocked;
    }
    std::optional<std::uint64_t> next;
    for (auto& w : workers) {
        std::lock_guard lock(w->timers().mu);
        if (auto d = w->timers().wheel.next_deadline(); d && (!next || *d < *next)) {
            next = d;
        }
    }
    if (!next) {
        return clock_step::none;
    }
    if (*next > now_ms()) {
        if (*next > to_ms_ceil(clock_->limit())) {
            return clock_step::none;  // paused: only advance() opens time up to its target
        }
        clock_->move_to(epoch_ + std::chrono::milliseconds(*next));
    }
    for (auto& w : workers) {
        if (w.get() != &self) {
            w->unpark();  // its wheel may hold timers due now
        }
    }
    return clock_step::due;
}

auto runtime_core::next_io_home(int home, const std::vector<window_load>& w) noexcept -> int {
    if (home >= 0) {
        const window_load& h = w[static_cast<std::size_t>(home)];
        return h.saturated >= spread_windows ? -1 : home;
    }
    unsigned total = 0;
    int busiest = 0;
    for (std::size_t i = 0; i < w.size(); ++i) {
        if (w[i].sleeps == 0) {
            return -1;  // this one never ran out of work
        }
        total += w[i].busy_permille;
        if (w[i].busy_permille > w[static_cast<std::size_t>(busiest)].busy_permille) {
            busiest = static_cast<int>(i);
        }
    }
    return total <= 1000 ? busiest : -1;
}

void runtime_core::review_io_home() noexcept {
    if (io_home_forced.load(std::memory_order_relaxed)) {
        return;
    }
    const io_home cur = read_io_home();
    const std::int64_t since = io_home_changed_ms.load(std::memory_order_relaxed);
    const auto held =
        std::chrono::milliseconds(since < 0 ? std::numeric_limits<std::int64_t>::max()
                                            : static_cast<std::int64_t>(now_ms()) - since);
    if (held < (cur.worker >= 0 ? hold_home : hold_spread)) {
        return;
    }
    std::vector<window_load> w(workers.size());
    for (std::size_t i = 0; i < workers.size(); ++i) {
        w[i] = unpack(workers[i]->last_window.load(std::memory_order_relaxed));
    }
    const int next = next_io_home(cur.worker, w);
    if (next == cur.worker) {
        return;
    }
    std::uint64_t word = io_home_word.load(std::memory_order_relaxed);
    const std::uint64_t to = (((word >> 32) + 1) << 32) | static_cast<std::uint32_t>(next + 1);
    // One reviewer wins; a loser's view was stale, and it reviews again at its next window.
    if (static_cast<std::uint32_t>(word) == static_cast<std::uint32_t>(cur.worker + 1) &&
        io_home_word.compare_exchange_strong(word, to, std::memory_order_relaxed)) {
        io_home_changed_ms.store(static_cast<std::int64_t>(now_ms()), std::memory_order_relaxed);
        io_home_changes.fetch_add(1, std::memory_order_relaxed);
        if (next >= 0) {
            wake_to_watch();
        }
    }
}

void runtime_core::set_io_home(int worker, bool forced) noexcept {
    if (forced) {
        io_home_forced.store(true, std::memory_order_relaxed);
    }
    std::uint64_t word = io_home_word.load(std::memory_order_relaxed);
    std::uint64_t to = 0;
    do {
        to = (((word >> 32) + 1) << 32) | static_cast<std::uint32_t>(worker + 1);
    } while (!io_home_word.compare_exchange_weak(word, to, std::memory_order_relaxed));
    io_home_changed_ms.store(static_cast<std::int64_t>(now_ms()), std::memory_order_relaxed);
    io_home_changes.fetch_add(1, std::memory_order_relaxed);
    if (worker >= 0) {
        wake_to_watch();
    }
}

void runtime_core::wake_to_watch() noexcept {
    // A worker parked while there was no home sleeps with no watch timeout (nothing deferred
    // its wake-ups then); from now on the home's pushes defer theirs (sched_worker::on_push).
    // Each worker is woken once, to park again watching. The home was stored before these
    // unparks: a worker whose park computed its timeout from the old home either finds the
    // wake-up pending before it blocks or is kicked out of the block (the driver's sleep
    // protocol), never sleeps through it.
    for (auto& w : workers) {
        w->unpark();
    }
}

auto runtime_core::read_io_home() const noexcept -> io_home {
    if (!gathers_io) {
        return {};
    }
    const std::uint64_t word = io_home_word.load(std::memory_order_relaxed);
    return {.enabled = true,
            .worker = static_cast<int>(static_cast<std::uint32_t>(word)) - 1,
            .epoch = static_cast<std::uint32_t>(word >> 32),
            .workers = static_cast<unsigned>(workers.size())};
}

auto current_io_home() noexcept -> io_home {
    sched_worker* w = tl_sched_worker;
    return w == nullptr ? io_home{} : w->runtime().read_io_home();
}

auto current_worker_is_io_home() noexcept -> bool {
    sched_worker* w = tl_sched_worker;
    return w != nullptr && w->runtime().gathers_io &&
           w->runtime().read_io_home().worker == static_cast<int>(w->index());
}

auto current_worker_index() noexcept -> unsigned {
    sched_worker* w = tl_sched_worker;
    return w == nullptr ? 0 : w->index();
}

void post_to_worker(unsigned index, std::coroutine_handle<> h) {
    tl_sched_worker->runtime().workers.at(index)->post(h);
}

void force_io_home_for_test(int worker) {
    runtime_core& rt = tl_sched_worker->runtime();
    if (worker >= static_cast<int>(rt.workers.size())) {
        throw std::out_of_range("weft: force_io_home_for_test: no such worker");
    }
    rt.set_io_home(worker, true);
}

auto io_home_changes() noexcept -> std::uint64_t {
    sched_worker* w = tl_sched_worker;
    return w == nullptr ? 0 : w->runtime().io_home_changes.load(std::memory_order_relaxed);
}

void runtime_schedule(runtime_core& rt, std::coroutine_handle<> h) {
    sched_worker* w = tl_sched_worker;
    if (w != nullptr && &w->runtime() == &rt) {
        w->push(h);
    } else {
        rt.inject(h.address());
    }
}

}  // namespace weft::detail
