#pragma once

#include <cassert>
#include <coroutine>
#include <cstddef>
#include <mutex>

#include "weft/core/detail/spin_lock.hpp"
#include "weft/core/result.hpp"
#include "weft/sync/detail/waiter.hpp"

namespace weft {

/// A counting semaphore for tasks. `acquire` takes one unit, waiting (suspended) while there is
/// none; `release(n)` hands units to waiters first, FIFO, then adds the rest to the count. No
/// barging: a try_acquire does not overtake waiters. Any thread. Must outlive its waiters.
///
///     weft::semaphore slots{4};
///     if (auto r = co_await slots.acquire(); !r) co_return;   // operation_canceled
///     ...; slots.release();
class semaphore {
public:
    explicit semaphore(std::ptrdiff_t initial) noexcept : count_(initial) { assert(initial >= 0); }
    semaphore(const semaphore&) = delete;
    auto operator=(const semaphore&) -> semaphore& = delete;
    ~semaphore() = default;

    class [[nodiscard]] acquire_awaiter : public detail::prim_wait<acquire_awaiter> {
    public:
        explicit acquire_awaiter(semaphore& s) noexcept : prim_wait(s.mu_, s.waiters_), s_(&s) {}
        auto try_now() noexcept -> bool {
            if (s_->count_ == 0) {
                return false;
            }
            --s_->count_;
            return true;
        }
        auto await_resume() noexcept -> result<void> {
            if (finish()) {
                return {};
            }
            return std::errc::operation_canceled;
        }

    private:
        semaphore* s_;
    };

    /// `co_await s.acquire()` -> result<void>.
    auto acquire() noexcept -> acquire_awaiter { return acquire_awaiter{*this}; }

    [[nodiscard]] auto try_acquire() noexcept -> bool {
        std::lock_guard lock(mu_);
        if (count_ == 0) {
            return false;
        }
        --count_;
        return true;
    }

    void release(std::ptrdiff_t n = 1) {
        assert(n >= 0);
        detail::wake_chain woken;
        {
            std::lock_guard lock(mu_);
            while (n > 0) {
                detail::wait_node* w = waiters_.claim_front();
                if (w == nullptr) {
                    break;
                }
                woken.add(w);
                --n;
            }
            count_ += n;
        }
        woken.resume_all();
    }

    /// Units available now (a snapshot).
    [[nodiscard]] auto available() const noexcept -> std::ptrdiff_t {
        std::lock_guard lock(mu_);
        return count_;
    }

private:
    mutable detail::spin_lock mu_;
    std::ptrdiff_t count_;       // guarded by mu_; > 0 => no waiters
    detail::wait_list waiters_;  // guarded by mu_
};

}  // namespace weft
