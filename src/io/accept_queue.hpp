#pragma once

// Private to weft::io: a listener's multishot accept on io_uring.

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <deque>
#include <mutex>

#include "multishot.hpp"
#include "reactor.hpp"
#include "uring_reactor.hpp"

namespace weft::detail {

/// What one wait on an accept_queue ends with: a connected socket (`fd` >= 0), an errno in
/// `err` (ECANCELED when the task was cancelled, EBADF when the listener closed, or what the
/// kernel's accept failed with, EMFILE say), or neither: the multishot operation ended and
/// the caller should ask again (which re-arms it), or, with `single_shot`, the kernel has no
/// multishot accept and the caller should use plain accepts.
struct accept_outcome {
    int fd = -1;
    int err = 0;
    bool single_shot = false;
};

class accept_queue;

/// Test hook: the next `n` arms of a multishot accept throw std::system_error.
void fail_next_accept_arms_for_test(int n) noexcept;

/// Test hooks, process-wide counts a test waits on instead of sleeping (relaxed; changed only
/// where a task starts or stops waiting for a connection, or a connection waits for a task):
/// tasks queued on an accept_queue (io_uring; an epoll accept waits in its reactor instead:
/// io_operations_waiting_for_test), connections a multishot accept took that no task has taken
/// yet, and accepts that backed off (out of descriptors: tcp_listener::accept sleeps, retries).
inline std::atomic<int> accept_waiters_for_test{0};
inline std::atomic<int> accepted_unclaimed_for_test{0};
inline std::atomic<int> accept_backoffs_for_test{0};

/// A task waiting for a connection, embedded in its frame; queued FIFO on the accept_queue.
/// `st` is guarded by the queue's mutex: idle -> waiting -> done. Whoever moves it to done
/// (a CQE, the listener's close, a cancellation) fills `out` and resumes the task, once.
class accept_awaiter : private stop_callback_node {
public:
    explicit accept_awaiter(accept_queue& q) noexcept
        : stop_callback_node(&accept_awaiter::on_stop), q_(&q) {}
    accept_awaiter(const accept_awaiter&) = delete;
    auto operator=(const accept_awaiter&) -> accept_awaiter& = delete;

    auto await_ready() const noexcept -> bool { return false; }
    template <typename P>
    WEFT_PUBLISHES_HANDLE auto await_suspend(std::coroutine_handle<P> h) -> bool {
        return suspend(h, stop_of(h));
    }
    auto await_resume() noexcept -> accept_outcome;

private:
    friend class accept_queue;
    enum class state : std::uint8_t { idle, waiting, done };
    auto suspend(std::coroutine_handle<> h, stop_state* s) -> bool;
    static void on_stop(stop_callback_node* n) noexcept;

    accept_queue* q_;
    accept_awaiter* next_ = nullptr;
    std::coroutine_handle<> waiter_;
    worker_base* home_ = nullptr;
    stop_state* stop_ = nullptr;
    bool registered_ = false;
    state st_ = state::idle;
    accept_outcome out_;
};

/// One IORING_OP_ACCEPT with IORING_ACCEPT_MULTISHOT, armed on the ring of the worker whose
/// task first waits for a connection, posts a CQE for every connection the kernel accepts: a
/// busy listener costs no SQE and no system call per connection. A CQE hands its socket to
/// the oldest waiting task, or queues it here for the next accept (at most `max_ready`: beyond
/// that the operation is cancelled, so a server that stops accepting leaves connections in the
/// kernel's backlog as it would without multishot, and it re-arms when accepting resumes).
/// The operation ends on an error (EMFILE, say: every waiter gets it and backs off), when the
/// listener closes, or when the reactor detaches; a later wait re-arms it.
///
/// Heap-allocated and reference-counted (multishot_op): the listener holds one reference, the
/// ring one while armed, since the kernel may post CQEs after the listener is gone.
class accept_queue final : private multishot_op<accept_queue> {
public:
    static constexpr std::size_t max_ready = 128;

    explicit accept_queue(int listen_fd) noexcept;

    /// `co_await q.next()`: the next connection (see accept_outcome).
    [[nodiscard]] auto next() noexcept -> accept_awaiter { return accept_awaiter(*this); }
    /// The kernel has no multishot accept (fixed after the first try).
    [[nodiscard]] auto single_shot() const noexcept -> bool {
        return single_shot_.load(std::memory_order_relaxed);
    }
    /// The listener is closing (any thread): cancels the operation in the kernel, closes the
    /// sockets nobody took, fails the waiters with EBADF and drops the listener's reference.
    void close() noexcept;

private:
    friend class accept_awaiter;
    struct waiter_chain;
    friend class multishot_op<accept_queue>;  // deletes it; ring_detached
    /// Under mu_: takes every waiter off, to hand back (to ask again) after mu_ is released.
    auto ring_detached() noexcept -> waiter_chain;
    ~accept_queue();
    void arm();  // under mu_, on a worker with an io_uring reactor
    static auto on_cqe(uring_op& op) noexcept -> bool;
    auto pop_waiter() noexcept -> accept_awaiter*;  // under mu_

    const int fd_;
    std::atomic<bool> single_shot_{false};
    // Guarded by mu_:
    std::deque<int> ready_;  // accepted, not yet handed out
    accept_awaiter* head_ = nullptr;
    accept_awaiter* tail_ = nullptr;
    int pending_err_ = 0;  // the error that ended the operation, for the next wait
    bool accepted_any_ = false;
};

}  // namespace weft::detail
