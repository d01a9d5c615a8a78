#include "accept_queue.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <new>
#include <system_error>
#include <utility>

namespace weft::detail {

// ---- accept_awaiter --------------------------------------------------------------------------

auto accept_awaiter::suspend(std::coroutine_handle<> h, stop_state* s) -> bool {
    accept_queue& q = *q_;
    std::lock_guard lock(q.mu_);
    if (q.closed_) {
        out_.err = EBADF;
        return false;
    }
    if (!q.ready_.empty()) {
        out_.fd = q.ready_.front();
        q.ready_.pop_front();
        accepted_unclaimed_for_test.fetch_sub(1, std::memory_order_relaxed);
        return false;
    }
    if (q.pending_err_ != 0) {
        out_.err = std::exchange(q.pending_err_, 0);
        return false;
    }
    if (q.single_shot()) {
        out_.single_shot = true;
        return false;
    }
    // Armed before the stop callback is registered: arm() can throw, and an exception here
    // leaves this awaiter (and the frame around it) behind, so nothing may point into it yet.
    // (A stop callback could not be removed here either: removal waits for a running on_stop,
    // which takes mu_.) A cancellation that then finds the task stopping leaves the operation
    // armed for the next accept; connections wait in ready_ meanwhile.
    if (!q.armed_) {
        q.arm();
    }
    // Registered under mu_ (the stop lock is a leaf, and on_stop takes mu_, so on_stop waits
    // until this task is queued or has returned).
    if (s != nullptr) {
        if (!s->try_add(this)) {
            out_.err = ECANCELED;
            return false;
        }
        stop_ = s;
        registered_ = true;
    }
    waiter_ = h;
    home_ = current_worker();
    st_ = state::waiting;
    if (q.tail_ != nullptr) {
        q.tail_->next_ = this;
    } else {
        q.head_ = this;
    }
    q.tail_ = this;
    accept_waiters_for_test.fetch_add(1, std::memory_order_relaxed);
    return true;
}

auto accept_awaiter::await_resume() noexcept -> accept_outcome {
    if (registered_) {
        stop_->remove(this);  // waits for an on_stop running on another thread
        registered_ = false;
    }
    return out_;
}

void accept_awaiter::on_stop(stop_callback_node* n) noexcept {
    auto* w = static_cast<accept_awaiter*>(n);
    accept_queue& q = *w->q_;
    std::coroutine_handle<> resume;
    {
        std::lock_guard lock(q.mu_);
        if (w->st_ != state::waiting) {
            return;  // a connection or an error got there first
        }
        // Unlink from the FIFO (singly linked: find the predecessor; waiters are few).
        accept_awaiter* prev = nullptr;
        for (accept_awaiter* it = q.head_; it != w; it = it->next_) {
            prev = it;
        }
        (prev != nullptr ? prev->next_ : q.head_) = w->next_;
        if (q.tail_ == w) {
            q.tail_ = prev;
        }
        accept_waiters_for_test.fetch_sub(1, std::memory_order_relaxed);
        w->st_ = state::done;
        w->out_.err = ECANCELED;
        resume = w->waiter_;
    }
    resume_soon(resume, w->home_);  // NOTE: w may be gone once the task runs
}

// ---- accept_queue ----------------------------------------------------------------------------

// Waiters taken off the queue under its mutex, resumed after it is released (through their
// next_ links: no allocation).
struct accept_queue::waiter_chain {
    accept_awaiter* head = nullptr;
    accept_awaiter* tail = nullptr;
    void add(accept_awaiter* w) noexcept {
        (tail != nullptr ? tail->next_ : head) = w;
        tail = w;
    }
    template <typename Resume>
    void resume_all(Resume resume) noexcept {
        for (accept_awaiter* w = head; w != nullptr;) {
            accept_awaiter* next = w->next_;  // read first: once resumed, w may be gone
            resume(w->waiter_, w->home_);
            w = next;
        }
    }
    void resume_on_their_runtimes() noexcept {
        resume_all([](std::coroutine_handle<> h, worker_base* home) { home->schedule_remote(h); });
    }
};

accept_queue::accept_queue(int listen_fd) noexcept
    : multishot_op<accept_queue>(&accept_queue::on_cqe), fd_(listen_fd) {}

accept_queue::~accept_queue() {
    accepted_unclaimed_for_test.fetch_sub(static_cast<int>(ready_.size()),
                                          std::memory_order_relaxed);
    for (int fd : ready_) {
        ::close(fd);
    }
}

namespace {
std::atomic<int> g_arm_failures_for_test{0};
}  // namespace

void fail_next_accept_arms_for_test(int n) noexcept {
    g_arm_failures_for_test.store(n, std::memory_order_relaxed);
}

void accept_queue::arm() {
    if (g_arm_failures_for_test.load(std::memory_order_relaxed) > 0) {
        g_arm_failures_for_test.fetch_sub(1, std::memory_order_relaxed);
        throw std::system_error(ENOMEM, std::system_category(), "weft: accept arm failed (test)");
    }
    io_uring_sqe* sqe = arm_on(current_uring());
    io_uring_prep_multishot_accept(sqe, fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

auto accept_queue::pop_waiter() noexcept -> accept_awaiter* {
    accept_awaiter* w = head_;
    if (w != nullptr) {
        head_ = w->next_;
        if (head_ == nullptr) {
            tail_ = nullptr;
        }
        w->next_ = nullptr;
        w->st_ = accept_awaiter::state::done;
        accept_waiters_for_test.fetch_sub(1, std::memory_order_relaxed);
    }
    return w;
}

// On the ring's thread, for every CQE of the operation.
auto accept_queue::on_cqe(uring_op& op) noexcept -> bool {
    auto& q = static_cast<accept_queue&>(op);
    const bool last = (op.cqe_flags & IORING_CQE_F_MORE) == 0;
    const int res = op.res;
    waiter_chain wake;
    int drop_fd = -1;
    wake_after_unlock cancel_wake;
    {
        std::lock_guard lock(q.mu_);
        if (res >= 0) {
            q.accepted_any_ = true;
            if (q.closed_) {
                drop_fd = res;
            } else if (accept_awaiter* w = q.pop_waiter(); w != nullptr) {
                w->out_.fd = res;
                wake.add(w);
            } else {
                bool kept = true;
                try {
                    q.ready_.push_back(res);
                } catch (const std::bad_alloc&) {
                    kept = false;
                }
                if (!kept) {
                    // No memory to queue it: the connection is closed, the next accept learns
                    // why, and the rest wait in the kernel's backlog.
                    drop_fd = res;
                    q.pending_err_ = ENOMEM;
                    q.cancel_armed(cancel_wake);
                } else {
                    accepted_unclaimed_for_test.fetch_add(1, std::memory_order_relaxed);
                    if (q.ready_.size() >= max_ready && !last) {
                        q.cancel_armed(cancel_wake);
                    }
                }
            }
        }
        if (last) {
            q.disarmed();
            int err = 0;
            if (res == -EINVAL && !q.accepted_any_) {
                q.single_shot_.store(true, std::memory_order_relaxed);  // an older kernel
            } else if (res < 0 && res != -ECANCELED) {
                err = -res;
            }
            // Every waiter learns the error (each backs off on its own), or asks again and
            // re-arms; a single_shot flag sends them to plain accepts.
            while (accept_awaiter* w = q.pop_waiter()) {
                w->out_.err = err;
                wake.add(w);
            }
            if (err != 0 && wake.head == nullptr) {
                q.pending_err_ = err;
            }
        }
    }
    if (drop_fd >= 0) {
        ::close(drop_fd);
    }
    bool queued_here = false;
    wake.resume_all([&](std::coroutine_handle<> h, worker_base* home) {
        queued_here = resume_from_io(h, home) || queued_here;
    });
    if (last) {
        q.unref();  // the ring's reference (may delete q)
    }
    return queued_here;
}

auto accept_queue::ring_detached() noexcept -> waiter_chain {
    // Only tasks of other runtimes can be waiting (this ring's runtime has ended all of its
    // own): each asks again and arms the operation on its own ring. Queued, not run, here.
    waiter_chain wake;
    while (accept_awaiter* w = pop_waiter()) {
        wake.add(w);
    }
    return wake;
}

void accept_queue::close() noexcept {
    std::deque<int> fds;
    waiter_chain wake;
    {
        wake_after_unlock cancel_wake;
        std::lock_guard lock(mu_);
        closed_ = true;
        fds.swap(ready_);
        accepted_unclaimed_for_test.fetch_sub(static_cast<int>(fds.size()),
                                              std::memory_order_relaxed);
        cancel_armed(cancel_wake);
        while (accept_awaiter* w = pop_waiter()) {
            w->out_.err = EBADF;
            wake.add(w);
        }
    }
    for (int fd : fds) {
        ::close(fd);
    }
    wake.resume_all(resume_soon);
    unref();  // the listener's reference
}

}  // namespace weft::detail
