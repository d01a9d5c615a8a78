#include "weft/sync/detail/biased_lock.hpp"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "thread_lock_id.hpp"

namespace weft::detail {

constinit thread_local std::uintptr_t tl_lock_id = 0;

namespace {

// relaxed: ids only need to be distinct.
std::atomic<std::uintptr_t> next_lock_id{2};

// relaxed: a test sets it before the threads it starts (their start orders it).
std::atomic<bool> membarrier_refused_for_test{false};

[[maybe_unused]] auto membarrier(int cmd) noexcept -> long {
    if (membarrier_refused_for_test.load(std::memory_order_relaxed)) {
        errno = EPERM;
        return -1;
    }
    return syscall(SYS_membarrier, cmd, 0, 0);
}

/// Registers the process for private expedited membarrier once; false if the kernel (or a
/// seccomp filter) refuses, and then no lock is ever biased.
auto membarrier_ready() noexcept -> bool {
#if defined(WEFT_NO_BIASED_LOCK)
    return false;  // escape hatch (and A/B measurements): never bias
#elif defined(WEFT_BIASED_LOCK_SEQ_CST)
    return true;  // the seq_cst protocol needs no membarrier
#else
    static const bool ok = membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
    return ok;
#endif
}

// Registered while the process is (almost always) still single-threaded: the kernel then only
// sets a flag. Registering later, with other threads running, waits for an RCU grace period:
// 12 ms here, spent inside the first lock that biases, with every other worker spinning on it
// (a 12-20 ms stall in the first pass of every benchmark that uses a channel on 2 workers).
[[maybe_unused]] const bool membarrier_registered_early = membarrier_ready();

/// A full memory barrier on every thread of the process that is running now (the owner's
/// missing StoreLoad fence). A lock is biased only after registration succeeded, so this
/// succeeds, except in a child after fork() (a new mm starts unregistered: register again, or
/// fall back to the slow global barrier) or where a seccomp filter installed since then refuses
/// the call. Then the revoker cannot exclude the owner, which takes the lock with plain stores:
/// going on would let two threads into the critical section, so the process aborts instead.
void process_wide_fence() noexcept {
#if defined(WEFT_BIASED_LOCK_SEQ_CST)
    std::atomic_thread_fence(std::memory_order_seq_cst);
#else
    if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) {
        return;
    }
    if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0 &&
        membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) {
        return;
    }
    if (membarrier(MEMBARRIER_CMD_GLOBAL) == 0) {
        return;
    }
    const int err = errno;
    std::fprintf(stderr,
                 "weft: membarrier(2) refused (%s) while revoking a biased lock: the lock's "
                 "owner cannot be excluded, so mutual exclusion would be lost; aborting. "
                 "(Allow membarrier in the seccomp policy, or build with "
                 "-DWEFT_NO_BIASED_LOCK.)\n",
                 std::strerror(err));
    std::fflush(stderr);
    std::abort();
#endif
}

}  // namespace

void simulate_membarrier_refusal_for_test(bool refuse) noexcept {
    membarrier_refused_for_test.store(refuse, std::memory_order_relaxed);
}

auto assign_thread_lock_id() noexcept -> std::uintptr_t {
    const std::uintptr_t id = next_lock_id.fetch_add(1, std::memory_order_relaxed);
    tl_lock_id = id;
    return id;
}

auto this_thread_lock_id() noexcept -> std::uintptr_t { return thread_lock_id_here(); }

void biased_lock::lock_slow() noexcept {
    inner_.lock();
    // owner_ only changes under inner_, so relaxed reads it exactly.
    const std::uintptr_t o = owner_.load(std::memory_order_relaxed);
    if (o == never_biased) {
        return;
    }
    const std::uintptr_t me = thread_lock_id_here();
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
