#pragma once

#include <atomic>
#include <cstdint>

#include "weft/core/detail/spin_lock.hpp"

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WEFT_BIASED_LOCK_SEQ_CST 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define WEFT_BIASED_LOCK_SEQ_CST 1
#endif

namespace weft::detail {

/// A unique, never reused id of the calling thread (>= 2). Out of line on purpose: a
/// thread_local read inlined into a coroutine body may be reused after the coroutine moved to
/// another thread (see current_worker()).
[[nodiscard]] auto this_thread_lock_id() noexcept -> std::uintptr_t;

/// Test hook: while set, every membarrier(2) call fails with EPERM, as under a seccomp filter
/// that refuses it (a revocation then aborts; see biased_lock). Set it before starting the
/// threads that use the locks.
void simulate_membarrier_refusal_for_test(bool refuse) noexcept;

/// A spin_lock that a channel used by one thread only takes without any atomic read-modify-write
/// (an uncontended locked instruction costs several ns; a send+recv pair took two of them).
/// The channel's lock: same contract as spin_lock (lock/unlock, any thread).
///
/// Biasing (the JVM's biased locking, revoked with an asymmetric fence, as in folly's
/// AsymmetricMutex / liburcu):
/// - While the first `bias_after` acquisitions all come from one thread, they take the inner
///   spin_lock and count; the next one makes that thread the owner (owner_ = its id).
/// - The owner then locks by publishing `owner_busy_ = true` and re-reading owner_: two plain
///   stores and loads, ordered only by a compiler fence. Its unlock is a release store.
/// - Any other thread (or the first acquisition by a second thread before biasing) ends biasing
///   for good: under the inner lock it sets owner_ = never_biased, issues a process-wide memory
///   barrier (membarrier(2), a few µs, once per lock lifetime), then waits until owner_busy_ is
///   false. From then on everyone takes the inner lock.
/// Why this excludes (Dekker with one side's fence supplied by the other): the revoker's
/// barrier runs a full fence on the owner's thread at some point P. If the owner's
/// `owner_busy_ = true` came before P, the revoker reads it after membarrier returns and waits;
/// else the owner's re-read of owner_ comes after P and sees never_biased, and it backs off to
/// the inner lock. Where membarrier is unavailable (or with -DWEFT_NO_BIASED_LOCK) nothing is
/// ever biased; under TSan both sides use seq_cst instead (the C++-model Dekker TSan
/// understands; slower, same protocol). Should membarrier be refused after a lock was biased (a
/// seccomp filter installed later), the revoker cannot exclude the owner: the process aborts
/// with a message rather than run two threads in one critical section.
///
/// States of owner_: 0 = not decided (counting), 1 = never_biased, >= 2 = the owner's id.
/// Invariant: at most one thread is between lock and unlock: either it holds inner_, or it is
/// the owner with owner_busy_ set and owner_ == its id, never both for different threads.
class biased_lock {
public:
    /// Acquisitions by a single thread before the lock is biased towards it: a channel that
    /// is shared soon (a reply channel, a ping-pong) never pays for a revocation.
    static constexpr std::uint32_t bias_after = 64;

    biased_lock() = default;
    biased_lock(const biased_lock&) = delete;
    auto operator=(const biased_lock&) -> biased_lock& = delete;

    void lock() noexcept {
        // relaxed: a hint; the owner's own id (stored by itself) is the only value acted on
        // without the inner lock, and the protocol above re-checks it after owner_busy_.
        const std::uintptr_t o = owner_.load(std::memory_order_relaxed);
        if (o == never_biased) {  // final: a plain spin_lock from now on
            inner_.lock();
            return;
        }
        if (o >= first_thread_id && o == this_thread_lock_id() && lock_biased(o)) {
            return;
        }
        lock_slow();
    }
    /// lock(), for a caller that already holds this_thread_lock_id() (`me`): saves the call.
    void lock_as(std::uintptr_t me) noexcept {
        const std::uintptr_t o = owner_.load(std::memory_order_relaxed);  // as in lock()
        if (o == never_biased) {
            inner_.lock();
            return;
        }
        if (o == me && lock_biased(o)) {
            return;
        }
        lock_slow();
    }

    void unlock() noexcept {
        // held_biased_ is only touched by the holder (see the invariant).
        if (held_biased_) {
            held_biased_ = false;
            // release: the critical section happens-before a revoker's acquire of false.
            owner_busy_.store(false, std::memory_order_release);
            return;
        }
        inner_.unlock();
    }

private:
    static constexpr std::uintptr_t undecided = 0;
    static constexpr std::uintptr_t never_biased = 1;
    static constexpr std::uintptr_t first_thread_id = 2;

    auto lock_biased(std::uintptr_t me) noexcept -> bool {
#if defined(WEFT_BIASED_LOCK_SEQ_CST)
        owner_busy_.store(true, std::memory_order_seq_cst);
        const bool still_owner = owner_.load(std::memory_order_seq_cst) == me;
#else
        owner_busy_.store(true, std::memory_order_relaxed);
        // Compiler-only fence: the CPU-level StoreLoad fence is the revoker's membarrier.
        std::atomic_signal_fence(std::memory_order_seq_cst);
        // acquire (a plain load on x86): keeps the critical section's accesses after it.
        const bool still_owner = owner_.load(std::memory_order_acquire) == me;
#endif
        if (still_owner) {
            held_biased_ = true;
            return true;
        }
        owner_busy_.store(false, std::memory_order_release);  // revoked: use the inner lock
        return false;
    }

    /// The inner lock, plus counting towards a bias or revoking one.
    void lock_slow() noexcept;

    std::atomic<std::uintptr_t> owner_{undecided};
    std::atomic<bool> owner_busy_{false};
    bool held_biased_ = false;  // the holder took the biased path (holder only)
    spin_lock inner_;
    std::uint32_t streak_ = 0;      // guarded by inner_: acquisitions by candidate_ so far
    std::uintptr_t candidate_ = 0;  // guarded by inner_
};

}  // namespace weft::detail
