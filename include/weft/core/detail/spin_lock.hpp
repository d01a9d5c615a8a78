#pragma once

#include <atomic>

#include "weft/core/detail/shuffle.hpp"
#include "weft/core/detail/spin_wait.hpp"

namespace weft::detail {

/// The lock of every weft::sync object, of each epoll socket's readiness state (weft::io) and of
/// each memory_broker topic (weft::bus; there a section now and then allocates).
/// Critical sections are a handful of pointer moves (never a resumption, never a user callback;
/// allocation only when an unbounded ring grows, a system call only when a socket first
/// registers with an epoll), so a test-and-test-and-set lock beats a futex mutex: an
/// uncontended lock/unlock pair is one atomic exchange and one plain store (a pthread mutex pays
/// a second RMW on unlock, and a call each way). A waiter backs off as detail::spin_wait says.
class spin_lock {
public:
    spin_lock() = default;
    spin_lock(const spin_lock&) = delete;
    auto operator=(const spin_lock&) -> spin_lock& = delete;

    void lock() noexcept {
        // acquire pairs with the release in unlock: the previous holder's edits are visible.
        // WEFT_SHUFFLE builds: now and then the first attempt fails as if contended.
        if (!WEFT_SHUFFLED(8) && !locked_.exchange(true, std::memory_order_acquire)) {
            return;
        }
        lock_slow();
    }
    [[nodiscard]] auto try_lock() noexcept -> bool {
        return !locked_.load(std::memory_order_relaxed) &&
               !locked_.exchange(true, std::memory_order_acquire);
    }
    void unlock() noexcept { locked_.store(false, std::memory_order_release); }

private:
    void lock_slow() noexcept {
        spin_wait backoff;
        for (;;) {
            // Test before test-and-set: spinning on a shared line, not bouncing it exclusively.
            while (locked_.load(std::memory_order_relaxed)) {
                backoff.once();
            }
            if (!locked_.exchange(true, std::memory_order_acquire)) {
                return;
            }
        }
    }

    std::atomic<bool> locked_{false};
};

}  // namespace weft::detail
