#pragma once

#include "weft/core/detail/worker_base.hpp"

// Private to weft::io: one io_uring operation on the awaiting worker's ring, as an awaiter.

#include <cerrno>
#include <coroutine>
#include <utility>

#include "reactor.hpp"
#include "uring_reactor.hpp"
#include "weft/core/detail/wait_tag.hpp"
#include "weft/core/task.hpp"

namespace weft::detail {

/// What a CQE said: `res` (negative errno; -ECANCELED when the task was cancelled) and its
/// flags (the buffer id of a buffer-select receive). Converts to res.
struct uring_result {
    int res;
    std::uint32_t flags;
    operator int() const noexcept { return res; }  // NOLINT(google-explicit-constructor)
};

/// `int res = co_await uring_awaiter{prep}` where prep(io_uring_sqe*) fills the SQE.
template <typename Prep>
class uring_awaiter : private uring_op {
public:
    /// `eager`: see uring_op::eager_submit.
    explicit uring_awaiter(Prep p,
                           bool eager = false) noexcept(std::is_nothrow_move_constructible_v<Prep>)
        : prep_(std::move(p)) {
        eager_submit = eager;
    }

    auto await_ready() const noexcept -> bool { return false; }

    template <typename P>
    WEFT_PUBLISHES_HANDLE auto await_suspend(std::coroutine_handle<P> h) -> bool {
        stop = stop_of(h);
        if (stop != nullptr && stop->stop_requested()) {
            res = -ECANCELED;
            return false;
        }
        uring_reactor& r = current_uring();
        owner = &r;
        waiter = h;
        tag_.set(h, wait_kind::io);
        io_uring_sqe* sqe = r.get_sqe();
        prep_(sqe);
        io_uring_sqe_set_data(sqe, static_cast<uring_op*>(this));
        r.submitted(*this);
        // The completion is reaped only on this thread, in poll or park (also when the SQE
        // went to the kernel at once, eager_submit): nothing can resume us before we return.
        if (stop != nullptr) {
            if (stop->try_add(this)) {
                registered = true;
            } else {
                r.request_cancel(*this);
            }
        }
        return true;
    }

    auto await_resume() noexcept -> uring_result {
        tag_.clear();
        if (registered) {
            stop->remove(this);
            registered = false;
        }
        if (owner != nullptr) {
            owner->forget_cancel(*this);
        }
        return {res, cqe_flags};
    }

private:
    Prep prep_;
    wait_tag tag_;  // runtime::dump: waiting on IO
};

}  // namespace weft::detail
