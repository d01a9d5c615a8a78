#pragma once

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <optional>
#include <source_location>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "weft/core/detail/wait_tag.hpp"
#include "weft/core/detail/worker_base.hpp"
#include "weft/core/join_handle.hpp"
#include "weft/core/task.hpp"

namespace weft {

/// A structured group of child tasks: obtained from `with_scope`, which returns only after every
/// child has finished. The first child to fail cancels its siblings (request_stop on the
/// scope's stop_state, linked to the caller's) and its exception is rethrown by `with_scope`.
/// `spawn` may be called from any coroutine that holds the scope, on a thread running a weft
/// executor; children go to that thread's worker queue (idle workers steal them).
///
///     co_await weft::with_scope([&](weft::scope& s) -> weft::task<> {
///         for (auto& c : conns) s.spawn(serve(c));
///         co_return;
///     });
class scope final : private detail::scope_base {
public:
    explicit scope(stop_state* parent) noexcept : stop_(parent) {}
    scope(const scope&) = delete;
    auto operator=(const scope&) -> scope& = delete;
    ~scope() = default;

    /// `site` (the caller's) and `name` are what runtime::dump() shows of the child.
    template <typename T>
    void spawn(task_name name,
               task<T> t,
               std::source_location site = std::source_location::current()) {
        detail::worker_base* w = detail::current_worker();
        if (w == nullptr) {
            throw std::logic_error("weft::scope::spawn: no weft executor on this thread");
        }
        auto h = t.release();
        auto& p = h.promise();
        if (p.stop_ == nullptr) {
            p.stop_ = &stop_;
        }
        p.mode_ = detail::task_mode::scoped;
        p.scope_ = this;
        detail::record_spawn(*w, p, h.address(), site, name.value);
        // relaxed: the child's eventual decrement is ordered after this by the push (release)
        // that publishes it.
        count_.fetch_add(1, std::memory_order_relaxed);
        w->push(h);
    }

    template <typename T>
    void spawn(task<T> t, std::source_location site = std::source_location::current()) {
        spawn(task_name{}, std::move(t), site);
    }

    /// `s.spawn([&]() -> weft::task<> {...})`: the lambda is kept alive with its task.
    template <detail::task_factory Fn>
    void spawn(Fn fn, std::source_location site = std::source_location::current()) {
        spawn(task_name{}, detail::call_holding(std::move(fn)), site);
    }
    template <detail::task_factory Fn>
    void spawn(task_name name, Fn fn, std::source_location site = std::source_location::current()) {
        spawn(name, detail::call_holding(std::move(fn)), site);
    }

    /// Cancels every child (and anything they await).
    void request_stop() noexcept { stop_.request_stop(); }
    [[nodiscard]] auto stop() noexcept -> stop_state& { return stop_; }

    /// Awaits every child. Called once, by with_scope.
    struct join_awaiter {
        scope* s;
        detail::wait_tag tag{};
        auto await_ready() noexcept -> bool {
            return s->count_.load(std::memory_order_acquire) == 1;
        }
        template <typename P>
        WEFT_PUBLISHES_HANDLE auto await_suspend(std::coroutine_handle<P> h) noexcept -> bool {
            tag.set(h, wait_kind::scope);
            s->joiner_ = h;
            // acq_rel: release publishes joiner_ to the last child; acquire sees the children's
            // writes (results, first_error_) when we are the last.
            return s->count_.fetch_sub(1, std::memory_order_acq_rel) != 1;
        }
        void await_resume() noexcept { tag.clear(); }
    };
    [[nodiscard]] auto join() noexcept -> join_awaiter { return join_awaiter{this}; }

    [[nodiscard]] auto first_error() const noexcept -> std::exception_ptr { return first_error_; }

private:
    auto child_done(std::exception_ptr error) noexcept -> std::coroutine_handle<> override {
        if (error && !failed_.exchange(true, std::memory_order_relaxed)) {
            first_error_ = std::move(error);  // published by the release in fetch_sub below
            stop_.request_stop();
        }
        if (count_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            return joiner_;
        }
        return std::noop_coroutine();
    }

    linked_stop_state stop_;
    // Outstanding children + 1 for the joiner (the +1 is dropped when join() suspends): the
    // party that brings it to 0 resumes the joiner.
    std::atomic<std::size_t> count_{1};
    std::coroutine_handle<> joiner_;
    std::atomic<bool> failed_{false};
    std::exception_ptr first_error_;
};

/// Runs `body(scope&)` and then waits for every child it spawned. The first failure (of the
/// body or of a child) cancels the rest and is rethrown once all have finished. Returns the
/// body's value.
///
/// NOTE: the body's local variables end when the body returns, before the children finish (a
/// coroutine destroys its locals at co_return). Whatever children share by reference must be
/// declared outside with_scope, in the enclosing coroutine, which outlives every child.
template <typename Fn>
auto with_scope(Fn body) -> task<typename std::invoke_result_t<Fn&, scope&>::value_type> {
    using R = typename std::invoke_result_t<Fn&, scope&>::value_type;
    stop_state* parent = co_await detail::current_stop{};
    scope s(parent);
    std::exception_ptr body_error;
    std::optional<std::conditional_t<std::is_void_v<R>, bool, R>> value;
    try {
        auto t = body(s);
        detail::set_stop(t, &s.stop());
        if constexpr (std::is_void_v<R>) {
            co_await std::move(t);
        } else {
            value.emplace(co_await std::move(t));
        }
    } catch (...) {
        body_error = std::current_exception();
        s.request_stop();
    }
    co_await s.join();
    if (body_error) {
        std::rethrow_exception(body_error);
    }
    if (auto e = s.first_error()) {
        std::rethrow_exception(e);
    }
    if constexpr (!std::is_void_v<R>) {
        co_return std::move(*value);
    }
}

}  // namespace weft
