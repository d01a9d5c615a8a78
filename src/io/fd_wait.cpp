#include "weft/io/fd_wait.hpp"

#include <poll.h>
#include <sys/epoll.h>

#include <cerrno>
#include <coroutine>
#include <system_error>

#include "epoll_reactor.hpp"
#include "reactor.hpp"
#include "uring_awaiter.hpp"
#include "uring_reactor.hpp"
#include "weft/sched/timer.hpp"

namespace weft {
namespace detail {
namespace {

/// epoll: `co_await foreign_ready{fd, EPOLLIN}` waits on this worker's epoll until `fd` is
/// ready (see epoll_reactor::add_foreign for the registration it makes and removes).
class foreign_ready : private foreign_waiter {
public:
    foreign_ready(int descriptor, std::uint32_t ev) noexcept {
        fd = descriptor;
        events = ev;
    }

    auto await_ready() const noexcept -> bool { return false; }

    template <typename P>
    WEFT_PUBLISHES_HANDLE auto await_suspend(std::coroutine_handle<P> h) -> bool {
        stop_ = stop_of(h);
        waiter = h;
        home = current_worker();
        owner = &current_epoll();
        // Register for cancellation first, then publish: once published, an event or a cancel
        // on another thread may resume us at any moment.
        if (stop_ != nullptr) {
            if (!stop_->try_add(this)) {
                st = state::cancelled;
                return false;
            }
            registered_ = true;
        }
        return owner->add_foreign(*this, error_);
    }

    auto await_resume() noexcept -> result<void> {
        if (registered_) {
            stop_->remove(this);  // waits for a cancel running on another thread
            registered_ = false;
        }
        if (error_) {
            return error_;
        }
        if (st == state::cancelled) {
            return std::errc::operation_canceled;
        }
        return {};
    }

private:
    stop_state* stop_ = nullptr;
    bool registered_ = false;
    std::error_code error_;
};

auto wait_ready(int fd, bool for_write) -> task<result<void>> {
    if (is_uring()) {
        // One-shot poll: once its CQE is reaped (readiness, or -ECANCELED after a cancel in
        // the kernel), the ring holds nothing of fd.
        const unsigned mask = for_write ? POLLOUT : POLLIN;
        const int res = co_await uring_awaiter{
            [=](io_uring_sqe* sqe) { io_uring_prep_poll_add(sqe, fd, mask); }};
        if (res < 0) {
            co_return std::error_code(-res, std::system_category());
        }
        if ((static_cast<unsigned>(res) & POLLNVAL) != 0) {
            co_return std::error_code(EBADF, std::system_category());
        }
        co_return result<void>{};
    }
    // Named, not a temporary inside the co_await (g++ 12: see docs/compilers.md).
    foreign_ready ready(fd, for_write ? EPOLLOUT : EPOLLIN);
    co_return co_await ready;
}

auto wait_ready_for(int fd, bool for_write, std::chrono::milliseconds timeout)
    -> task<result<void>> {
    auto r = co_await with_timeout(timeout, wait_ready(fd, for_write));
    if (!r) {
        co_return r.error();  // timed_out, or the caller's own cancellation
    }
    co_return *r;
}

}  // namespace
}  // namespace detail

auto wait_readable(int fd) -> task<result<void>> { return detail::wait_ready(fd, false); }

auto wait_writable(int fd) -> task<result<void>> { return detail::wait_ready(fd, true); }

auto wait_readable(int fd, std::chrono::milliseconds timeout) -> task<result<void>> {
    return detail::wait_ready_for(fd, false, timeout);
}

auto wait_writable(int fd, std::chrono::milliseconds timeout) -> task<result<void>> {
    return detail::wait_ready_for(fd, true, timeout);
}

}  // namespace weft
