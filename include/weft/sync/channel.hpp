#pragma once

#include <chrono>
#include <coroutine>
#include <cstddef>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

#include "weft/core/detail/wait_tag.hpp"
#include "weft/core/result.hpp"
#include "weft/core/task.hpp"
#include "weft/sched/timer.hpp"
#include "weft/sync/detail/biased_lock.hpp"
#include "weft/sync/detail/ring.hpp"
#include "weft/sync/detail/waiter.hpp"
#include "weft/sync/errc.hpp"

namespace weft {

/// Tag for an unbounded channel: `weft::channel<int> ch{weft::unbounded};`
struct unbounded_t {
    explicit unbounded_t() = default;
};
inline constexpr unbounded_t unbounded{};

template <typename T>
class channel;

namespace detail {

/// What one parked send or recv (or one case of a select) leaves in a channel's waiter list.
/// Written by the party that claims its sync (under the channel lock), read by the waiter after
/// it resumes.
template <typename T>
struct chan_node : wait_node {
    T* send_value = nullptr;                // a sender's item, moved out by the claimer
    std::optional<T>* recv_slot = nullptr;  // a receiver's slot, filled by the claimer
    bool closed = false;                    // claimed by close(): the operation failed
};

enum class chan_status : unsigned char { done, closed, blocked };

/// select's way into a channel: the operations it performs under the channel's lock (which it
/// takes itself, together with the other cases' locks). Defined in select.hpp.
struct channel_access;

}  // namespace detail

/// A multi-producer multi-consumer channel between tasks on any workers: bounded
/// (`channel<T> ch{n}`, n >= 1: send waits while n items are buffered), rendezvous (`ch{0}`:
/// send waits for a receiver to take the item) or unbounded (`ch{weft::unbounded}`).
///
///     weft::channel<int> ch{16};
///     co_await ch.send(1);                  // result<void>: closed -> weft::sync_errc::closed
///     weft::result<int> v = co_await ch.recv();
///
/// - Any thread may call any member; waiting ones need a weft coroutine (a runtime worker for
///   recv_for). Waiters are served FIFO, per side.
/// - `close()`: senders (waiting and future) get `closed` at once and their items are not
///   delivered; receivers first drain what is buffered, then get `closed`. Every waiter wakes.
/// - Cancellation (the awaiting task's stop token) ends a waiting send or recv with
///   `operation_canceled`. It never loses or duplicates an item: a recv that was handed an item
///   concurrently with its cancellation returns the item; a cancelled send did not deliver.
/// - Lifetime: must outlive every operation on it (destroying it with waiters is a bug).
///
/// Design: one lock guards a ring buffer and two intrusive waiter lists. A lock-free ring
/// would make the uncontended path no cheaper (it needs an RMW per side too), and every blocking,
/// close, select and cancellation path would need its own lock-free protocol; the critical
/// sections here are a few pointer moves, so the lock is held for nanoseconds. The lock is a
/// detail::biased_lock: a channel used by one thread only takes it with no atomic RMW at all. An
/// operation takes it once, waiting or not: a send or recv that finds it must wait parks under
/// the acquisition that found it so (await_ready returns false with it held).
/// Invariants (under the lock, counting only live waiters, i.e. whose sync is still pending):
///   receivers waiting  =>  buffer empty
///   senders waiting    =>  buffer full (size == capacity; always, for rendezvous)
///   closed             =>  no senders waiting; receivers waiting only if buffer empty
template <typename T>
class channel {
    static constexpr std::size_t unbounded_capacity = std::numeric_limits<std::size_t>::max();

public:
    explicit channel(std::size_t capacity) noexcept : cap_(capacity) {}
    explicit channel(unbounded_t) noexcept : cap_(unbounded_capacity) {}
    channel(const channel&) = delete;
    auto operator=(const channel&) -> channel& = delete;
    ~channel() = default;

    class [[nodiscard]] send_awaiter;
    class [[nodiscard]] recv_awaiter;
    class [[nodiscard]] recv_batch_awaiter;

    /// `co_await ch.send(v)` -> result<void>: waits while the channel is full. The item is
    /// moved (or copied) into the awaiter once, here; no further copy until it is delivered.
    auto send(T&& v) noexcept(std::is_nothrow_move_constructible_v<T>) -> send_awaiter {
        return send_awaiter{*this, std::move(v)};
    }
    auto send(const T& v) noexcept(std::is_nothrow_copy_constructible_v<T>) -> send_awaiter {
        return send_awaiter{*this, v};
    }
    /// `co_await ch.recv()` -> result<T>: waits while the channel is empty and open.
    auto recv() noexcept -> recv_awaiter { return recv_awaiter{*this}; }

    /// Sends without waiting; `v` is moved from only on success. Errors:
    /// `std::errc::operation_would_block` (full, or rendezvous with no receiver) or `closed`.
    [[nodiscard]] auto try_send(T&& v) -> result<void> { return try_send_ref(v); }
    [[nodiscard]] auto try_send(const T& v) -> result<void> {
        T copy(v);
        return try_send_ref(copy);
    }

    /// Receives without waiting. Errors: `operation_would_block` (empty), `closed` (closed and
    /// drained).
    [[nodiscard]] auto try_recv() -> result<T> {
        std::optional<T> out;
        const auto s = recv_or_stay_locked(out, detail::this_thread_lock_id());
        if (s == detail::chan_status::done) {
            return std::move(*out);
        }
        if (s == detail::chan_status::closed) {
            return make_error_code(sync_errc::closed);
        }
        mu_.unlock();
        return std::errc::operation_would_block;
    }

    /// `co_await ch.recv_for(d)` -> result<T>: like recv, or `timed_out` after `d`. An item that
    /// arrives as the deadline passes is returned, not dropped. Needs a runtime worker.
    // NOTE (all coroutine members here): noinline keeps the frame allocation (a thread_local
    // free list) out of the caller's coroutine body, where the compiler may reuse a
    // thread_local address computed before the caller migrated to another worker.
    template <typename Rep, typename Period>
    [[nodiscard, gnu::noinline]] auto recv_for(std::chrono::duration<Rep, Period> d)
        -> task<result<T>> {
        auto r = co_await with_timeout(d, recv_task());
        if (!r) {
            co_return r.error();
        }
        co_return std::move(*r);
    }

    /// `co_await ch.recv_batch(out, max)` -> result<std::size_t>: appends up to `max` (>= 1)
    /// items to `out`, all that are ready at once; waits only when none is. `closed` once the
    /// channel is closed and drained.
    auto recv_batch(std::vector<T>& out, std::size_t max) noexcept -> recv_batch_awaiter {
        return recv_batch_awaiter{*this, out, max == 0 ? 1 : max};
    }

    /// Closes the channel (idempotent); see the class comment. Any thread.
    void close() {
        detail::wake_chain woken;
        {
            std::lock_guard lock(mu_);
            if (closed_) {
                return;
            }
            closed_ = true;
            // Live receivers exist only while the buffer is empty: they all get `closed`.
            for (auto* list : {&senders_, &receivers_}) {
                while (detail::wait_node* n = list->claim_front()) {
                    static_cast<detail::chan_node<T>*>(n)->closed = true;
                    woken.add(n);
                }
            }
        }
        woken.resume_all();
    }

    [[nodiscard]] auto is_closed() const noexcept -> bool {
        std::lock_guard lock(mu_);
        return closed_;
    }
    /// Items buffered now (a snapshot).
    [[nodiscard]] auto size() const noexcept -> std::size_t {
        std::lock_guard lock(mu_);
        return buf_.size();
    }
    /// The capacity; SIZE_MAX for an unbounded channel.
    [[nodiscard]] auto capacity() const noexcept -> std::size_t { return cap_; }

private:
    friend struct detail::channel_access;

    // ---- what select uses, through detail::channel_access (callers hold mu_) ----------------

    /// Takes one item: from the buffer (refilling it from the first live sender) or, for
    /// rendezvous, straight from a sender. Woken senders go to `woken`.
    auto recv_locked(std::optional<T>& out, detail::wake_chain& woken) -> detail::chan_status {
        if (!buf_.empty()) {
            buf_.pop_front_into(out);
            if (detail::wait_node* n = senders_.claim_front()) {
                buf_.push_back(std::move(*static_cast<detail::chan_node<T>*>(n)->send_value));
                woken.add(n);
            }
            return detail::chan_status::done;
        }
        if (detail::wait_node* n = senders_.claim_front()) {
            out.emplace(std::move(*static_cast<detail::chan_node<T>*>(n)->send_value));
            woken.add(n);
            return detail::chan_status::done;
        }
        return closed_ ? detail::chan_status::closed : detail::chan_status::blocked;
    }

    /// Delivers `v` (moved from only on done): to the first live receiver, else into the buffer.
    auto send_locked(T& v, detail::wake_chain& woken) -> detail::chan_status {
        if (closed_) {
            return detail::chan_status::closed;
        }
        if (detail::wait_node* n = receivers_.claim_front()) {
            static_cast<detail::chan_node<T>*>(n)->recv_slot->emplace(std::move(v));
            woken.add(n);
            return detail::chan_status::done;
        }
        if (buf_.size() < cap_) {
            buf_.push_back(std::move(v));
            return detail::chan_status::done;
        }
        return detail::chan_status::blocked;
    }

    void park_receiver(detail::chan_node<T>& n) noexcept { receivers_.push_back(&n); }
    void park_sender(detail::chan_node<T>& n) noexcept { senders_.push_back(&n); }

    /// One send attempt: done or closed (the lock released, whom it served woken), or blocked
    /// WITH mu_ STILL HELD, so that a send that must wait parks under the same lock acquisition
    /// that saw it blocked (one locked instruction per operation, waiting or not).
    /// Inline when no receiver is parked: the outcome is then decided by closed_ and the buffer
    /// alone (closed, buffered without waking anyone, or blocked). A parked receiver to hand to,
    /// or a ring that must grow (allocation), is send_slow.
    /// `me`: this_thread_lock_id().
    auto send_or_stay_locked(T& v, std::uintptr_t me) -> detail::chan_status {
        mu_.lock_as(me);
        if (receivers_.empty()) {
            if (closed_) {
                mu_.unlock();
                return detail::chan_status::closed;
            }
            if (buf_.size() >= cap_) {
                return detail::chan_status::blocked;  // still locked
            }
            if (!buf_.has_free_slot()) {
                return send_slow(v);
            }
            buf_.push_back_no_grow(std::move(v));
            mu_.unlock();
            return detail::chan_status::done;
        }
        return send_slow(v);
    }
    /// Called with mu_ held; releases it unless blocked.
    [[gnu::noinline]] auto send_slow(T& v) -> detail::chan_status {
        detail::wake_chain woken;
        const auto s = send_locked(v, woken);
        if (s == detail::chan_status::blocked) {
            return s;  // still locked; every receiver it met was stale, so none to wake
        }
        mu_.unlock();
        woken.resume_all();
        return s;
    }
    /// One receive attempt: done or closed (the lock released, whom it served woken), or
    /// blocked with mu_ still held (see send_or_stay_locked). Inline when no sender is parked:
    /// the buffer and closed_ alone decide. A parked sender (to refill the freed slot or,
    /// rendezvous, to take from) is recv_slow.
    auto recv_or_stay_locked(std::optional<T>& out, std::uintptr_t me) -> detail::chan_status {
        mu_.lock_as(me);
        if (senders_.empty()) {
            if (!buf_.empty()) {
                buf_.pop_front_into(out);
                mu_.unlock();
                return detail::chan_status::done;
            }
            if (closed_) {
                mu_.unlock();
                return detail::chan_status::closed;
            }
            return detail::chan_status::blocked;  // still locked
        }
        return recv_slow(out);
    }
    /// Called with mu_ held; releases it unless blocked.
    [[gnu::noinline]] auto recv_slow(std::optional<T>& out) -> detail::chan_status {
        detail::wake_chain woken;
        const auto s = recv_locked(out, woken);
        if (s == detail::chan_status::blocked) {
            return s;  // still locked; every sender it met was stale, so none to wake
        }
        mu_.unlock();
        woken.resume_all();
        return s;
    }

    auto try_send_ref(T& v) -> result<void> {
        const auto s = send_or_stay_locked(v, detail::this_thread_lock_id());
        if (s == detail::chan_status::done) {
            return {};
        }
        if (s == detail::chan_status::closed) {
            return make_error_code(sync_errc::closed);
        }
        mu_.unlock();
        return std::errc::operation_would_block;
    }
    [[gnu::noinline]] auto recv_task() -> task<result<T>> { co_return co_await recv(); }

    /// Common part of send and recv awaiters. The fast path (await_ready completes the
    /// operation) touches only ch_, the item and closed_; the waiting state (the wait_sync, the
    /// node, the stop callback) is built by await_suspend, when the operation may wait, so an
    /// operation that never waits does not pay for initialising it.
    class op_base {
    protected:
        explicit op_base(channel& ch) noexcept : ch_(&ch) {}

        /// What a waiting operation links into the channel (lives in the awaiter, so in the
        /// awaiting frame: waiting never allocates).
        struct wait_state : detail::wait_sync {
            explicit wait_state(op_base& o) noexcept
                : wait_sync(&op_base::on_stop, /*one_lock=*/true), op(&o) {
                node.sync = this;
            }
            op_base* op;
            detail::chan_node<T> node;
            detail::wait_tag tag;  // runtime::dump: waiting on a channel
        };

        /// The fast path has completed the operation: yield if the turn's budget is spent (a
        /// task looping on a never-empty channel still lets the others run).
        auto ready_after_fast_path(detail::chan_status s, detail::worker_base* w) noexcept -> bool {
            closed_ = s == detail::chan_status::closed;
            if (w != nullptr && w->consume_budget()) {
                yield_ = true;
                return false;
            }
            return true;
        }
        /// Builds the waiting state (once, in await_suspend).
        auto start_waiting() noexcept -> wait_state& {
            waiting_ = true;
            return *std::construct_at(&ws_, *this);
        }
        /// await_suspend of a send or recv, entered with the channel lock held (await_ready saw
        /// the operation blocked), or after a fast path that spent the turn (yield_, unlocked):
        /// yields, or builds the waiting state (`fill` points the node at the item), registers
        /// for stop and links the node (`park`) under that same lock acquisition. The stop
        /// callback, should it fire at once on another thread, waits for the lock and so finds
        /// the node parked. NOTE: call only from a WEFT_PUBLISHES_HANDLE await_suspend (begin
        /// reads the worker thread_local).
        template <typename P, typename Fill, typename Park>
        auto suspend_locked(std::coroutine_handle<P> h, Fill fill, Park park) -> bool {
            if (yield_) {
                detail::yield_waiter(h);
                return true;
            }
            detail::biased_lock& mu = ch_->mu_;
            auto& ws = start_waiting();
            fill(ws.node);
            if (!ws.begin(h)) {
                mu.unlock();
                return false;
            }
            ws.tag.set(h, wait_kind::channel);
            park(ws.node);
            // NOTE: from here the other side may resume us on another thread: locals only.
            mu.unlock();
            return true;
        }
        /// In await_resume: unregisters the stop callback if await_suspend registered one.
        void finish_waiting() noexcept {
            if (waiting_) {
                ws_.tag.clear();
                ws_.end();
            }
        }
        auto outcome_error() const noexcept -> std::error_code {
            if (!waiting_) {
                return closed_ ? make_error_code(sync_errc::closed) : std::error_code{};
            }
            if (ws_.st.load(std::memory_order_acquire) == detail::wait_cancelled) {
                return std::make_error_code(std::errc::operation_canceled);
            }
            return ws_.node.closed ? make_error_code(sync_errc::closed) : std::error_code{};
        }

        static void on_stop(detail::stop_callback_node* n) noexcept {
            auto* ws = static_cast<wait_state*>(n);
            detail::biased_lock& mu = ws->op->ch_->mu_;
            mu.lock();
            if (!ws->try_claim(detail::wait_cancelled)) {
                mu.unlock();  // completed first: its claimer resumes it
                return;
            }
            detail::wait_list* list = ws->node.owner;
            if (list != nullptr) {
                list->remove(&ws->node);
            }
            std::coroutine_handle<> h = ws->handle;
            const detail::waiter_home home = ws->home;
            mu.unlock();
            if (list != nullptr) {
                detail::resume_waiter(h, home);
            }
        }

        channel* ch_;
        bool closed_ = false;   // the fast path's outcome: the channel was closed
        bool yield_ = false;    // the fast path completed but the budget is spent
        bool waiting_ = false;  // ws_ is constructed
        union {
            wait_state ws_;  // trivially destructible: never destroyed explicitly
        };
    };

public:
    class [[nodiscard]] send_awaiter : private op_base {
    public:
        send_awaiter(channel& ch, T&& v) noexcept(std::is_nothrow_move_constructible_v<T>)
            : op_base(ch), value_(std::move(v)) {}
        send_awaiter(channel& ch, const T& v) noexcept(std::is_nothrow_copy_constructible_v<T>)
            : op_base(ch), value_(v) {}
        send_awaiter(const send_awaiter&) = delete;
        auto operator=(const send_awaiter&) -> send_awaiter& = delete;
        ~send_awaiter() = default;

        /// NOTE: returns false (blocked) with the channel lock held; await_suspend, which the
        /// language always calls next, parks under it or releases it.
        auto await_ready() -> bool {
            const detail::thread_ids self = detail::this_thread_ids();
            const auto s = this->ch_->send_or_stay_locked(value_, self.lock_id);
            if (s == detail::chan_status::blocked) {
                return false;
            }
            return this->ready_after_fast_path(s, self.worker);
        }
        template <typename P>
        WEFT_PUBLISHES_HANDLE auto await_suspend(std::coroutine_handle<P> h) -> bool {
            // Still under the lock that saw the channel full (the stop_state's lock inside the
            // channel's is the only nesting of the two: stop callbacks run without the
            // stop_state's lock and end() runs with no lock held).
            return this->suspend_locked(
                h, [this](detail::chan_node<T>& n) { n.send_value = &value_; },
                [this](detail::chan_node<T>& n) { this->ch_->park_sender(n); });
        }
        auto await_resume() noexcept -> result<void> {
            if (!this->waiting_ && !this->closed_) [[likely]] {
                return {};  // the fast path delivered it
            }
            return waited_outcome();
        }

    private:
        [[gnu::noinline]] auto waited_outcome() noexcept -> result<void> {
            this->finish_waiting();
            return this->outcome_error();
        }

        T value_;
    };

    class [[nodiscard]] recv_awaiter : protected op_base {
    public:
        explicit recv_awaiter(channel& ch) noexcept : op_base(ch) {}
        recv_awaiter(const recv_awaiter&) = delete;
        auto operator=(const recv_awaiter&) -> recv_awaiter& = delete;
        ~recv_awaiter() = default;

        /// NOTE: returns false (blocked) with the channel lock held, as send_awaiter's.
        auto await_ready() -> bool {
            const detail::thread_ids self = detail::this_thread_ids();
            const auto s = this->ch_->recv_or_stay_locked(value_, self.lock_id);
            if (s == detail::chan_status::blocked) {
                return false;
            }
            return this->ready_after_fast_path(s, self.worker);
        }
        template <typename P>
        WEFT_PUBLISHES_HANDLE auto await_suspend(std::coroutine_handle<P> h) -> bool {
            // Still under the lock that saw the channel empty.
            return this->suspend_locked(
                h, [this](detail::chan_node<T>& n) { n.recv_slot = &value_; },
                [this](detail::chan_node<T>& n) { this->ch_->park_receiver(n); });
        }
        auto await_resume() -> result<T> {
            if (!this->waiting_ && value_) [[likely]] {
                return std::move(*value_);  // the fast path took it
            }
            return waited_outcome();
        }

    protected:
        [[gnu::noinline]] auto waited_outcome() -> result<T> {
            this->finish_waiting();
            // An item handed over wins over a concurrent cancellation (the claim decided).
            if (value_) {
                return std::move(*value_);
            }
            return this->outcome_error();
        }

        std::optional<T> value_;
    };

    class [[nodiscard]] recv_batch_awaiter : private recv_awaiter {
    public:
        recv_batch_awaiter(channel& ch, std::vector<T>& out, std::size_t max) noexcept
            : recv_awaiter(ch), out_(&out), max_(max) {}

        using recv_awaiter::await_ready;
        using recv_awaiter::await_suspend;
        auto await_resume() -> result<std::size_t> {
            auto first = recv_awaiter::await_resume();
            if (!first) {
                return first.error();
            }
            out_->push_back(std::move(*first));
            std::size_t n = 1;
            detail::wake_chain woken;
            channel& ch = *this->ch_;
            {
                std::lock_guard lock(ch.mu_);
                std::optional<T> v;
                while (n < max_ && ch.recv_locked(v, woken) == detail::chan_status::done) {
                    out_->push_back(std::move(*v));
                    v.reset();
                    ++n;
                }
            }
            woken.resume_all();
            return n;
        }

    private:
        std::vector<T>* out_;
        std::size_t max_;
    };

private:
    mutable detail::biased_lock mu_;
    detail::ring<T> buf_;          // guarded by mu_
    detail::wait_list senders_;    // guarded by mu_; chan_node<T>s
    detail::wait_list receivers_;  // guarded by mu_; chan_node<T>s
    bool closed_ = false;          // guarded by mu_
    const std::size_t cap_;
};

}  // namespace weft
