#pragma once

#include <cassert>
#include <coroutine>
#include <cstddef>
#include <mutex>

#include "weft/core/detail/spin_lock.hpp"
#include "weft/core/result.hpp"
#include "weft/sync/detail/waiter.hpp"

namespace weft {

/// A single-use countdown: `wait()` completes once `count_down` brought the count to zero
/// (std::latch for tasks). Any thread. Must outlive its waiters.
///
///     weft::latch done{3};
///     ... each of 3 tasks: done.count_down();
///     co_await done.wait();                    // result<void>
class latch {
public:
    explicit latch(std::ptrdiff_t expected) noexcept : count_(expected) { assert(expected >= 0); }
    latch(const latch&) = delete;
    auto operator=(const latch&) -> latch& = delete;
    ~latch() = default;

    class [[nodiscard]] wait_awaiter : public detail::prim_wait<wait_awaiter> {
    public:
        explicit wait_awaiter(latch& l) noexcept : prim_wait(l.mu_, l.waiters_), l_(&l) {}
        auto try_now() const noexcept -> bool { return l_->count_ == 0; }
        auto await_resume() noexcept -> result<void> {
            if (finish()) {
                return {};
            }
            return std::errc::operation_canceled;
        }

    private:
        latch* l_;
    };

    void count_down(std::ptrdiff_t n = 1) {
        detail::wake_chain woken;
        {
            std::lock_guard lock(mu_);
            assert(n >= 0 && n <= count_);
            count_ -= n;
            if (count_ == 0) {
                while (detail::wait_node* w = waiters_.claim_front()) {
                    woken.add(w);
                }
            }
        }
        woken.resume_all();
    }

    [[nodiscard]] auto try_wait() const noexcept -> bool {
        std::lock_guard lock(mu_);
        return count_ == 0;
    }

    /// `co_await l.wait()` -> result<void> (operation_canceled when the task is stopped).
    auto wait() noexcept -> wait_awaiter { return wait_awaiter{*this}; }

    /// count_down(n), then wait.
    auto arrive_and_wait(std::ptrdiff_t n = 1) -> wait_awaiter {
        count_down(n);
        return wait();
    }

private:
    mutable detail::spin_lock mu_;
    std::ptrdiff_t count_;       // guarded by mu_
    detail::wait_list waiters_;  // guarded by mu_; nonempty => count_ > 0
};

}  // namespace weft
