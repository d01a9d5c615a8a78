#pragma once

#include <coroutine>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

#include "weft/core/detail/worker_base.hpp"
#include "weft/core/result.hpp"
#include "weft/core/stop.hpp"
#include "weft/core/task.hpp"

namespace weft {
namespace detail {

class blocking_pool;
class runtime_core;

/// A call queued on the blocking pool, embedded in the awaiting frame. `state` (guarded by the
/// pool's mutex): queued -> running -> done, or queued -> cancelled (by a stop request, which
/// then owns resuming the waiter). Whoever ends it resumes the waiter, once.
struct blocking_job : stop_callback_node {
    enum class state : unsigned char { idle, queued, running, done, cancelled };
    blocking_job() noexcept : stop_callback_node(&blocking_job::on_stop) {}
    blocking_job(const blocking_job&) = delete;
    auto operator=(const blocking_job&) -> blocking_job& = delete;
    virtual void run() noexcept = 0;
    static void on_stop(stop_callback_node* n) noexcept;

    blocking_job* q_prev = nullptr;
    blocking_job* q_next = nullptr;
    state st = state::idle;
    bool registered = false;
    std::coroutine_handle<> waiter;
    blocking_pool* pool = nullptr;
    runtime_core* rt = nullptr;
    stop_state* stop = nullptr;

protected:
    ~blocking_job() = default;
};

/// Queues `job` on the current runtime's blocking pool. False: do not suspend (cancelled
/// already). Throws std::logic_error off a runtime worker.
[[nodiscard]] auto blocking_submit(blocking_job& job, stop_state* stop, std::coroutine_handle<> h)
    -> bool;
/// After resumption: true if it ran, false if it was cancelled before starting.
[[nodiscard]] auto blocking_finish(blocking_job& job) noexcept -> bool;

template <typename Fn>
class blocking_awaiter final : private blocking_job {
public:
    using value_type = std::invoke_result_t<Fn&>;
    explicit blocking_awaiter(Fn fn) : fn_(std::move(fn)) {}

    auto await_ready() const noexcept -> bool { return false; }
    template <typename P>
    WEFT_PUBLISHES_HANDLE auto await_suspend(std::coroutine_handle<P> h) -> bool {
        return blocking_submit(*this, stop_of(h), h);
    }
    auto await_resume() -> result<value_type> {
        if (!blocking_finish(*this)) {
            return std::errc::operation_canceled;
        }
        if (error_) {
            std::rethrow_exception(error_);
        }
        if constexpr (std::is_void_v<value_type>) {
            return {};
        } else {
            return std::move(*value_);
        }
    }

private:
    void run() noexcept override {
        try {
            if constexpr (std::is_void_v<value_type>) {
                fn_();
            } else {
                value_.emplace(fn_());
            }
        } catch (...) {
            error_ = std::current_exception();
        }
    }
    Fn fn_;
    std::optional<std::conditional_t<std::is_void_v<value_type>, bool, value_type>> value_;
    std::exception_ptr error_;
};

}  // namespace detail

/// Runs `fn()` on the runtime's blocking pool (a bounded set of threads for calls that can only
/// block: legacy libraries, DNS, file systems without async IO) and resumes the task with its
/// value, or rethrows its exception. If the task is cancelled before a thread picked the call
/// up, it is dropped and the result is `operation_canceled`; once running it runs to the end.
///
///     auto r = co_await weft::spawn_blocking([&] { return std::filesystem::file_size(p); });
template <typename Fn>
[[nodiscard]] auto spawn_blocking(Fn fn) -> detail::blocking_awaiter<Fn> {
    return detail::blocking_awaiter<Fn>{std::move(fn)};
}

}  // namespace weft
