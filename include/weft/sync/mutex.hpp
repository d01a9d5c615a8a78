#pragma once

#include <coroutine>
#include <mutex>
#include <utility>

#include "weft/core/detail/spin_lock.hpp"
#include "weft/core/result.hpp"
#include "weft/sync/detail/waiter.hpp"

namespace weft {

/// An asynchronous mutex: a task that waits for it suspends instead of blocking its worker.
/// Fair: unlock hands the mutex straight to the longest waiter (no barging). Any thread may
/// lock and unlock (the holder need not be the task that locked). Must outlive its waiters.
///
///     weft::mutex m;
///     auto g = co_await m.lock();      // result<mutex::guard>; operation_canceled if stopped
///     if (!g) co_return;
///     ...                              // unlocked when g goes out of scope
class mutex {
public:
    mutex() = default;
    mutex(const mutex&) = delete;
    auto operator=(const mutex&) -> mutex& = delete;
    ~mutex() = default;

    /// Owns the lock; unlocks on destruction. Move-only.
    class [[nodiscard]] guard {
    public:
        explicit guard(mutex& m) noexcept : m_(&m) {}
        guard(guard&& o) noexcept : m_(std::exchange(o.m_, nullptr)) {}
        auto operator=(guard&& o) noexcept -> guard& {
            if (this != &o) {
                unlock();
                m_ = std::exchange(o.m_, nullptr);
            }
            return *this;
        }
        ~guard() { unlock(); }
        void unlock() {
            if (m_ != nullptr) {
                std::exchange(m_, nullptr)->unlock();
            }
        }

    private:
        mutex* m_;
    };

    class [[nodiscard]] lock_awaiter : public detail::prim_wait<lock_awaiter> {
    public:
        explicit lock_awaiter(mutex& m) noexcept : prim_wait(m.mu_, m.waiters_), m_(&m) {}
        auto try_now() noexcept -> bool {
            if (m_->locked_) {
                return false;
            }
            m_->locked_ = true;
            return true;
        }
        auto await_resume() noexcept -> result<guard> {
            if (finish()) {
                return guard{*m_};
            }
            return std::errc::operation_canceled;
        }

    private:
        mutex* m_;
    };

    /// `co_await m.lock()` -> result<guard>.
    auto lock() noexcept -> lock_awaiter { return lock_awaiter{*this}; }

    /// Takes the lock if it is free (pair with unlock(), or wrap: `mutex::guard g{m}`).
    [[nodiscard]] auto try_lock() noexcept -> bool {
        std::lock_guard lock(mu_);
        if (locked_) {
            return false;
        }
        locked_ = true;
        return true;
    }

    /// Releases the lock, to the first waiter if there is one.
    void unlock() {
        detail::wake_chain woken;
        {
            std::lock_guard lock(mu_);
            if (detail::wait_node* n = waiters_.claim_front()) {
                woken.add(n);  // ownership passes on: locked_ stays true
            } else {
                locked_ = false;
            }
        }
        woken.resume_all();
    }

private:
    detail::spin_lock mu_;
    bool locked_ = false;        // guarded by mu_
    detail::wait_list waiters_;  // guarded by mu_; nonempty => locked_
};

}  // namespace weft
