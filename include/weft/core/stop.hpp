#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

namespace weft {

class stop_state;

namespace detail {

/// An intrusive callback node registered with a stop_state; lives inside the awaiter or scope
/// that registered it, so registration never allocates.
struct stop_callback_node {
    using fn_type = void (*)(stop_callback_node*) noexcept;
    explicit stop_callback_node(fn_type f) noexcept : fn(f) {}

    fn_type fn;
    stop_callback_node* prev = nullptr;
    stop_callback_node* next = nullptr;
    // Set by the invoking thread when the callback has returned; a remover on another thread
    // waits for it (release here pairs with the acquire load in stop_state::remove).
    std::atomic<bool> done{false};
    // Points at a flag on the invoking thread's stack while the callback runs, so a callback
    // that removes itself does not wait for itself.
    bool* removed_during_call = nullptr;
};

}  // namespace detail

/// A cancellation source: `request_stop()` once, observed through `stop_requested()` and by
/// callbacks. Every task carries a pointer to the stop_state of its scope; scopes, when_all,
/// when_any and with_timeout each own one linked to their parent's. Thread-safe: any thread may
/// request stop or (de)register callbacks. A callback runs on the thread that requests stop (or
/// never); `remove` of a callback that is running on another thread waits for it to return, so
/// after `remove` the node may be destroyed (the std::stop_callback contract).
///
///     weft::stop_state s;
///     s.request_stop();      // wakes every sleeper, channel waiter, IO op registered on s
class stop_state {
public:
    stop_state() = default;
    stop_state(const stop_state&) = delete;
    auto operator=(const stop_state&) -> stop_state& = delete;
    ~stop_state() = default;

    [[nodiscard]] auto stop_requested() const noexcept -> bool {
        // acquire pairs with the release in request_stop: what the requester wrote before
        // asking is visible to whoever observes the request.
        return (word_.load(std::memory_order_acquire) & requested_bit) != 0;
    }

    /// Returns true if this call made the request (false if it was already requested).
    auto request_stop() noexcept -> bool;

    /// Registers `n`. Returns false, without registering or calling it, if stop was already
    /// requested: the caller then handles cancellation itself (it is still on its own thread,
    /// holding its own handle; nothing has been handed to another thread).
    [[nodiscard]] auto try_add(detail::stop_callback_node* n) noexcept -> bool;

    /// Unregisters `n` if it is registered; if it is running on another thread, waits until it
    /// returned. Safe to call whether or not `n` was added or already invoked.
    void remove(detail::stop_callback_node* n) noexcept;

private:
    // word_ states: bit 0 = stop requested (never cleared), bit 1 = list locked.
    static constexpr std::uint32_t requested_bit = 1;
    static constexpr std::uint32_t locked_bit = 2;

    auto lock() noexcept -> std::uint32_t;  // returns the word with the lock held
    void unlock() noexcept;

    std::atomic<std::uint32_t> word_{0};
    detail::stop_callback_node* head_ = nullptr;     // guarded by locked_bit
    detail::stop_callback_node* running_ = nullptr;  // guarded by locked_bit
    std::thread::id running_thread_;                 // guarded by locked_bit
};

/// A stop_state that also stops when its parent does. Used for every scope-like group.
class linked_stop_state : public stop_state {
public:
    explicit linked_stop_state(stop_state* parent) noexcept : parent_(parent), link_(this) {
        if (parent_ != nullptr && !parent_->try_add(&link_)) {
            request_stop();
            parent_ = nullptr;
        }
    }
    linked_stop_state(const linked_stop_state&) = delete;
    auto operator=(const linked_stop_state&) -> linked_stop_state& = delete;
    ~linked_stop_state() {
        if (parent_ != nullptr) {
            parent_->remove(&link_);
        }
    }

private:
    static void on_parent_stop(detail::stop_callback_node* n) noexcept;
    struct link_node : detail::stop_callback_node {
        explicit link_node(linked_stop_state* s) noexcept
            : stop_callback_node(&linked_stop_state::on_parent_stop), self(s) {}
        linked_stop_state* self;
    };
    stop_state* parent_;
    link_node link_;
};

/// What a task sees of its cancellation: `co_await weft::get_stop_token()`.
class stop_token {
public:
    stop_token() = default;
    explicit stop_token(const stop_state* s) noexcept : s_(s) {}
    [[nodiscard]] auto stop_requested() const noexcept -> bool {
        return s_ != nullptr && s_->stop_requested();
    }
    [[nodiscard]] auto stop_possible() const noexcept -> bool { return s_ != nullptr; }

private:
    const stop_state* s_ = nullptr;
};

/// An RAII callback registration: `fn()` runs (once) when `s` is stopped while this object
/// lives; if `s` is already stopped at construction, `fn()` runs at once on this thread.
template <typename Fn>
class stop_callback : private detail::stop_callback_node {
public:
    stop_callback(stop_state* s, Fn fn)
        : stop_callback_node(&stop_callback::invoke), s_(s), fn_(std::move(fn)) {
        if (s_ != nullptr && !s_->try_add(this)) {
            s_ = nullptr;
            fn_();
        }
    }
    stop_callback(const stop_callback&) = delete;
    auto operator=(const stop_callback&) -> stop_callback& = delete;
    ~stop_callback() {
        if (s_ != nullptr) {
            s_->remove(this);
        }
    }

private:
    static void invoke(detail::stop_callback_node* n) noexcept {
        static_cast<stop_callback*>(n)->fn_();
    }
    stop_state* s_;
    Fn fn_;
};

}  // namespace weft
