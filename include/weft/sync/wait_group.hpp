#pragma once

#include <cassert>
#include <coroutine>
#include <cstddef>
#include <mutex>

#include "weft/core/detail/spin_lock.hpp"
#include "weft/core/result.hpp"
#include "weft/sync/detail/waiter.hpp"

namespace weft {

/// Go's sync.WaitGroup for tasks: `add(n)` before starting work, `done()` when a piece ends,
/// `co_await wait()` until the count is zero. Reusable: the count may go up again after reaching
/// zero. Any thread. Must outlive its waiters.
///
///     weft::wait_group wg;
///     for (auto& c : conns) { wg.add(); weft::spawn(serve(c, wg)).detach(); }   // each: wg.done()
///     co_await wg.wait();
class wait_group {
public:
    wait_group() = default;
    wait_group(const wait_group&) = delete;
    auto operator=(const wait_group&) -> wait_group& = delete;
    ~wait_group() = default;

    class [[nodiscard]] wait_awaiter : public detail::prim_wait<wait_awaiter> {
    public:
        explicit wait_awaiter(wait_group& g) noexcept : prim_wait(g.mu_, g.waiters_), g_(&g) {}
        auto try_now() const noexcept -> bool { return g_->count_ == 0; }
        auto await_resume() noexcept -> result<void> {
            if (finish()) {
                return {};
            }
            return std::errc::operation_canceled;
        }

    private:
        wait_group* g_;
    };

    /// Adds `n` (may be negative, as in Go; the count must not go below zero).
    void add(std::ptrdiff_t n = 1) {
        detail::wake_chain woken;
        {
            std::lock_guard lock(mu_);
            count_ += n;
            assert(count_ >= 0);
            if (count_ == 0) {
                while (detail::wait_node* w = waiters_.claim_front()) {
                    woken.add(w);
                }
            }
        }
        woken.resume_all();
    }
    void done() { add(-1); }

    [[nodiscard]] auto count() const noexcept -> std::ptrdiff_t {
        std::lock_guard lock(mu_);
        return count_;
    }

    /// `co_await wg.wait()` -> result<void> (operation_canceled when the task is stopped).
    auto wait() noexcept -> wait_awaiter { return wait_awaiter{*this}; }

private:
    mutable detail::spin_lock mu_;
    std::ptrdiff_t count_ = 0;   // guarded by mu_
    detail::wait_list waiters_;  // guarded by mu_; nonempty => count_ > 0
};

}  // namespace weft
