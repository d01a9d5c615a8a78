#include "worker.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#include "runtime_clock_tl.hpp"
#include "runtime_core.hpp"
#include "stall_monitor.hpp"

namespace weft::detail {

constinit thread_local sched_worker* tl_sched_worker = nullptr;

namespace {
// How often (in tasks run) a worker looks at the injector and its own oldest task first, so
// neither remote submissions nor old local work starve behind a LIFO stream (Go and tokio: 61).
constexpr std::uint32_t fairness_interval = 61;
// Most tasks taken from the injector or from a victim in one go.
constexpr std::size_t max_batch = 128;
// With a manual clock, a worker that goes idle while a spawn_blocking call is in flight sleeps
// this long at most (real time) before it looks at the clock again: the call's thread wakes it
// when it queues the task, but lowers the in-flight count only after that.
constexpr std::int64_t blocked_recheck_ns = 200'000;

// Before parking, a searching worker keeps looking for this many rounds (with a growing pause
// between them, ~10-20 us in all). A producer that spawns a little slower than the consumer
// drains would otherwise make the consumer park and be woken through a futex every few tasks;
// the pair of system calls costs far more than the spin. Only searching workers spin (at most
// half the workers), and an idle runtime parks after one spin: it stays at ~0% CPU.
constexpr int spin_rounds = 12;
// A worker with IO in flight looks once and parks (as tokio's workers do): its next work is
// most likely a completion, which the kernel delivers to the reactor it parks in without
// costing another worker a system call, so spinning saves nothing and takes the CPU the
// kernel's network stack needs (the figures: docs/design/decisions.md).
constexpr int io_spin_rounds = 1;
// While there is an IO home: a push wakes nobody at once while the pusher's deque holds at most
// this many tasks (it runs them next), see sched_worker::on_push.
constexpr std::int64_t home_quiet_queue = 16;
// While there is an IO home: a parked worker sleeps at most home_watch_min_ns before it looks
// at the queues again, doubling up to home_watch_max_ns while no worker holds a deferred push
// (see home_watch_timeout).
constexpr std::int64_t home_watch_min_ns = 2'000'000;
constexpr std::int64_t home_watch_max_ns = 256'000'000;
// How long a thief leaves a task its victim displaced from the LIFO slot (see settled()).
constexpr std::chrono::nanoseconds displaced_settle{3000};

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

auto xorshift(std::uint64_t& s) noexcept -> std::uint64_t {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
}
}  // namespace

sched_worker::sched_worker(runtime_core& rt, unsigned index)
    // A lone worker has nobody to steal from it: its deque then runs without fences.
    : worker_base(rt.opts.stealing && rt.planned_workers > 1, &rt.root, &rt.idle_count),
      tasks(static_cast<std::uint16_t>(index + 1)),
      rt_(rt),
      index_(index),
      timers_(*this),
      driver_(rt.opts.make_driver ? rt.opts.make_driver(index) : make_futex_driver()),
      rng_(0x9E3779B97F4A7C15ULL * (index + 1)),
      seen_(rt.planned_workers),
      seeded_(rt.opts.seed.has_value()),
      seed_state_(rt.opts.seed.value_or(0)) {
    registry_ = rt.opts.task_records ? &tasks : nullptr;
}

void sched_worker::beat_idle() noexcept {
    const std::uint64_t b = beat.load(std::memory_order_relaxed);
    if ((b & 1) != 0) {
        beat.store(b + 1, std::memory_order_relaxed);
    }
}

void sched_worker::stop_for_dump() noexcept {
    const std::uint64_t g = rt_.stop_gen.load(std::memory_order_acquire);
    if ((g & 1) == 0) {
        return;
    }
    stopped_gen.store(g, std::memory_order_release);
    // acquire: the dumper's reads are done before this worker touches a frame again.
    while (rt_.stop_gen.load(std::memory_order_acquire) == g) {
        rt_.stop_gen.wait(g, std::memory_order_acquire);
    }
}

void sched_worker::start() {
    thread_ = std::thread([this] { run(); });
}

void sched_worker::join() {
    if (thread_.joinable()) {
        thread_.join();
    }
}

void sched_worker::schedule_remote(std::coroutine_handle<> h) noexcept {
    if (!stealable_) {
        post(h);  // thread-per-core: back to this worker, never to whichever takes the injector
    } else {
        rt_.inject(h.address());
    }
}

void sched_worker::yield_turn(std::coroutine_handle<> h) noexcept {
    // Behind what was woken here, and after a fair pick (timers, IO, posted and injected work,
    // the LIFO slot, this deque's oldest task): not through the injector, which hands the task
    // to whichever worker looks first and splits a producer from the consumer it just woke.
    // Quietly: a yield makes no new work, so it wakes no parked worker to come and split the
    // pair; tasks that do not hand off to each other still spread at the next fairness tick.
    push_quiet(h);
    yielded_ = true;
}

void sched_worker::detached_failure(std::exception_ptr e) noexcept {
    if (!rt_.opts.on_detached_failure) {
        print_detached_failure(e);
        return;
    }
    try {
        rt_.opts.on_detached_failure(std::move(e));
    } catch (...) {
        std::fprintf(stderr, "weft: runtime_options::on_detached_failure threw\n");
        std::terminate();
    }
}

void sched_worker::on_push() noexcept {
    // Reached after a relaxed check of idle_count (worker_base::push): see runtime_core's
    // class comment.
    // While the runtime has an IO home (runtime_options::consolidate_io: the load fits one
    // worker), a push onto a short queue (a spawn, a task woken here) calls no helper now: this
    // worker most likely runs it next, and a worker woken for it takes a CPU from someone else
    // (the HTTP accept loop woke one for nearly every connection). The wake-up is deferred to
    // this worker's next pick (settle_deferred): if the task is then still queued behind
    // another, it calls a helper. A task that pushes and then keeps its thread (spins, blocks)
    // never reaches a pick: the parked workers' watch covers it (home_watch_timeout).
    if (rt_.gathers_io && deque_.size() <= home_quiet_queue && rt_.read_io_home().worker >= 0) {
        if (deferred_++ == 0) {
            deferring.store(true, std::memory_order_relaxed);
        }
        deferred_task_ = untag(deque_.peek_bottom());
        bump(deferred_wakes);
        return;
    }
    if (rt_.notify_parked()) {
        bump(wakes);
    }
}

void sched_worker::settle_deferred(void* next) noexcept {
    // Still queued behind `next`: more than one deferred push (at most one of them runs next),
    // or the one deferred is not `next` (the LIFO slot or an older entry went first). An empty
    // deque means a thief or this worker took them already.
    const bool waits = deque_.size() != 0 && (deferred_ > 1 || next != deferred_task_);
    deferred_ = 0;
    deferred_task_ = nullptr;
    deferring.store(false, std::memory_order_relaxed);
    if (waits && rt_.notify_parked()) {
        bump(wakes);
    }
}

auto sched_worker::home_watch_timeout() noexcept -> std::optional<std::int64_t> {
    if (!rt_.gathers_io) {
        return std::nullopt;
    }
    if (rt_.read_io_home().worker < 0) {
        return std::nullopt;
    }
    watch_ns_ = watched_ ? std::min(2 * watch_ns_, home_watch_max_ns)
                         : std::max(watch_ns_, home_watch_min_ns);
    return watch_ns_;
}

auto sched_worker::others_may_wait() const noexcept -> bool {
    // Everything a yield through the injector would let run or complete first on this worker:
    // posted and injected tasks, due timers, IO completions (polled between tasks). IO is what
    // the driver expects completions for (expects_io), not its pending() count: that one leaves
    // out io_uring's multishot receives and accepts (they never end, and shutdown waits on the
    // count), and a task whose every operation completes at once then kept the worker while
    // each connection on its ring waited. Relaxed reads are enough: a submission racing with
    // this check is picked up at the next turn or fairness tick, as it would be if it had
    // arrived just after the yield.
    return !inbox_empty() || !rt_.injector_empty() ||
           timers_.pending.load(std::memory_order_relaxed) != 0 || driver_->expects_io();
}

void sched_worker::overflow(std::coroutine_handle<> h) {
    // Full deque: move the older half to the injector in one batch (thieves and the injector
    // check share it out), then push.
    void* moved[work_deque::capacity / 2];
    std::int64_t n = 0;
    while (n == 0 && deque_.size() != 0) {
        n = deque_.steal_batch(moved, work_deque::capacity / 2);  // retried if a thief won
    }
    for (std::int64_t i = 0; i < n; ++i) {
        moved[i] = untag(moved[i]);
    }
    rt_.inject_batch(moved, static_cast<std::size_t>(n));
    if (!deque_.push(h.address())) {
        rt_.inject(h.address());
    }
}

auto sched_worker::fire_timers() -> bool {
    if (timers_.pending.load(std::memory_order_relaxed) == 0) {
        return false;
    }
    // The fired entries are chained through their (now unused) wheel_next, oldest first: no
    // allocation here, so a worker out of memory still fires its timers. An entry stays valid
    // until its waiter runs, and nobody else touches a fired entry's links: its next is read
    // before its waiter is queued.
    timer_op* first = nullptr;
    timer_op* last = nullptr;
    std::size_t fired = 0;
    {
        std::lock_guard lock(timers_.mu);
        timers_.wheel.advance(rt_.now_ms(), [&](timer_op* op) {
            op->st = timer_op::state::fired;
            (last != nullptr ? last->wheel_next : first) = op;
            last = op;
            ++fired;
        });
        timers_.pending.fetch_sub(fired, std::memory_order_seq_cst);
    }
    for (timer_op* op = first; op != nullptr;) {
        timer_op* next = op->wheel_next;
        op->wheel_next = nullptr;
        push(op->waiter);
        op = next;
    }
    return fired != 0;
}

void sched_worker::post(std::coroutine_handle<> h) {
    {
        std::lock_guard lock(inbox_mu_);
        if (inbox_.size() == inbox_.capacity()) {
            try {
                inbox_.reserve(std::max<std::size_t>(2 * inbox_.capacity(), 64));
            } catch (const std::bad_alloc&) {
                out_of_memory_queuing("a worker's inbox");
            }
        }
        inbox_.push_back(h.address());
        inbox_nonempty_.store(true, std::memory_order_seq_cst);
    }
    // The worker may be parked: it is not in the idle list's choice (any worker would do for
    // the injector), so wake this one directly.
    unpark();
}

auto sched_worker::take_inbox() -> void* {
    if (!inbox_nonempty_.load(std::memory_order_relaxed)) {
        return nullptr;
    }
    // Swapped with inbox_taken_, which keeps its storage: post allocates only past the inbox's
    // high-water mark (see out_of_memory_queuing).
    {
        std::lock_guard lock(inbox_mu_);
        inbox_taken_.swap(inbox_);
        inbox_nonempty_.store(false, std::memory_order_relaxed);
    }
    // One look for parked workers after the batch, not one per task (push_quiet's contract):
    // the fence after the last push orders every earlier one too.
    for (std::size_t i = inbox_taken_.size(); i-- > 1;) {
        push_quiet(std::coroutine_handle<>::from_address(inbox_taken_[i]));
    }
    if (inbox_taken_.size() > 1) {
        notify_idle();
    }
    void* first = inbox_taken_.empty() ? nullptr : inbox_taken_[0];
    inbox_taken_.clear();
    return first;
}

auto sched_worker::take_injected() -> void* {
    void* batch[max_batch];
    const std::size_t n = rt_.take_injected(batch, max_batch);
    if (n == 0) {
        return nullptr;
    }
    // Run the oldest now; queue the rest (pushed newest-first so the next pops keep FIFO order
    // among them), with one look for parked workers after the batch.
    for (std::size_t i = n; i-- > 1;) {
        push_quiet(std::coroutine_handle<>::from_address(batch[i]));
    }
    if (n > 1) {
        notify_idle();
    }
    return batch[0];
}

auto sched_worker::next_task() -> void* {
    bool tick = --until_fairness_ == 0;
    if (WEFT_SHUFFLED(8)) {
        tick = true;  // shuffle.hpp: the injector and the oldest task looked at early
    }
    if (tick || yielded_) {
        if (void* h = fair_pick(tick)) {
            return h;
        }
    }
    return pop();
}

auto sched_worker::fair_pick(bool tick) -> void* {
    if (tick) {
        until_fairness_ = fairness_interval;
    }
    const bool yielded = std::exchange(yielded_, false);
    if (tick && rt_.gathers_io) {
        note_load();
    }
    fire_timers();
    driver_->poll();
    if (void* h = take_inbox()) {
        return h;
    }
    // One injected task, not a batch (Go and tokio take one here too): the tick is there so that
    // remote submissions do not starve behind a local stream. A batch on every tick outgrew a
    // busy worker's deque, whose overflow sent the surplus back through the injector. A worker
    // whose deque runs dry takes a batch (find_work).
    if (void* h = nullptr; rt_.take_injected(&h, 1) != 0) {
        return h;
    }
    // After a yield, the task the yielder woke (a consumer it fed, waiting in the LIFO slot,
    // which nobody else may take) goes before the yielder, which may be the oldest.
    if (void* h = yielded ? take_lifo() : nullptr) {
        return h;
    }
    if (void* h = untag(deque_.steal())) {  // our own oldest task, past the LIFO stream
        // Work is waiting here: let a parked worker come for it (on the periodic tick; a
        // yield's pick wakes nobody, see yield_turn).
        // Not on the IO home (runtime_options::consolidate_io): the load fits it; its helpers
        // come when it saturates and the receives spread.
        if (tick && stealable_ && deque_.size() != 0 && !current_worker_is_io_home()) {
            on_push();
        }
        return h;
    }
    return nullptr;
}

auto sched_worker::next_seeded() -> void* {
    // Everything runnable, in an order fixed by the state alone (one thread, no stealing):
    // due timers and IO completions first queue their tasks, then the posted, injected and
    // queued tasks are gathered; the generator picks among them.
    fire_timers();
    driver_->poll();
    while (void* h = take_inbox()) {
        ready_.push_back(h);
    }
    while (void* h = take_injected()) {
        ready_.push_back(h);
    }
    while (void* h = pop()) {
        ready_.push_back(h);
    }
    if (ready_.empty()) {
        return nullptr;
    }
    // splitmix64: a full-period generator whose every output depends on the whole seed.
    std::uint64_t z = (seed_state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    const std::size_t i = static_cast<std::size_t>(z % ready_.size());
    void* h = ready_[i];
    ready_[i] = ready_.back();
    ready_.pop_back();
    return h;
}

auto sched_worker::become_searching() noexcept -> bool {
    if (searching) {
        return true;
    }
    const auto n = static_cast<unsigned>(rt_.workers.size());
    // At most half of the workers search at once: more only burn CPU contending.
    if (2 * rt_.searching.load(std::memory_order_seq_cst) >= n) {
        return false;
    }
    searching = true;
    rt_.searching.fetch_add(1, std::memory_order_seq_cst);
    return true;
}

auto sched_worker::steal_once() -> void* {
    if (WEFT_SHUFFLED(4)) {
        return nullptr;  // shuffle.hpp: this thief does not steal now
    }
    const auto n = static_cast<unsigned>(rt_.workers.size());
    const auto start = static_cast<unsigned>(xorshift(rng_) % n);
    for (unsigned k = 0; k < n; ++k) {
        sched_worker& victim = *rt_.workers[(start + k) % n];
        if (&victim == this || !settled(victim)) {
            continue;
        }
        // Take half of the victim's queue (at most max_batch), one CAS each (see
        // work_deque::steal_batch for why not in one go): the oldest runs now, the rest queue
        // here.
        std::int64_t want = (victim.queued() + 1) / 2;
        want = std::min<std::int64_t>(want, static_cast<std::int64_t>(max_batch));
        void* first = nullptr;
        bool queued = false;
        for (std::int64_t i = 0; i < want; ++i) {
            void* entry = victim.steal_one();
            if (entry == nullptr) {
                break;
            }
            void* a = untag(entry);
            if (first == nullptr) {
                first = a;
                continue;
            }
            if (is_io_ready(entry)) {
                push_io_ready(std::coroutine_handle<>::from_address(a));  // still oldest first
            } else {
                push_quiet(std::coroutine_handle<>::from_address(a));
            }
            queued = true;
        }
        if (queued) {
            notify_idle();  // one look for parked workers per batch, not per task
        }
        if (first != nullptr) {
            return first;
        }
    }
    return nullptr;
}

auto sched_worker::settled(const sched_worker& victim) noexcept -> bool {
    // A task the victim displaced from its LIFO slot (worker_base::wake) is left to the victim
    // until it has been the oldest there for displaced_settle: the victim's chain of hand-offs
    // usually comes back to it first (its fairness tick, or the chain pausing), on the core
    // whose cache holds its data. Go's thieves give a busy P's runnext task 3 us the same way.
    // Stolen at once, it was the receiving end of a pipeline that then took every item across
    // cores (docs/design/decisions.md).
    std::int64_t pos = 0;
    void* oldest = victim.peek_oldest(pos);
    if (oldest == nullptr || !is_displaced(oldest) || victim.index() >= seen_.size()) {
        return true;  // nothing there (steal finds out), or ordinary queued work
    }
    sighting& s = seen_[victim.index()];
    const auto now = std::chrono::steady_clock::now();
    if (s.pos != pos) {  // a new oldest entry: start its clock
        s.pos = pos;
        s.since = now;
        return false;
    }
    return now - s.since >= displaced_settle;
}

auto sched_worker::find_work() -> void* {
    if (void* h = take_inbox()) {
        return h;
    }
    if (void* h = take_injected()) {
        return h;
    }
    if (!stealable_ || rt_.workers.size() < 2 || !become_searching()) {
        return nullptr;
    }
    const int rounds = driver_->expects_io() ? io_spin_rounds : spin_rounds;
    for (int round = 0; round < rounds; ++round) {
        if (void* h = steal_once()) {
            return h;
        }
        if (void* h = take_injected()) {
            return h;
        }
        if (fire_timers() || (driver_->poll_is_cheap() && driver_->poll())) {
            return pop();
        }
        if (rt_.terminate.load(std::memory_order_relaxed)) {
            break;
        }
        const int pauses = 1 << std::min(round, 5);
        for (int i = 0; i < pauses; ++i) {
            cpu_relax();
        }
    }
    return nullptr;
}

void sched_worker::park() {
    bump(park_attempts);
    beat_idle();
    if (searching) {
        searching = false;
        rt_.searching.fetch_sub(1, std::memory_order_seq_cst);
    }
    {
        std::lock_guard lock(rt_.idle_mu);
        rt_.idle.push_back(this);
        in_idle_list = true;
        rt_.idle_count.fetch_add(1, std::memory_order_seq_cst);
    }
    auto unlist = [this] {
        std::lock_guard lock(rt_.idle_mu);
        if (in_idle_list) {
            auto& v = rt_.idle;
            v.erase(std::find(v.begin(), v.end(), this));
            in_idle_list = false;
            rt_.idle_count.fetch_sub(1, std::memory_order_seq_cst);
            rt_.unparks.fetch_add(1, std::memory_order_seq_cst);
        }
    };
    // A worker that cannot steal (thread-per-core) must not stay up for other workers' queues:
    // it would spin through park() for as long as they are busy.
    if (rt_.has_work_for(*this, stealable_) || !inbox_empty() ||
        rt_.terminate.load(std::memory_order_seq_cst)) {
        unlist();
        return;
    }
    if (deferred_ != 0) {  // nothing is queued here (has_work_for)
        deferred_ = 0;
        deferred_task_ = nullptr;
        deferring.store(false, std::memory_order_relaxed);
    }
    std::optional<std::int64_t> timeout;
    if (rt_.manual() != nullptr) {
        // A manual clock does not move while the worker sleeps: no timer bounds the sleep; the
        // last worker to go idle moves the clock instead (runtime_core::step_clock), once no IO
        // completion is ready. The poll may take the wake-up of work published meanwhile (the
        // reactor's wake is one of its events): look at the queues again after it, as the
        // parking protocol's re-check does, or the park below would sleep past that work.
        if (driver_->poll() || rt_.has_work_for(*this, stealable_) || !inbox_empty()) {
            unlist();
            return;
        }
        switch (rt_.step_clock(*this)) {
            case runtime_core::clock_step::due:
                unlist();
                return;
            case runtime_core::clock_step::blocked:
                timeout = blocked_recheck_ns;  // real time: until the blocking call is counted out
                break;
            case runtime_core::clock_step::none:
                break;
        }
    } else {
        std::lock_guard lock(timers_.mu);
        if (auto d = timers_.wheel.next_deadline()) {
            timeout = rt_.ms_to_ns_from_now(*d);
        }
    }
    // While there is an IO home, a parked worker wakes now and then to look at the queues: the
    // workers defer the wake-ups of their pushes to their next pick (on_push), which a task that
    // keeps its thread never reaches.
    const std::optional<std::int64_t> watch = home_watch_timeout();
    const bool watching = watch && (!timeout || *watch < *timeout);
    if (watching) {
        timeout = watch;
    }
    if (rt_.shutting_down.load(std::memory_order_seq_cst)) {
        std::lock_guard lock(rt_.quiet_mu);
        rt_.quiet_cv.notify_all();
    }
    if (!timeout || *timeout > 0) {
        bump(sleeps);
        if (rt_.gathers_io) {
            // The window's streak is not ended here: this park may return at once (completions
            // already wait), and only a park that blocks is a sleep (note_load).
            note_load();
            // A worker that sleeps through whole windows publishes none meanwhile: say now that
            // it may sleep (reviews count it as not saturated), if its last window said
            // otherwise. Its next window end publishes what it did.
            const auto w = runtime_core::unpack(last_window.load(std::memory_order_relaxed));
            if (w.sleeps == 0 || w.saturated != 0) {
                last_window.store(runtime_core::pack({.busy_permille = w.busy_permille,
                                                      .sleeps = std::max(w.sleeps, 1U),
                                                      .saturated = 0}),
                                  std::memory_order_relaxed);
            }
        }
        driver_->park(timeout);
    }
    if (watching) {
        // A worker still holding a push it deferred may be stuck in a task that keeps its
        // thread: look again soon. Otherwise back off (an idle runtime's workers then wake a
        // few times a second at most).
        bool stuck = false;
        for (const auto& w : rt_.workers) {
            stuck = stuck || (w.get() != this && w->deferring.load(std::memory_order_relaxed));
        }
        watched_ = !stuck;
        if (stuck) {
            watch_ns_ = home_watch_min_ns;
        }
    }
    unlist();
}

auto sched_worker::wanted_cpu_ns() noexcept -> std::int64_t {
    // The CPU time this thread ran (CLOCK_THREAD_CPUTIME_ID, exact to now) plus the time it was
    // runnable but waited while another thread had its CPU: the second field of
    // /proc/thread-self/schedstat ("run_ns wait_ns timeslices"), opened once on this thread
    // (thread-self names the opener) and read with pread each window. Not schedstat's run
    // field: it moves only at ticks and switches (0 in a thread's first slice, which read as
    // "no schedstat" and left that worker with the CPU time alone for good), too coarse for a
    // 10 ms window. A kernel without schedstats reports "0 0 0".
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    const std::int64_t run = static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
    if (schedstat_fd_ == -2) {
        schedstat_fd_ = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    }
    if (schedstat_fd_ >= 0) {
        char buf[96];
        const ssize_t n = ::pread(schedstat_fd_, buf, sizeof(buf) - 1, 0);
        if (n > 0) {
            buf[n] = '\0';
            char* end = nullptr;
            const unsigned long long sched_run = std::strtoull(buf, &end, 10);
            const unsigned long long wait = std::strtoull(end, &end, 10);
            const unsigned long long slices = std::strtoull(end, nullptr, 10);
            if (sched_run != 0 || wait != 0 || slices != 0) {
                return run + static_cast<std::int64_t>(wait);
            }
        }
        ::close(schedstat_fd_);
        schedstat_fd_ = -1;
    }
    return run;
}

void sched_worker::note_load() noexcept {
    const auto now = std::chrono::steady_clock::now();
    if (now - window_start_ < runtime_core::load_window) {
        return;
    }
    // The time this thread wanted a CPU (a read of schedstat, once per window): what it ran, in
    // user space and in the kernel (its sends' network work included), plus what it waited in
    // the run queue while another thread had its CPU. The CPU time alone under-reads a worker
    // that never runs out of work but shares its CPU with other runnable threads (a load tool
    // on the same cores): such a home, with 1,000 keep-alive connections queued on it, spent
    // about a quarter of its time in the run queue, never read as saturated, never spread, and
    // served every connection alone while the other worker slept (docs/design/decisions.md).
    const std::int64_t cpu = wanted_cpu_ns();
    // Its sleeps: the times it blocked (voluntary context switches), not its parks. A park
    // whose wait returns at once, because completions or deferred completion work were already
    // there, is no sleep: a home with 1,000 keep-alive connections parked that way in nearly
    // every window while it wanted a CPU for all of them (no time asleep in schedstat), was
    // never read as saturated and served every connection alone while the other worker slept
    // (docs/design/decisions.md).
    const std::uint64_t blocks = voluntary_switches();
    if (window_start_ != std::chrono::steady_clock::time_point{}) {  // else: the first window
        const std::int64_t wall =
            std::chrono::duration_cast<std::chrono::nanoseconds>(now - window_start_).count();
        const std::int64_t busy =
            std::clamp<std::int64_t>((cpu - window_cpu_start_ns_) * 1000 / wall, 0, 1000);
        const runtime_core::window_load w = streak_.close(
            static_cast<unsigned>(busy), static_cast<unsigned>(std::min<std::uint64_t>(
                                             blocks - window_blocks_start_, 0xffffffffU)));
        last_window.store(runtime_core::pack(w), std::memory_order_relaxed);
        rt_.review_io_home();
    }
    window_start_ = now;
    window_cpu_start_ns_ = cpu;
    window_blocks_start_ = blocks;
}

auto sched_worker::voluntary_switches() noexcept -> std::uint64_t {
    rusage ru{};
    if (::getrusage(RUSAGE_THREAD, &ru) != 0) {
        return 0;
    }
    return static_cast<std::uint64_t>(ru.ru_nvcsw);
}

void sched_worker::run() {
    set_current_worker(this);
    tl_sched_worker = this;
    tl_manual_clock = rt_.manual();
    tl_stack_capture = &capture;
    bool attached = false;
    try {
        driver_->attach();
        attached = true;
        rt_.worker_started(nullptr);
    } catch (...) {
        rt_.worker_started(std::current_exception());
    }
    // The heartbeat's next odd value, in a register: a task's turn costs two stores (running,
    // beat). It goes even where the worker waits (park, stop_for_dump, the loop's end).
    std::uint64_t turn = beat.load(std::memory_order_relaxed) | 1;
    while (attached) {
        // One load per turn covers both a shutdown and a dump (runtime_core::loop_attention).
        if (rt_.loop_attention.load(std::memory_order_relaxed) != 0) [[unlikely]] {
            if (rt_.terminate.load(std::memory_order_relaxed)) {
                break;
            }
            beat_idle();
            stop_for_dump();
        }
        void* h = seeded_ ? next_seeded() : next_task();
        // An expensive poll (epoll_wait) is left to park(): a first look here mostly found
        // nothing, and park's own wait returns at once when events are ready. A seeded worker
        // takes every task through its generator's pick, so it only parks here: a task taken
        // past the pick (the block_on root injected just after a look that found nothing)
        // would shift the generator by one draw and that seed's interleaving with it.
        if (h == nullptr && !seeded_ &&
            (fire_timers() || (driver_->poll_is_cheap() && driver_->poll()))) {
            h = pop();
        }
        if (h == nullptr && !seeded_) {
            h = find_work();
        }
        if (h != nullptr) {
            if (deferred_ != 0) {
                settle_deferred(h);
            }
            if (searching) {
                searching = false;
                // The last searcher to find work wakes another, so bursts fan out.
                if (rt_.searching.fetch_sub(1, std::memory_order_seq_cst) == 1) {
                    rt_.notify_parked();
                }
            }
            reset_budget();
            running.store(h, std::memory_order_relaxed);
            turn += 2;
            beat.store(turn, std::memory_order_relaxed);  // odd: inside a task
            std::coroutine_handle<>::from_address(h).resume();
            continue;
        }
        park();
    }
    beat_idle();
    driver_->detach();
    if (schedstat_fd_ >= 0) {
        ::close(schedstat_fd_);
        schedstat_fd_ = -1;
    }
    tl_stack_capture = nullptr;
    tl_manual_clock = nullptr;
    tl_sched_worker = nullptr;
    set_current_worker(nullptr);
}

}  // namespace weft::detail
