#pragma once

#include <atomic>
#include <coroutine>
#include <exception>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "weft/core/detail/worker_base.hpp"
#include "weft/core/task.hpp"

namespace weft {

/// Runs tasks on the calling thread with no scheduling at all: forks and spawns go to a local
/// deque that nobody steals from, and the thread runs it until the root task and everything it
/// spawned are done. Work resumed from other threads (e.g. a child woken by some other
/// executor) is handed back through a locked queue. This is seed 001's `noop_executor`: the
/// measure of what weft's task machinery costs by itself.
///
/// One per thread at a time; not movable. Use through sync_wait().
class inline_executor final : public detail::worker_base {
public:
    inline_executor() noexcept : worker_base(false, &root_, nullptr) {}
    inline_executor(const inline_executor&) = delete;
    auto operator=(const inline_executor&) -> inline_executor& = delete;
    ~inline_executor() = default;

    void schedule_remote(std::coroutine_handle<> h) noexcept override;

    /// Runs until `done` is true and no local work is left.
    void run_until(const std::atomic<bool>& done);

    [[nodiscard]] auto stop() noexcept -> stop_state& { return root_; }

private:
    void overflow(std::coroutine_handle<> h) override;

    stop_state root_;
    std::mutex mu_;
    std::vector<std::coroutine_handle<>> remote_;  // guarded by mu_
    std::atomic<std::uint32_t> wake_{0};           // bumped (release) after adding to remote_
};

namespace detail {
struct return_to {
    inline_executor& ex;
    auto await_ready() noexcept -> bool { return false; }
    WEFT_PUBLISHES_HANDLE void await_suspend(std::coroutine_handle<> h) noexcept {
        ex.schedule_remote(h);
    }
    void await_resume() noexcept {}
};

template <typename T>
auto sync_root(task<T> t,
               std::optional<std::conditional_t<std::is_void_v<T>, bool, T>>& out,
               std::exception_ptr& error,
               std::atomic<bool>& done,
               inline_executor& ex) -> task<void> {
    try {
        if constexpr (std::is_void_v<T>) {
            co_await std::move(t);
            out.emplace(true);
        } else {
            out.emplace(co_await std::move(t));
        }
    } catch (...) {
        error = std::current_exception();
    }
    if (current_worker() != &ex) {
        // Finished on a foreign thread: hop back, so that the waiting thread (which owns `ex`
        // and `done`) is the one that sees `done`; nothing here touches them afterwards.
        co_await return_to{ex};
    }
    done.store(true, std::memory_order_relaxed);
}
}  // namespace detail

/// Runs `t` to completion on the calling thread (inline executor) and returns its value or
/// rethrows its exception. Tasks it spawns run on this thread too and finish before it returns.
/// For timers and IO use weft::runtime::block_on instead.
template <typename T>
auto sync_wait(task<T> t) -> T {
    inline_executor ex;
    std::optional<std::conditional_t<std::is_void_v<T>, bool, T>> out;
    std::exception_ptr error;
    std::atomic<bool> done{false};
    auto root = detail::sync_root(std::move(t), out, error, done, ex);
    detail::set_stop(root, &ex.stop());
    auto h = root.release();
    h.promise().mode_ = detail::task_mode::spawned;
    detail::worker_base* saved = detail::current_worker();
    detail::set_current_worker(&ex);
    struct restore {
        detail::worker_base* w;
        ~restore() { detail::set_current_worker(w); }
    } r{saved};
    ex.push(h);
    ex.run_until(done);
    h.destroy();  // finished: join_ is join_done, nobody else holds it
    if (error) {
        std::rethrow_exception(error);
    }
    if constexpr (!std::is_void_v<T>) {
        return std::move(*out);
    }
}

}  // namespace weft
