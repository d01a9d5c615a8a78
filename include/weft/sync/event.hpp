#pragma once

#include <coroutine>
#include <mutex>

#include "weft/core/detail/spin_lock.hpp"
#include "weft/core/result.hpp"
#include "weft/sync/detail/waiter.hpp"

namespace weft {

/// A signal tasks wait for. Manual reset: `set()` releases every waiter and stays set (later
/// waits complete at once) until `reset()`. Auto reset: `set()` releases exactly one waiter (the
/// longest waiting), or, when none waits, stays set until one wait consumes it. Any thread.
/// Must outlive its waiters.
///
///     weft::event ready;                               // manual reset
///     auto r = co_await ready.wait();                  // result<void>
///     ready.set();                                     // from any task or thread
class event {
public:
    enum class reset_mode : unsigned char { manual, automatic };

    explicit event(reset_mode mode = reset_mode::manual, bool initially_set = false) noexcept
        : mode_(mode), set_(initially_set) {}
    event(const event&) = delete;
    auto operator=(const event&) -> event& = delete;
    ~event() = default;

    class [[nodiscard]] wait_awaiter : public detail::prim_wait<wait_awaiter> {
    public:
        static constexpr wait_kind waits_on = wait_kind::event;  // runtime::dump
        explicit wait_awaiter(event& e) noexcept : prim_wait(e.mu_, e.waiters_), e_(&e) {}
        auto try_now() noexcept -> bool {
            if (!e_->set_) {
                return false;
            }
            if (e_->mode_ == reset_mode::automatic) {
                e_->set_ = false;
            }
            return true;
        }
        auto await_resume() noexcept -> result<void> {
            if (finish()) {
                return {};
            }
            return std::errc::operation_canceled;
        }

    private:
        event* e_;
    };

    /// `co_await e.wait()` -> result<void> (operation_canceled when the task is stopped).
    auto wait() noexcept -> wait_awaiter { return wait_awaiter{*this}; }

    void set() {
        detail::wake_chain woken;
        {
            std::lock_guard lock(mu_);
            if (mode_ == reset_mode::manual) {
                set_ = true;
                while (detail::wait_node* n = waiters_.claim_front()) {
                    woken.add(n);
                }
            } else if (detail::wait_node* n = waiters_.claim_front()) {
                woken.add(n);  // consumed by this waiter: stays unset
            } else {
                set_ = true;
            }
        }
        woken.resume_all();
    }

    void reset() noexcept {
        std::lock_guard lock(mu_);
        set_ = false;
    }

    [[nodiscard]] auto is_set() const noexcept -> bool {
        std::lock_guard lock(mu_);
        return set_;
    }

private:
    mutable detail::spin_lock mu_;
    const reset_mode mode_;
    bool set_;                   // guarded by mu_; set_ => no waiters
    detail::wait_list waiters_;  // guarded by mu_
};

}  // namespace weft
