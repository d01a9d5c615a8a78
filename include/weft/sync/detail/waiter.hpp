#pragma once

#include <atomic>
#include <coroutine>
#include <mutex>

#include "weft/core/detail/spin_lock.hpp"
#include "weft/core/detail/wait_tag.hpp"
#include "weft/core/detail/worker_base.hpp"
#include "weft/core/stop.hpp"
#include "weft/core/task.hpp"
#include "weft/sync/detail/biased_lock.hpp"

namespace weft::detail {

/// Where a parked task came from: the worker it suspended on and that worker's executor.
/// `executor` is the worker's root_stop(): one per executor (every worker of a runtime shares
/// its runtime's; a sync_wait has its own), read when the task parks, on its own worker, so a
/// waker on another core compares it without touching that worker's cache lines.
struct waiter_home {
    worker_base* worker = nullptr;   // nullptr: it suspended on no weft executor
    stop_state* executor = nullptr;  // worker->root_stop(), or nullptr

    /// The executor running this thread now. NOTE: call only from a WEFT_PUBLISHES_HANDLE
    /// await_suspend (it reads the worker thread_local inline).
    [[nodiscard]] static auto here() noexcept -> waiter_home {
        worker_base* w = tl_worker_unsafe_in_coroutines;
        return waiter_home{w, w != nullptr ? w->root_stop() : nullptr};
    }
};

/// Resumes a waiter that some other party woke (a channel hand-off, a lock release, a stop
/// request, a pool job's completion). Where it runs:
/// - The waker runs on a worker of the waiter's own executor (the same runtime, or the same
///   sync_wait): that worker's LIFO slot. The woken task runs next, on the waker's core, with the
///   data just handed over still in cache (what message passing wants; a ping-pong pair stays
///   on one core). A runtime's tasks belong to the runtime, not to one worker (thieves move
///   them too); with `.stealing = false` as well, the waiter moves to the waker's worker.
/// - The waker runs anywhere else (a plain thread, a worker of another runtime, another
///   sync_wait): back to its own executor, `home.worker->schedule_remote` (a runtime's injector,
///   a sync_wait's queue). A task never runs on an executor it does not belong to.
/// - It suspended on no executor at all: it runs inline, on the waker's thread.
/// NOTE: the caller must have copied out everything it needs from the waiter's frame: once this
/// is called the waiter may run (and end) on another thread.
void resume_waiter(std::coroutine_handle<> h, waiter_home home);

/// Yields the awaiting coroutine `h` (its turn's budget is spent): queued behind the others.
void yield_waiter(std::coroutine_handle<> h);

/// Charges one operation to the running task's budget; true when the caller should yield.
[[nodiscard]] auto consume_budget() noexcept -> bool;

/// Who is calling: this thread's biased_lock id and its weft worker (nullptr if none). One
/// out-of-line call (it reads thread_locals) for both, for the fast path of a channel operation.
/// NOTE: use the result at once, never across a suspension: the caller may move threads.
struct thread_ids {
    std::uintptr_t lock_id;
    worker_base* worker;
};
[[nodiscard]] auto this_thread_ids() noexcept -> thread_ids;

/// `wait_sync::st` states. Any value >= 0 is the index of the operation that completed (always 0
/// except in a select).
inline constexpr int wait_pending = -1;
inline constexpr int wait_cancelled = -2;

/// One suspended (or suspending) coroutine of weft::sync, embedded in its awaiter: the frame of
/// the waiting task, so waiting never allocates. A plain operation owns one wait_node; a select
/// owns one per case, all pointing at the same wait_sync.
///
/// `st` moves out of wait_pending exactly once, by a CAS (try_claim), taken either by a waker
/// (channel peer, unlock, set, close) or by the stop callback. Every claim happens under the lock
/// of a primitive that holds one of the sync's nodes (the stop callback of a select holds all of
/// them), so a claimer sees the nodes linked (the waiter is suspended: the claimer then owns
/// resuming it, exactly once) or not yet linked (the waiter is still in await_suspend, holding
/// or about to take the same lock, and sees the claim itself: it does not suspend).
/// acq_rel on the claim: two claimers under different locks (two channels of one select) are
/// ordered by it; data handed over after a claim reaches the waiter through the resumption (a
/// queue push is a release, the pop an acquire).
/// A sync whose nodes all sit in one primitive (`one_lock`: every plain send, recv, lock,
/// acquire, wait) is only ever claimed under that primitive's lock, so the claim needs no RMW: a
/// load and a store, ordered by the lock (one locked instruction less per wake-up). The waiter
/// itself reads `st` either under the same lock or after its resumption (ordered as above).
struct wait_sync : stop_callback_node {
    explicit wait_sync(fn_type on_stop, bool one_lock = false) noexcept
        : stop_callback_node(on_stop), one_lock_(one_lock) {}
    wait_sync(const wait_sync&) = delete;
    auto operator=(const wait_sync&) -> wait_sync& = delete;

    /// Called with the lock of the primitive holding the node (all of them, for a select).
    [[nodiscard]] auto try_claim(int outcome) noexcept -> bool {
        if (one_lock_) {
            if (st.load(std::memory_order_relaxed) != wait_pending) {
                return false;
            }
            st.store(outcome, std::memory_order_relaxed);
            return true;
        }
        int expected = wait_pending;
        return st.compare_exchange_strong(expected, outcome, std::memory_order_acq_rel,
                                          std::memory_order_acquire);
    }

    /// Records who waits and where to send it back; registers for cancellation. Returns false
    /// (and marks the sync cancelled) when stop was already requested: do not suspend.
    /// NOTE: call only from a WEFT_PUBLISHES_HANDLE await_suspend: it reads the worker
    /// thread_local inline, which is current only in a function never inlined into a coroutine
    /// body (see tl_worker_unsafe_in_coroutines).
    template <typename P>
    [[nodiscard]] auto begin(std::coroutine_handle<P> h) noexcept -> bool {
        handle = h;
        home = waiter_home::here();
        stop = stop_of(h);
        if (stop != nullptr) {
            if (!stop->try_add(this)) {
                st.store(wait_cancelled, std::memory_order_relaxed);
                return false;
            }
            registered = true;
        }
        return true;
    }

    /// After resumption (or when not suspending): unregisters the stop callback, waiting for it
    /// if it runs concurrently on another thread (after this the awaiter may be destroyed).
    void end() noexcept {
        if (registered) {
            stop->remove(this);
            registered = false;
        }
    }

    std::atomic<int> st{wait_pending};
    std::coroutine_handle<> handle;
    waiter_home home;  // where the waiter suspended
    stop_state* stop = nullptr;
    bool registered = false;

private:
    const bool one_lock_;
};

struct wait_list;

/// A waiter's entry in one primitive's FIFO list. All fields are guarded by that primitive's
/// lock. A node taken off a list by a waker is reused as a link of that waker's wake_chain.
struct wait_node {
    wait_node* prev = nullptr;
    wait_node* next = nullptr;
    wait_sync* sync = nullptr;
    wait_list* owner = nullptr;  // the list it is linked in, or nullptr
    int index = 0;               // the outcome it claims its sync with
};

/// An intrusive FIFO of wait_nodes; guarded by its primitive's lock.
struct wait_list {
    wait_node* head = nullptr;
    wait_node* tail = nullptr;

    [[nodiscard]] auto empty() const noexcept -> bool { return head == nullptr; }
    void push_back(wait_node* n) noexcept {
        n->owner = this;
        n->next = nullptr;
        n->prev = tail;
        if (tail != nullptr) {
            tail->next = n;
        } else {
            head = n;
        }
        tail = n;
    }
    void remove(wait_node* n) noexcept {
        if (n->prev != nullptr) {
            n->prev->next = n->next;
        } else {
            head = n->next;
        }
        if (n->next != nullptr) {
            n->next->prev = n->prev;
        } else {
            tail = n->prev;
        }
        n->prev = n->next = nullptr;
        n->owner = nullptr;
    }
    auto pop_front() noexcept -> wait_node* {
        wait_node* n = head;
        if (n != nullptr) {
            remove(n);
        }
        return n;
    }
    /// The first node whose sync can be claimed, claimed and unlinked; stale nodes (of a select
    /// that another case already decided, or cancelled) are unlinked on the way.
    auto claim_front() noexcept -> wait_node* {
        while (wait_node* n = pop_front()) {
            if (n->sync->try_claim(n->index)) {
                return n;
            }
        }
        return nullptr;
    }
};

/// Claimed waiters to resume once the lock is released (never resume under a lock: the woken
/// task may run right here, or a thief may run it and touch the primitive at once).
struct wake_chain {
    wait_node* head = nullptr;

    void add(wait_node* n) noexcept {
        n->next = head;
        head = n;
    }
    void resume_all() {
        wait_node* n = head;
        head = nullptr;
        while (n != nullptr) {
            // Copy out before resuming: the node lives in the woken frame.
            wait_node* next = n->next;
            std::coroutine_handle<> h = n->sync->handle;
            const waiter_home home = n->sync->home;
            resume_waiter(h, home);
            n = next;
        }
    }
};

/// The awaiter skeleton of the single-lock primitives (mutex, semaphore, event, latch,
/// wait_group): `Op` derives from it and provides `try_now()`, called with the lock held, which
/// takes what the waiter waits for if it is available now. A waiter whose stop is requested
/// leaves the list and resumes with `finish() == false`; a waiter that was granted before the
/// stop callback got the lock keeps what it was granted.
template <typename Op>
class prim_wait : public wait_sync {
public:
    prim_wait(spin_lock& mu, wait_list& list) noexcept
        : wait_sync(&prim_wait::on_stop, /*one_lock=*/true), mu_(&mu), list_(&list) {
        node_.sync = this;
    }
    prim_wait(const prim_wait&) = delete;
    auto operator=(const prim_wait&) -> prim_wait& = delete;

    auto await_ready() noexcept -> bool {
        std::lock_guard lock(*mu_);
        if (static_cast<Op*>(this)->try_now()) {
            st.store(0, std::memory_order_relaxed);
            return true;
        }
        return false;
    }

    template <typename P>
    WEFT_PUBLISHES_HANDLE auto await_suspend(std::coroutine_handle<P> h) noexcept -> bool {
        if (!begin(h)) {
            return false;
        }
        spin_lock* mu = mu_;
        mu->lock();
        if (st.load(std::memory_order_relaxed) != wait_pending) {  // stopped after try_add
            mu->unlock();
            return false;
        }
        if (static_cast<Op*>(this)->try_now()) {
            st.store(0, std::memory_order_relaxed);
            mu->unlock();
            return false;
        }
        if constexpr (requires { Op::waits_on; }) {
            tag_.set(h, Op::waits_on);
        }
        list_->push_back(&node_);
        // NOTE: from here a waker may resume us on another thread: only the local copy of mu.
        mu->unlock();
        return true;
    }

protected:
    /// In await_resume: true if granted, false if cancelled.
    [[nodiscard]] auto finish() noexcept -> bool {
        tag_.clear();
        end();
        return st.load(std::memory_order_acquire) != wait_cancelled;
    }

private:
    static void on_stop(stop_callback_node* n) noexcept {
        auto* self = static_cast<prim_wait*>(n);
        spin_lock* mu = self->mu_;
        mu->lock();
        if (!self->try_claim(wait_cancelled)) {
            mu->unlock();  // granted first: the waker resumes it
            return;
        }
        const bool suspended = self->node_.owner != nullptr;
        if (suspended) {
            self->list_->remove(&self->node_);
        }
        std::coroutine_handle<> h = self->handle;
        const waiter_home home = self->home;
        mu->unlock();
        if (suspended) {
            resume_waiter(h, home);
        }
    }

    spin_lock* mu_;
    wait_list* list_;
    wait_node node_;
    wait_tag tag_;  // runtime::dump, for an Op that names what it waits on (waits_on)
};

}  // namespace weft::detail
