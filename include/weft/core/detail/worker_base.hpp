#pragma once

#include <atomic>
#include <coroutine>
#include <exception>

#include "weft/core/detail/shuffle.hpp"
#include "weft/core/detail/task_registry.hpp"
#include "weft/core/detail/work_deque.hpp"
#include "weft/core/stop.hpp"

/// On every await_suspend that hands the coroutine's handle to another thread (a queue, a join
/// word, a timer wheel): keep it out of line. Inlined, clang < 19 and g++ may still store to
/// the coroutine frame after the hand-off, racing whoever resumes (or frees) it on the other
/// thread (LLVM fixed this with llvm.coro.await.suspend in 19). TSan caught it in when_any.
/// NOTE: out of line is not enough at -O0 with clang 16: there the handle a symmetric-transfer
/// await_suspend returns (fork_awaiter's) is spilled to the frame after the call and read back,
/// after a thief may already run the parent (TSan in a Debug build of test_bus_outbox, in
/// when_all's run_members). Optimised builds keep it in a register; the TSan build is -O1+.
// Always out of line, also where the compiler would be safe (LLVM >= 19): these functions read
// the worker thread_local directly, which is only sound outside coroutine bodies.
#define WEFT_PUBLISHES_HANDLE [[gnu::noinline]]

namespace weft::detail {

/// std::atomic_thread_fence(std::memory_order_seq_cst), compiled on x86-64 as g++ compiles it:
/// a locked OR of zero into the top of the stack. On x86 loads and stores are not reordered
/// with a locked instruction (Intel SDM, "Memory Ordering"), which is all a seq_cst fence has to
/// ensure there. clang emits mfence instead, several times slower, and every push onto a deque
/// that thieves may take pays one (notify_idle). ThreadSanitizer builds keep the library fence.
inline void seq_cst_fence() noexcept {
#if defined(__clang__) && defined(__x86_64__)
#if __has_feature(thread_sanitizer)
    std::atomic_thread_fence(std::memory_order_seq_cst);
#else
    asm volatile("lock orq $0, (%%rsp)" ::: "memory", "cc");
#endif
#else
    std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

/// What core needs from whatever runs tasks on this thread: a deque for forks and spawns, the
/// root stop_state for detached tasks, and a way in for other threads. Implemented by the
/// inline executor (core) and by the runtime's workers (sched).
class worker_base {
public:
    /// Operations a task may perform per turn before a runtime-owned await yields (tokio: 128).
    static constexpr int budget_per_turn = 128;

    worker_base(const worker_base&) = delete;
    auto operator=(const worker_base&) -> worker_base& = delete;

    /// Owner thread: queue `h` to run on this worker (or, when stealable, on a thief).
    void push(std::coroutine_handle<> h) {
        if (!deque_.push(h.address())) {
            overflow(h);
        } else {
            notify_idle();
        }
    }

    /// Owner thread: queue `h` without telling idle workers; call notify_idle() once after a
    /// batch (a reactor queueing every completion of one poll wakes at most one helper, not
    /// one per completion).
    void push_quiet(std::coroutine_handle<> h) {
        if (!deque_.push(h.address())) {
            overflow(h);
        }
    }
    /// Owner thread: as push_quiet, for a task woken by an IO completion. Such tasks run in
    /// the order their completions arrived (see pop), not newest first.
    void push_io_ready(std::coroutine_handle<> h) {
        may_hold_io_ready_ = true;
        if (!deque_.push(mark(h.address(), io_ready_bit))) {
            overflow(h);
        }
    }
    /// Owner thread, after a push: wakes a parked worker to steal it, if there is one. The
    /// parking protocol's submitter side (sched's runtime_core): the seq_cst fence orders the
    /// deque's publication (bottom_) before the look at the idle count, against a parker's seq_cst
    /// increment of that count and its seq_cst loads of the deques. Without it the look may read
    /// the count from before the increment while the parker reads the deque from before the push
    /// (store buffering): the parker sleeps, and if the task running here keeps its thread (spins
    /// or blocks until the pushed task has run), nobody runs it. The load after the fence may be
    /// relaxed: the fence puts it in the protocol's total order (tools/loom's parking model proves
    /// both).
    void notify_idle() noexcept {
        if (idle_hint_ != nullptr) {
            seq_cst_fence();
            if (idle_hint_->load(std::memory_order_relaxed) != 0) {
                on_push();  // a worker is parked: let it come and steal
            }
        }
    }

    /// Owner thread: run `h` next, here (the LIFO slot, which thieves cannot take): a task woken
    /// by the running one (a channel hand-off) runs right after it on the same core, with its
    /// data still in cache, instead of being stolen and bounced between cores. A task already in
    /// the slot moves to the deque.
    /// Uncapped, unlike tokio's slot (3 runs per tick, then the back of its FIFO queue): this
    /// deque pops LIFO, so a capped task came straight back, and the only effect of the cap was
    /// waking an idle worker every 4th hand-off for nothing. What bounds a pair handing off to
    /// each other is the fairness tick (every 61 tasks the deque's oldest runs and idle workers
    /// are called for the rest) and the turn budget (docs/design/decisions.md).
    /// The task already in the slot goes to the deque marked as displaced (see is_displaced).
    void wake(std::coroutine_handle<> h) {
        if (void* prev = lifo_.load(std::memory_order_relaxed)) {
            if (!deque_.push(mark_displaced(prev))) {
                overflow(std::coroutine_handle<>::from_address(prev));
            } else {
                notify_idle();
            }
        }
        lifo_.store(h.address(), std::memory_order_relaxed);
    }

    /// Deque entries are frame addresses (16-byte aligned); bit 0 marks a task that wake()
    /// moved out of the LIFO slot. Such a task was just woken by this worker's running chain of
    /// hand-offs and will likely run here soon (at the next fairness tick, or when the chain
    /// pauses), with its data in this core's cache; a thief leaves it alone for a moment (see
    /// sched_worker::settled). Everything that runs an entry untags it first.
    [[nodiscard]] static auto is_displaced(void* entry) noexcept -> bool {
        return (reinterpret_cast<std::uintptr_t>(entry) & displaced_bit) != 0;
    }
    [[nodiscard]] static auto untag(void* entry) noexcept -> void* {
        return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(entry) &
                                       ~(displaced_bit | io_ready_bit));
    }

    /// Owner thread: the next handle to run, or nullptr: the LIFO slot; else, when the newest
    /// entry was woken by IO, the oldest entry (taken from the top, as a thief would); else the
    /// newest (a fork's parent, a spawned task).
    /// Why IO-woken tasks run oldest first: each poll pushes a batch of completions on top of
    /// what earlier polls queued, so popping newest first served the latest batch and left the
    /// oldest connections waiting until the deque drained or a fairness tick (1 in 61) reached
    /// them (1000 echo connections on a 1-worker weft client: p50 0.5 ms, p99 300 ms). Oldest
    /// first, they wait for one pass over what is queued. Fork-join keeps its depth-first order:
    /// its entries are untagged, and a child's completion pops its parent with pop_if.
    auto pop() -> void* {
        if (WEFT_SHUFFLED(4)) {  // shuffle.hpp: another legal order
            if (void* h = shuffled_pop()) {
                return h;
            }
        }
        if (void* l = lifo_.load(std::memory_order_relaxed)) {
            lifo_.store(nullptr, std::memory_order_relaxed);
            return l;
        }
        if (may_hold_io_ready_) {
            void* newest = deque_.peek_bottom();
            if (newest == nullptr) {
                may_hold_io_ready_ = false;
            } else if (is_io_ready(newest)) {
                if (void* h = deque_.steal()) {  // nullptr: lost the race for it to a thief
                    return untag(h);
                }
            }
        }
        return untag(stealable_ ? deque_.pop() : deque_.pop_unshared());
    }

    /// WEFT_SHUFFLE builds: the deque's oldest or newest entry, past the LIFO slot (nullptr when
    /// the deque is empty; pop() then goes on as usual).
    auto shuffled_pop() -> void* {
        if (WEFT_SHUFFLED(2)) {
            if (void* h = deque_.steal()) {
                return untag(h);
            }
        }
        return untag(stealable_ ? deque_.pop() : deque_.pop_unshared());
    }

    /// Owner thread: the LIFO slot's task, taken out (nullptr when empty).
    auto take_lifo() noexcept -> void* {
        void* l = lifo_.load(std::memory_order_relaxed);
        if (l != nullptr) {
            lifo_.store(nullptr, std::memory_order_relaxed);
        }
        return l;
    }

    /// Owner thread: pops `h` if it is the bottom element (a fork's parent that nobody stole).
    /// Inline: every fork's completion calls it.
    auto pop_if(void* h) noexcept -> bool {
        if (untag(deque_.peek_bottom()) != h) {
            return false;
        }
        if (!stealable_) {
            (void)deque_.pop_unshared();
            return true;
        }
        void* got = untag(deque_.pop());
        if (got == h) {
            return true;
        }
        if (got != nullptr) [[unlikely]] {
            requeue(got);
        }
        return false;
    }

    /// Any thread: run `h` on this worker's executor soon.
    virtual void schedule_remote(std::coroutine_handle<> h) noexcept = 0;

    /// Owner thread: `h` (the running task) spent its turn's budget; run it again after what
    /// else is due here. Default: the remote queue (behind everything local).
    virtual void yield_turn(std::coroutine_handle<> h) noexcept { schedule_remote(h); }

    [[nodiscard]] auto root_stop() const noexcept -> stop_state* { return root_stop_; }
    /// Owner thread: where tasks spawned here are recorded for runtime::dump() (nullptr: an
    /// executor that keeps no records, such as sync_wait's).
    [[nodiscard]] auto registry() noexcept -> task_registry* { return registry_; }

    /// A task whose result nobody will observe (its join_handle was dropped) failed with `e`.
    /// Default: print_detached_failure. The runtime's workers call its handler
    /// (runtime_options::on_detached_failure) instead.
    virtual void detached_failure(std::exception_ptr e) noexcept;

    /// Charges one operation to the running task; true when its turn is used up and the caller
    /// should yield instead of continuing (the hot task gives others a chance). A spent turn
    /// with nobody to give it to (see turn_over) starts a new turn instead: the yield would only
    /// bounce the task through the injector and straight back.
    auto consume_budget() noexcept -> bool { return --budget_ < 0 && turn_over(); }
    void reset_budget() noexcept { budget_ = budget_per_turn; }

protected:
    // Tag bits of a deque entry (frames are 16-byte aligned): at most one is set.
    static constexpr std::uintptr_t displaced_bit = 1;  // see is_displaced
    static constexpr std::uintptr_t io_ready_bit = 2;   // woken by IO: see pop
    [[nodiscard]] static auto mark(void* h, std::uintptr_t bit) noexcept -> void* {
        return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(h) | bit);
    }
    [[nodiscard]] static auto mark_displaced(void* h) noexcept -> void* {
        return mark(h, displaced_bit);
    }
    [[nodiscard]] static auto is_io_ready(void* entry) noexcept -> bool {
        return (reinterpret_cast<std::uintptr_t>(entry) & io_ready_bit) != 0;
    }

    /// `idle_hint`: a count of parked workers that could steal from this one (nullptr: none
    /// ever can). Read relaxed on every push; see the parking protocol in sched.
    worker_base(bool stealable, stop_state* root, const std::atomic<unsigned>* idle_hint) noexcept
        : stealable_(stealable), root_stop_(root), idle_hint_(stealable ? idle_hint : nullptr) {}
    ~worker_base() = default;

    virtual void on_push() noexcept {}
    virtual void overflow(std::coroutine_handle<> h) = 0;
    /// Owner thread, when a turn is spent: may something other than the local deque and LIFO
    /// slot be waiting for this thread (remote submissions, timers, IO completions to poll)?
    /// Conservative default: yes, so the turn always ends.
    [[nodiscard]] virtual auto others_may_wait() const noexcept -> bool { return true; }

    /// The running task's budget is spent: true (yield) if anything else could run here; else
    /// a fresh budget and false. Out of line: rare (once per budget_per_turn operations).
    [[gnu::noinline]] auto turn_over() noexcept -> bool {
        if (lifo_.load(std::memory_order_relaxed) != nullptr || deque_.size() != 0 ||
            others_may_wait()) {
            return true;
        }
        budget_ = budget_per_turn;
        return false;
    }

    /// pop_if took an entry that was not the one it wanted: cannot happen (only thieves shrink
    /// the deque, from the top), but never lose work. Out of line, off the fork path.
    [[gnu::noinline, gnu::cold]] void requeue(void* entry) {
        push(std::coroutine_handle<>::from_address(entry));
    }

    work_deque deque_;
    // Owner writes; others only read it as a hint (is anything queued here?), so relaxed.
    std::atomic<void*> lifo_{nullptr};
    bool stealable_;
    // Owner only: false when the deque holds no IO-woken entry (set by push_io_ready, cleared
    // when pop finds the deque empty), so that other workloads' pops skip the peek.
    bool may_hold_io_ready_ = false;
    stop_state* root_stop_;
    const std::atomic<unsigned>* idle_hint_;
    task_registry* registry_ = nullptr;
    int budget_ = budget_per_turn;
};

/// Writes "weft: a detached task failed: <what()>" to stderr.
void print_detached_failure(const std::exception_ptr& e) noexcept;

/// Routes the failure of a detached task to the worker running on this thread
/// (worker_base::detached_failure), or prints it when there is none. Never silent: tokio and Go
/// report a panicking detached task too.
void report_detached_failure(std::exception_ptr e) noexcept;

/// The worker running on this thread, or nullptr on a thread that runs no weft executor.
/// NOTE: thread_locals are only ever read through out-of-line functions like this one. Inlined
/// into a coroutine, a thread_local read may be compiled as "address computed once per
/// function", kept in the frame and reused after the coroutine resumed on another thread (clang
/// and g++ at -O2 both did it here: a task pushed onto another worker's deque). An opaque call
/// is made afresh every time. (Keep it out of reach of LTO.)
[[nodiscard]] auto current_worker() noexcept -> worker_base*;
void set_current_worker(worker_base* w) noexcept;

/// The same thread_local, for reading inline — ONLY inside a function that is never inlined into
/// a coroutine body (a WEFT_PUBLISHES_HANDLE await_suspend and what it inlines): such a function
/// runs on one thread from start to end, so its read is always current. The fork fast path
/// (a fork, its child's completion) reads it twice per fork; an opaque call each time cost a
/// third of a fork.
extern constinit thread_local worker_base* tl_worker_unsafe_in_coroutines;

}  // namespace weft::detail
