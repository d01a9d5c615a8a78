#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <system_error>
#include <utility>

#include "weft/core/result.hpp"
#include "weft/core/task.hpp"
#include "weft/sched/timer.hpp"
#include "weft/sync/channel.hpp"
#include "weft/sync/detail/biased_lock.hpp"
#include "weft/sync/detail/waiter.hpp"

namespace weft {

namespace detail {

/// One operation of a select, type-erased over the channel's item type. Every member except
/// the constructor is called with the channel's lock held.
class select_case {
public:
    select_case() = default;
    select_case(const select_case&) = delete;
    auto operator=(const select_case&) -> select_case& = delete;

    [[nodiscard]] virtual auto lock_ref() const noexcept -> biased_lock& = 0;
    /// Performs the operation if it can complete now (item or space available, or closed).
    virtual auto try_now(wake_chain& woken) -> bool = 0;
    /// Parks this case's node in the channel, claiming `sync` with `index` when it completes.
    virtual void park(wait_sync* sync, int index) noexcept = 0;
    /// Unlinks the node if it is still parked (another case won, or cancellation).
    void unpark() noexcept {
        if (wait_node* n = node(); n->owner != nullptr) {
            n->owner->remove(n);
        }
    }

protected:
    ~select_case() = default;
    virtual auto node() noexcept -> wait_node* = 0;
};

/// The channel members select needs (private to channel: select is their only other user).
/// Every function but lock_of is called with the channel's lock held.
struct channel_access {
    template <typename T>
    [[nodiscard]] static auto lock_of(channel<T>& ch) noexcept -> biased_lock& {
        return ch.mu_;
    }
    template <typename T>
    static auto recv_locked(channel<T>& ch, std::optional<T>& out, wake_chain& woken)
        -> chan_status {
        return ch.recv_locked(out, woken);
    }
    template <typename T>
    static auto send_locked(channel<T>& ch, T& v, wake_chain& woken) -> chan_status {
        return ch.send_locked(v, woken);
    }
    template <typename T>
    static void park_receiver(channel<T>& ch, chan_node<T>& n) noexcept {
        ch.park_receiver(n);
    }
    template <typename T>
    static void park_sender(channel<T>& ch, chan_node<T>& n) noexcept {
        ch.park_sender(n);
    }
};

/// A small per-thread generator for select's random start index (fairness, not security).
inline auto select_random() noexcept -> std::uint32_t {
    thread_local std::uint32_t s =
        0x9E3779B9U ^ static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(&s));
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    return s;
}

}  // namespace detail

/// A receive case of `select`: `weft::recv_case<int> a{ch};` After the select returned this
/// case's index, `a.result()` holds the item or `closed`.
template <typename T>
class recv_case final : public detail::select_case {
public:
    explicit recv_case(channel<T>& ch) noexcept : ch_(&ch) { node_.recv_slot = &value_; }

    /// The outcome, once the select chose this case: the item, or `closed`.
    [[nodiscard]] auto result() -> weft::result<T> {
        if (value_) {
            return std::move(*value_);
        }
        return make_error_code(sync_errc::closed);
    }

    [[nodiscard]] auto lock_ref() const noexcept -> detail::biased_lock& override {
        return detail::channel_access::lock_of(*ch_);
    }
    auto try_now(detail::wake_chain& woken) -> bool override {
        const auto s = detail::channel_access::recv_locked(*ch_, value_, woken);
        node_.closed = s == detail::chan_status::closed;
        return s != detail::chan_status::blocked;
    }
    void park(detail::wait_sync* sync, int index) noexcept override {
        node_.sync = sync;
        node_.index = index;
        detail::channel_access::park_receiver(*ch_, node_);
    }

private:
    auto node() noexcept -> detail::wait_node* override { return &node_; }
    channel<T>* ch_;
    detail::chan_node<T> node_;
    std::optional<T> value_;
};

/// A send case of `select`: `weft::send_case<int> b{ch, 42};` The item is delivered only if the
/// select returns this case's index (and `b.result()` is then ok, or `closed`).
template <typename T>
class send_case final : public detail::select_case {
public:
    send_case(channel<T>& ch, T v) noexcept(std::is_nothrow_move_constructible_v<T>)
        : ch_(&ch), value_(std::move(v)) {
        node_.send_value = &value_;
    }

    [[nodiscard]] auto result() const noexcept -> weft::result<void> {
        if (node_.closed) {
            return make_error_code(sync_errc::closed);
        }
        return {};
    }

    [[nodiscard]] auto lock_ref() const noexcept -> detail::biased_lock& override {
        return detail::channel_access::lock_of(*ch_);
    }
    auto try_now(detail::wake_chain& woken) -> bool override {
        const auto s = detail::channel_access::send_locked(*ch_, value_, woken);
        node_.closed = s == detail::chan_status::closed;
        return s != detail::chan_status::blocked;
    }
    void park(detail::wait_sync* sync, int index) noexcept override {
        node_.sync = sync;
        node_.index = index;
        detail::channel_access::park_sender(*ch_, node_);
    }

private:
    auto node() noexcept -> detail::wait_node* override { return &node_; }
    channel<T>* ch_;
    detail::chan_node<T> node_;
    T value_;
};

/// The awaiter of `select`; see there.
///
/// Protocol: await_suspend takes the locks of all the cases' channels (in address order, each
/// once: wakers take one channel lock at a time, so there is no cycle), tries the cases from a
/// random start, and if none can complete parks one node per case, all claiming the same
/// wait_sync, before releasing the locks. A waker on any channel claims the sync (CAS) and
/// completes only its own case; nodes of the other cases become stale, skipped and unlinked by
/// later wakers or by await_resume (which takes every lock again before the frame may go). The
/// stop callback takes all the locks too, so it sees the nodes either all parked or none.
template <std::size_t N>
class [[nodiscard]] select_awaiter : private detail::wait_sync {
public:
    explicit select_awaiter(std::array<detail::select_case*, N> cases) noexcept
        : wait_sync(&select_awaiter::on_stop), cases_(cases) {
        for (std::size_t i = 0; i < N; ++i) {
            locks_[i] = &cases_[i]->lock_ref();
        }
        std::sort(locks_.begin(), locks_.end());
        nlocks_ =
            static_cast<std::size_t>(std::unique(locks_.begin(), locks_.end()) - locks_.begin());
    }
    select_awaiter(const select_awaiter&) = delete;
    auto operator=(const select_awaiter&) -> select_awaiter& = delete;

    auto await_ready() const noexcept -> bool { return false; }

    template <typename P>
    WEFT_PUBLISHES_HANDLE auto await_suspend(std::coroutine_handle<P> h) -> bool {
        if (!begin(h)) {
            return false;
        }
        // Locals: after the nodes are parked and the first lock released, a waker may resume
        // this coroutine (and free this awaiter) on another thread.
        const std::array<detail::biased_lock*, N> locks = locks_;
        const std::size_t nlocks = nlocks_;
        lock_all(locks, nlocks);
        if (st.load(std::memory_order_relaxed) != detail::wait_pending) {  // stopped meanwhile
            unlock_all(locks, nlocks);
            return false;
        }
        const std::size_t start = N == 1 ? 0 : detail::select_random() % N;
        detail::wake_chain woken;
        for (std::size_t k = 0; k < N; ++k) {
            const std::size_t i = (start + k) % N;
            if (cases_[i]->try_now(woken)) {
                // Nobody else can claim us: no node is parked and we hold every lock the stop
                // callback needs.
                st.store(static_cast<int>(i), std::memory_order_relaxed);
                unlock_all(locks, nlocks);
                woken.resume_all();
                return false;
            }
        }
        for (std::size_t i = 0; i < N; ++i) {
            cases_[i]->park(this, static_cast<int>(i));
        }
        parked_ = true;
        unlock_all(locks, nlocks);
        return true;
    }

    /// The index of the case that completed, or `operation_canceled`.
    auto await_resume() -> result<std::size_t> {
        end();
        if (parked_) {
            lock_all(locks_, nlocks_);
            for (auto* c : cases_) {
                c->unpark();
            }
            unlock_all(locks_, nlocks_);
        }
        const int s = st.load(std::memory_order_acquire);
        if (s == detail::wait_cancelled) {
            return std::errc::operation_canceled;
        }
        return static_cast<std::size_t>(s);
    }

private:
    static void lock_all(const std::array<detail::biased_lock*, N>& locks, std::size_t n) noexcept {
        for (std::size_t i = 0; i < n; ++i) {
            locks[i]->lock();
        }
    }
    static void unlock_all(const std::array<detail::biased_lock*, N>& locks,
                           std::size_t n) noexcept {
        for (std::size_t i = n; i-- > 0;) {
            locks[i]->unlock();
        }
    }

    static void on_stop(detail::stop_callback_node* n) noexcept {
        auto* self = static_cast<select_awaiter*>(n);
        const std::array<detail::biased_lock*, N> locks = self->locks_;
        const std::size_t nlocks = self->nlocks_;
        lock_all(locks, nlocks);
        if (!self->try_claim(detail::wait_cancelled)) {
            unlock_all(locks, nlocks);  // a case completed first; its waker resumes us
            return;
        }
        const bool parked = self->parked_;
        if (parked) {
            for (auto* c : self->cases_) {
                c->unpark();
            }
        }
        std::coroutine_handle<> h = self->handle;
        const detail::waiter_home home = self->home;
        unlock_all(locks, nlocks);
        if (parked) {
            detail::resume_waiter(h, home);
        }
    }

    std::array<detail::select_case*, N> cases_;
    std::array<detail::biased_lock*, N> locks_{};  // sorted, the first nlocks_ distinct
    std::size_t nlocks_ = 0;
    bool parked_ = false;  // written under all the locks
};

/// Waits until one of several channel operations completes, performs exactly that one and
/// returns its index (`result<std::size_t>`; `operation_canceled` when the task is cancelled
/// first). The others do not happen: no item is taken or delivered by a case that was not
/// chosen. Among cases ready at once, the start is random, so none starves. A case on a closed
/// channel is ready (its result() is `closed`).
///
///     weft::recv_case<int> a{ch1};
///     weft::send_case<int> b{ch2, 42};
///     auto r = co_await weft::select(a, b);
///     if (r && *r == 0) use(a.result());
///
/// Cases are single-use and must not be shared by concurrent selects.
template <typename... Cases>
    requires(std::derived_from<Cases, detail::select_case> && ...)
[[nodiscard]] auto select(Cases&... cases) noexcept -> select_awaiter<sizeof...(Cases)> {
    static_assert(sizeof...(Cases) >= 1, "weft::select needs at least one case");
    return select_awaiter<sizeof...(Cases)>{{static_cast<detail::select_case*>(&cases)...}};
}

namespace detail {
template <typename... Cases>
[[gnu::noinline]] auto select_task(Cases&... cases) -> task<result<std::size_t>> {
    co_return co_await select(cases...);
}
}  // namespace detail

/// `select` with a timeout: `timed_out` when no case completed within `d` (none then happened).
/// Needs a runtime worker.
///
///     auto r = co_await weft::select_for(10ms, a, b);   // r.error() == std::errc::timed_out
template <typename Rep, typename Period, typename... Cases>
    requires(std::derived_from<Cases, detail::select_case> && ...)
[[nodiscard, gnu::noinline]] auto select_for(std::chrono::duration<Rep, Period> d, Cases&... cases)
    -> task<result<std::size_t>> {
    auto r = co_await with_timeout(d, detail::select_task(cases...));
    if (!r) {
        co_return r.error();
    }
    co_return std::move(*r);
}

}  // namespace weft
