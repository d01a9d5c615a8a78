#pragma once

#include <atomic>
#include <bit>
#include <concepts>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <memory>
#include <memory_resource>
#include <new>
#include <optional>
#include <source_location>
#include <type_traits>
#include <utility>

#include "weft/core/detail/task_registry.hpp"
#include "weft/core/detail/worker_base.hpp"
#include "weft/core/frame_allocator.hpp"
#include "weft/core/stop.hpp"

namespace weft {

template <typename T = void>
class task;

// promise_base::origin_ holds one (bit 0 clear: it points to a struct of pointers).
static_assert(sizeof(std::source_location) == sizeof(std::uintptr_t) &&
              std::is_trivially_copyable_v<std::source_location>);
template <typename T>
class join_handle;

namespace detail {

/// How a finished task hands control on. Set before the task first runs, never changed after.
enum class task_mode : std::uint8_t {
    awaited,          ///< `co_await t` in a weft coroutine: resume it (symmetric transfer)
    awaited_foreign,  ///< `co_await t` in a coroutine of another kind: the same, but the dump
                      ///< does not walk past it (its promise is not a promise_base)
    forked,           ///< `co_await fork(t)`: the parent sits in the worker's deque; pop it back
    forked_sync,      ///< fork on a thread with no worker: child ran first, parent resumes after
    spawned,          ///< `spawn(t)`: complete the join word; resume a joiner if one waits
    scoped,           ///< `scope.spawn(t)`: report to the scope, then free the frame
};

/// The join word of forked and spawned tasks. States:
///   join_running (0)  - running, nobody waits
///   join_done (1)     - finished; result ready; the join_handle frees the frame
///   join_detached (2) - handle dropped; the task frees its own frame when it finishes
///   any other value   - the frame address of the coroutine waiting in co_await join_handle
inline constexpr std::uintptr_t join_running = 0;
inline constexpr std::uintptr_t join_done = 1;
inline constexpr std::uintptr_t join_detached = 2;

class scope_base {
public:
    /// A child finished (with `error` or not); returns who runs next (the joiner or noop).
    virtual auto child_done(std::exception_ptr error) noexcept -> std::coroutine_handle<> = 0;

protected:
    ~scope_base() = default;
};

/// Everything a weft coroutine carries besides its result. 56 bytes.
class promise_base {
public:
    static auto operator new(std::size_t n) -> void* { return allocate_frame(n, nullptr); }
    template <typename... Args>
    static auto operator new(std::size_t n,
                             std::allocator_arg_t,
                             std::pmr::memory_resource* r,
                             Args&&...) -> void* {
        return allocate_frame(n, r);
    }
    template <typename Self, typename... Args>
    static auto operator new(
        std::size_t n, Self&, std::allocator_arg_t, std::pmr::memory_resource* r, Args&&...)
        -> void* {
        return allocate_frame(n, r);
    }
    static void operator delete(void* p, std::size_t n) noexcept { deallocate_frame(p, n); }

    auto initial_suspend() noexcept -> std::suspend_always { return {}; }
    void unhandled_exception() noexcept {
        ::new (static_cast<void*>(exception_storage_)) std::exception_ptr(std::current_exception());
        extras_ |= has_exception;
    }

    struct final_awaiter {
        auto await_ready() noexcept -> bool { return false; }
        template <typename P>
        WEFT_PUBLISHES_HANDLE auto await_suspend(std::coroutine_handle<P> self) noexcept
            -> std::coroutine_handle<> {
            return self.promise().complete(self);
        }
        void await_resume() noexcept {}
    };
    auto final_suspend() noexcept -> final_awaiter { return {}; }

    stop_state* stop_ = nullptr;
    std::coroutine_handle<> continuation_;
    std::atomic<std::uintptr_t> join_{join_running};
    scope_base* scope_ = nullptr;
    /// Where the task came from, for runtime::dump(), in one word: 0 for a coroutine that is
    /// only awaited; a task_record* | 1 for a task spawned on a runtime (owned: the record is
    /// closed when the frame is freed); else the std::source_location (bit_cast) of a fork, or
    /// of a spawn on an executor that keeps no records.
    std::uintptr_t origin_ = 0;
    task_mode mode_ = task_mode::awaited;

    [[nodiscard]] auto record() const noexcept -> task_record* {
        return (origin_ & 1) != 0 ? reinterpret_cast<task_record*>(origin_ - 1) : nullptr;
    }
    [[nodiscard]] auto site() const noexcept -> std::source_location {
        if (task_record* r = record()) {
            return r->site.load(std::memory_order_relaxed);
        }
        return std::bit_cast<std::source_location>(origin_);
    }
    void set_site(std::source_location s) noexcept { origin_ = std::bit_cast<std::uintptr_t>(s); }
    void set_record(task_record* r) noexcept {
        origin_ = reinterpret_cast<std::uintptr_t>(r) | 1;
        extras_ |= has_record;
    }

    promise_base() noexcept = default;
    promise_base(const promise_base&) = delete;
    auto operator=(const promise_base&) -> promise_base& = delete;
    ~promise_base() {
        if (extras_ != 0) [[unlikely]] {
            if ((extras_ & has_exception) != 0) {
                exception_ref().~exception_ptr();
            }
            if ((extras_ & has_record) != 0) {
                task_registry::close(record());
            }
        }
    }

    /// Rethrows the stored exception, if the coroutine ended with one.
    void rethrow_if_failed() {
        if ((extras_ & has_exception) != 0) {
            std::rethrow_exception(exception_ref());
        }
    }
    /// The stored exception (moved out), or null.
    auto take_exception() noexcept -> std::exception_ptr {
        return (extras_ & has_exception) != 0 ? std::move(exception_ref()) : std::exception_ptr{};
    }

protected:
    // The two modes of the fork-join fast path are handled inline, with no register saved; the
    // others (a scoped child holds an exception_ptr across a call) go to complete_other.
    auto complete(std::coroutine_handle<> self) noexcept -> std::coroutine_handle<> {
        if (mode_ == task_mode::forked) {
            // complete() runs inside final_awaiter::await_suspend, which is never inlined into
            // a coroutine: the direct thread_local read is current.
            if (worker_base* w = tl_worker_unsafe_in_coroutines;
                w != nullptr && w->pop_if(continuation_.address())) {
                // Nobody stole the parent, so it has not run since the fork: no other thread
                // can look at join_ yet.
                join_.store(join_done, std::memory_order_relaxed);
                return continuation_;
            }
            return finish_join(self);
        }
        if (mode_ == task_mode::awaited || mode_ == task_mode::awaited_foreign) {
            return continuation_ ? continuation_ : std::noop_coroutine();
        }
        return complete_other(self);
    }

    [[gnu::noinline]] auto complete_other(std::coroutine_handle<> self) noexcept
        -> std::coroutine_handle<> {
        switch (mode_) {
            case task_mode::forked_sync:
                join_.store(join_done, std::memory_order_relaxed);
                return continuation_;
            case task_mode::spawned:
                return finish_join(self);
            case task_mode::scoped: {
                scope_base* s = scope_;
                std::exception_ptr e = take_exception();
                self.destroy();
                return s->child_done(std::move(e));
            }
            case task_mode::awaited:
            case task_mode::awaited_foreign:
            case task_mode::forked:
                break;  // complete() took these
        }
        return std::noop_coroutine();
    }

private:
    auto exception_ref() noexcept -> std::exception_ptr& {
        return *std::launder(reinterpret_cast<std::exception_ptr*>(exception_storage_));
    }

    // Beside mode_ (one padded word for both). One byte for both flags, so that a frame with
    // neither (nearly all) pays one test when it is freed.
    static constexpr std::uint8_t has_exception = 1;
    static constexpr std::uint8_t has_record = 2;  // origin_ holds a record, closed at the free
    std::uint8_t extras_ = 0;
    // The exception lives in raw storage, constructed only when there is one: std::exception_ptr's
    // destructor is an out-of-line library call, and every frame would pay it on destruction.
    alignas(std::exception_ptr) unsigned char exception_storage_[sizeof(std::exception_ptr)];

    // Out of line and cold: the fork-join fast path around it stays as small as before.
    [[gnu::noinline, gnu::cold]] void finish_detached(std::coroutine_handle<> self) noexcept {
        if ((extras_ & has_exception) != 0) {
            report_detached_failure(take_exception());
        }
        self.destroy();
    }
    friend void destroy_unjoined(std::coroutine_handle<> self, promise_base& p) noexcept;

    // Out of line: the fork fast path in complete() then saves no register.
    [[gnu::noinline]] auto finish_join(std::coroutine_handle<> self) noexcept
        -> std::coroutine_handle<> {
        if (task_record* r = record()) {
            r->done.store(true, std::memory_order_relaxed);
        }
        // acq_rel: release publishes the result to the joiner; acquire sees the joiner's frame
        // (or the handle's detach) before we resume or free.
        const std::uintptr_t prev = join_.exchange(join_done, std::memory_order_acq_rel);
        if (prev == join_running) {
            return std::noop_coroutine();
        }
        if (prev == join_detached) {
            finish_detached(self);
            return std::noop_coroutine();
        }
        return std::coroutine_handle<>::from_address(reinterpret_cast<void*>(prev));
    }
};

/// A finished task whose handle is dropped without a join: reports its failure, if any, and
/// frees it. Out of line and cold (every fork's handle is destroyed, almost always joined).
[[gnu::noinline, gnu::cold]] inline void destroy_unjoined(std::coroutine_handle<> self,
                                                          promise_base& p) noexcept {
    p.finish_detached(self);
}
template <typename P>
void destroy_unjoined(std::coroutine_handle<P> h) noexcept {
    destroy_unjoined(h, h.promise());
}

template <typename P>
inline constexpr bool is_weft_promise = std::derived_from<P, promise_base>;

/// A task about to be queued by a spawn on worker `w`: its site, and a dump record when `w`
/// keeps them.
inline void record_spawn(
    worker_base& w, promise_base& p, void* frame, std::source_location site, const char* name) {
    if (task_registry* r = w.registry()) {
        p.set_record(r->open(frame, site, name));
    } else {
        p.set_site(site);
    }
}

/// The stop_state of the coroutine suspending with `h`: its task's, or nullptr for a coroutine
/// that is not a weft task (it cannot be cancelled). What every cancellable awaiter registers on.
template <typename P>
[[nodiscard]] auto stop_of(std::coroutine_handle<P> h) noexcept -> stop_state* {
    if constexpr (is_weft_promise<P>) {
        return h.promise().stop_;
    } else {
        return nullptr;
    }
}

template <typename T>
class task_promise : public promise_base {
public:
    auto get_return_object() noexcept -> task<T>;
    template <typename U>
        requires std::convertible_to<U&&, T>
    void return_value(U&& v) {
        value_.emplace(std::forward<U>(v));
    }
    auto result() -> T {
        rethrow_if_failed();
        return std::move(*value_);
    }

private:
    std::optional<T> value_;
};

template <typename T>
class task_promise<T&> : public promise_base {
public:
    auto get_return_object() noexcept -> task<T&>;
    void return_value(T& v) noexcept { value_ = std::addressof(v); }
    auto result() -> T& {
        rethrow_if_failed();
        return *value_;
    }

private:
    T* value_ = nullptr;
};

template <>
class task_promise<void> : public promise_base {
public:
    auto get_return_object() noexcept -> task<void>;
    void return_void() noexcept {}
    void result() { rethrow_if_failed(); }
};

template <typename T>
using task_handle = std::coroutine_handle<task_promise<T>>;

/// co_await detail::current_stop(): the stop_state of the awaiting weft coroutine.
struct current_stop {
    stop_state* s = nullptr;
    auto await_ready() noexcept -> bool { return false; }
    template <typename P>
    auto await_suspend(std::coroutine_handle<P> h) noexcept -> bool {
        s = stop_of(h);
        return false;
    }
    auto await_resume() noexcept -> stop_state* { return s; }
};

}  // namespace detail

/// A lazy, move-only coroutine returning `T` (or `T&`, or nothing). Nothing runs until it is
/// awaited, forked, spawned or passed to sync_wait / runtime::block_on. Awaiting it is a
/// symmetric transfer (no stack growth, no scheduling): the awaiting coroutine resumes as soon
/// as it finishes, with its value or its exception rethrown. A task inherits the cancellation
/// (stop_state) of whoever awaits it.
///
///     weft::task<int> answer() { co_return 42; }
///     weft::task<> caller() { int v = co_await answer(); }
///
/// Frames come from a per-thread recycling cache; to use a std::pmr::memory_resource instead,
/// make the coroutine's first parameters `std::allocator_arg_t, std::pmr::memory_resource*`.
template <typename T>
class [[nodiscard]] task {
public:
    using promise_type = detail::task_promise<T>;
    using value_type = T;

    task() noexcept = default;
    explicit task(detail::task_handle<T> h) noexcept : h_(h) {}
    task(task&& o) noexcept : h_(std::exchange(o.h_, {})) {}
    auto operator=(task&& o) noexcept -> task& {
        if (this != &o) {
            reset();
            h_ = std::exchange(o.h_, {});
        }
        return *this;
    }
    ~task() { reset(); }

    [[nodiscard]] auto valid() const noexcept -> bool { return static_cast<bool>(h_); }

    struct awaiter {
        detail::task_handle<T> h;
        auto await_ready() noexcept -> bool { return false; }
        template <typename P>
        auto await_suspend(std::coroutine_handle<P> parent) noexcept -> std::coroutine_handle<> {
            auto& p = h.promise();
            p.continuation_ = parent;
            if constexpr (detail::is_weft_promise<P>) {
                if (p.stop_ == nullptr) {
                    p.stop_ = parent.promise().stop_;
                }
            } else {
                p.mode_ = detail::task_mode::awaited_foreign;
            }
            if constexpr (WEFT_SHUFFLE_BUILD) {
                // shuffle.hpp: now and then the child starts later (queued), as if the parent
                // had been preempted between the call and the await.
                if (WEFT_SHUFFLED(16)) {
                    if (detail::worker_base* w = detail::current_worker(); w != nullptr) {
                        w->push(h);
                        return std::noop_coroutine();
                    }
                }
            }
            return h;
        }
        auto await_resume() -> T { return h.promise().result(); }
    };
    auto operator co_await() && noexcept -> awaiter { return awaiter{h_}; }
    auto operator co_await() & noexcept -> awaiter { return awaiter{h_}; }

    /// Gives up ownership of the frame (for executors and combinators).
    auto release() noexcept -> detail::task_handle<T> { return std::exchange(h_, {}); }
    [[nodiscard]] auto handle() const noexcept -> detail::task_handle<T> { return h_; }

private:
    void reset() noexcept {
        if (h_) {
            h_.destroy();
            h_ = {};
        }
    }
    detail::task_handle<T> h_;
};

namespace detail {
template <typename T>
auto task_promise<T>::get_return_object() noexcept -> task<T> {
    return task<T>{task_handle<T>::from_promise(*this)};
}
template <typename T>
auto task_promise<T&>::get_return_object() noexcept -> task<T&> {
    return task<T&>{task_handle<T&>::from_promise(*this)};
}
inline auto task_promise<void>::get_return_object() noexcept -> task<void> {
    return task<void>{task_handle<void>::from_promise(*this)};
}

/// Gives `t` an explicit stop_state (combinators use it for their children).
template <typename T>
void set_stop(task<T>& t, stop_state* s) noexcept {
    t.handle().promise().stop_ = s;
}
}  // namespace detail

namespace detail {
template <typename T>
struct is_task : std::false_type {};
template <typename T>
struct is_task<task<T>> : std::true_type {};

/// A callable that makes a task: `[&]() -> weft::task<int> { ... }`.
template <typename Fn>
concept task_factory = std::invocable<Fn&> && is_task<std::invoke_result_t<Fn&>>::value;

/// Keeps `fn` (a lambda and its captures) alive in this frame for as long as the task it makes
/// runs. NOTE: a coroutine lambda's captures live in the lambda object, not in the coroutine
/// frame: `spawn([&]() -> task<> {...}())` leaves the task with dangling captures once the
/// statement ends. Passing the lambda itself (`spawn([&]() -> task<> {...})`) routes it here.
template <typename Fn>
auto call_holding(Fn fn) -> std::invoke_result_t<Fn&> {
    co_return co_await fn();
}
}  // namespace detail

/// A spawned task's name in runtime::dump(): static storage (a string literal), read for as long
/// as the task lives. `weft::spawn(weft::task_name{"fetch"}, fetch(url))`.
struct task_name {
    const char* value = nullptr;
};

/// `co_await weft::get_stop_token()` inside a weft coroutine: its cancellation state.
struct get_stop_token {
    detail::current_stop inner;
    auto await_ready() noexcept -> bool { return false; }
    template <typename P>
    auto await_suspend(std::coroutine_handle<P> h) noexcept -> bool {
        return inner.await_suspend(h);
    }
    auto await_resume() noexcept -> stop_token { return stop_token{inner.s}; }
};

}  // namespace weft
