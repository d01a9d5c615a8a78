#include "weft/sync/detail/waiter.hpp"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <stdexcept>
#include <thread>

#include "weft/sync/detail/biased_lock.hpp"

namespace weft::detail {

// Out of line on purpose: see current_worker() in core/detail/worker_base.hpp. Being out of line
// (in this file, never inlined into a coroutine body) is also what lets these functions read
// tl_worker_unsafe_in_coroutines directly: each call runs on one thread from start to end, so
// its read is current (one call less per operation than going through current_worker()).

void resume_waiter(std::coroutine_handle<> h, worker_base* home) {
    if (worker_base* w = tl_worker_unsafe_in_coroutines; w != nullptr) {
        w->wake(h);  // the LIFO slot: the woken partner runs next, on this core
    } else if (home != nullptr) {
        home->schedule_remote(h);
    } else {
        h.resume();
    }
}

void yield_waiter(std::coroutine_handle<> h) {
    worker_base* w = tl_worker_unsafe_in_coroutines;
    if (w == nullptr) {
        throw std::logic_error("weft::sync: yield without a weft executor");
    }
    w->yield_turn(h);
}

auto this_thread_ids() noexcept -> thread_ids {
    return thread_ids{this_thread_lock_id(), tl_worker_unsafe_in_coroutines};
}

auto consume_budget() noexcept -> bool {
    worker_base* w = tl_worker_unsafe_in_coroutines;
    return w != nullptr && w->consume_budget();
}

// ---- biased_lock ---------------------------------------------------------------------------

namespace {

// relaxed: ids only need to be distinct.
std::atomic<std::uintptr_t> next_lock_id{2};
thread_local std::uintptr_t tl_lock_id = 0;

/// Registers the process for private expedited membarrier once; false if the kernel (or a
/// seccomp filter) refuses, and then no lock is ever biased.
auto membarrier_ready() noexcept -> bool {
#if defined(WEFT_NO_BIASED_LOCK)
    return false;  // escape hatch (and A/B measurements): never bias
#elif defined(WEFT_BIASED_LOCK_SEQ_CST)
    return true;  // the seq_cst protocol needs no membarrier
#else
    static const bool ok =
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
    return ok;
#endif
}

// Registered while the process is (almost always) still single-threaded: the kernel then only
// sets a flag. Registering later, with other threads running, waits for an RCU grace period:
// 12 ms here, spent inside the first lock that biases, with every other worker spinning on it
// (a 12-20 ms stall in the first pass of every benchmark that uses a channel on 2 workers).
[[maybe_unused]] const bool membarrier_registered_early = membarrier_ready();

/// A full memory barrier on every thread of the process that is running now (the owner's
/// missing StoreLoad fence).
void process_wide_fence() noexcept {
#if defined(WEFT_BIASED_LOCK_SEQ_CST)
    std::atomic_thread_fence(std::memory_order_seq_cst);
#else
    // Registered before anything was biased, so this succeeds, except in a child after fork()
    // (a new mm starts unregistered): register again, or fall back to the slow global barrier.
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0) {
        return;
    }
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 &&
        syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0) {
        return;
    }
    (void)syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0);
#endif
}

}  // namespace

auto this_thread_lock_id() noexcept -> std::uintptr_t {
    std::uintptr_t id = tl_lock_id;
    if (id == 0) {
        id = next_lock_id.fetch_add(1, std::memory_order_relaxed);
        tl_lock_id = id;
    }
    return id;
}

void biased_lock::lock_slow() noexcept {
    inner_.lock();
    // owner_ only changes under inner_, so relaxed reads it exactly.
    const std::uintptr_t o = owner_.load(std::memory_order_relaxed);
    if (o == never_biased) {
        return;
    }
    const std::uintptr_t me = this_thread_lock_id();
    if (o == undecided) {
        if (candidate_ == 0 || candidate_ == me) {
            candidate_ = me;
            if (++streak_ >= bias_after && membarrier_ready()) {
                // Published to our own later fast path (same thread) and, by inner_'s release,
                // to the next thread that takes inner_ (which will then revoke).
                owner_.store(me, std::memory_order_relaxed);
            }
        } else {
            owner_.store(never_biased, std::memory_order_relaxed);  // shared before biased
        }
        return;
    }
    if (o == me) {
        return;  // unreachable (our fast path only fails once revoked); inner_ is enough
    }
    // Biased towards another thread: revoke (see the class comment for why this excludes).
#if defined(WEFT_BIASED_LOCK_SEQ_CST)
    owner_.store(never_biased, std::memory_order_seq_cst);
#else
    owner_.store(never_biased, std::memory_order_relaxed);
#endif
    process_wide_fence();
    // seq_cst (for the TSan protocol; acquire is what matters here): pairs with the owner's
    // release in unlock, so its last critical section happens-before ours.
    // The owner may have been preempted inside its critical section: spin_wait ends in yields.
    for (spin_wait backoff; owner_busy_.load(std::memory_order_seq_cst);) {
        backoff.once();
    }
}

}  // namespace weft::detail
