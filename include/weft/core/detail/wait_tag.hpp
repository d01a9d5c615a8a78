#pragma once

#include <atomic>
#include <coroutine>

#include "weft/core/detail/task_registry.hpp"
#include "weft/core/task.hpp"

namespace weft::detail {

/// The spawned task a weft coroutine belongs to: up its chain of awaiting weft coroutines to
/// the first that was spawned, forked or awaited by another kind of coroutine; that one's
/// record (nullptr when it has none: a fork, or a task not spawned on a runtime).
/// The chain is alive while `p` is: each awaiting coroutine is suspended in its co_await.
[[nodiscard]] inline auto record_of(promise_base& p) noexcept -> task_record* {
    promise_base* q = &p;
    while (q->mode_ == task_mode::awaited && q->continuation_) {
        q = &std::coroutine_handle<promise_base>::from_address(q->continuation_.address())
                 .promise();
    }
    return q->record();
}

/// What a suspending primitive tells runtime::dump(): the task of the coroutine `h` waits on
/// `kind`. set() before the handle is published (after that the coroutine may run and finish
/// on another thread); clear() first in await_resume, whenever set() may have run. A member of
/// the awaiter, so in the waiting frame: one word, so that an awaiter that never suspends (a
/// join of a finished fork) pays one store and one test. Costs nothing more for a coroutine with
/// no record but the walk up its awaiting chain (set).
/// Several coroutines of one task may wait at once (when_all's children): the record names the
/// latest (`waiter`); clear() empties it only if it still names this tag, so the record never
/// keeps a coroutine that has resumed (a dump may follow it), at worst it shows none.
class wait_tag {
public:
    template <typename P>
    void set(std::coroutine_handle<P> h, wait_kind kind) noexcept {
        if constexpr (is_weft_promise<P>) {
            rec_ = record_of(h.promise());
            if (rec_ != nullptr) {
                rec_->wait.store(kind, std::memory_order_relaxed);
                rec_->leaf.store(h.address(), std::memory_order_relaxed);
                rec_->waiter.store(this, std::memory_order_relaxed);
            }
        }
    }
    void clear() noexcept {
        if (rec_ != nullptr) [[unlikely]] {
            if (rec_->waiter.load(std::memory_order_relaxed) == this) {
                rec_->woken.store(rec_->leaf.load(std::memory_order_relaxed),
                                  std::memory_order_relaxed);
                rec_->waiter.store(nullptr, std::memory_order_relaxed);
                rec_->leaf.store(nullptr, std::memory_order_relaxed);
                rec_->wait.store(wait_kind::none, std::memory_order_relaxed);
            }
            rec_ = nullptr;
        }
    }

private:
    task_record* rec_ = nullptr;
};

}  // namespace weft::detail
