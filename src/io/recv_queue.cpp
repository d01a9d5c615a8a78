#include "recv_queue.hpp"

#include <cerrno>
#include <iterator>
#include <new>
#include <system_error>
#include <utility>

#include "weft/io/error.hpp"

namespace weft::detail {

// ---- recv_awaiter ----------------------------------------------------------------------------

auto recv_awaiter::await_ready() -> bool { return false; }  // suspend() decides, under the lock

auto recv_awaiter::suspend(std::coroutine_handle<> h, stop_state* s) -> bool {
    recv_queue& q = *q_;
    recv_queue::wake_after_unlock wake;
    std::unique_lock lock(q.mu_);
    if (q.closed_) {
        out_.err = std::make_error_code(std::errc::bad_file_descriptor);
        return false;
    }
    const bool here_on_uring = is_uring();
    // Armed on a ring of this runtime (this worker's or, the reader having been stolen,
    // another's): it stays there; its CQEs resume us on that ring's worker (resume_from_io),
    // which brings the reader back beside its socket's completions. Cancelling and re-arming
    // it cost an SQE pair and a wait for the last CQE each time a reader moved between workers.
    // Unless the runtime's IO home says it belongs on another ring (wanted_worker): then it is
    // ended there and this reader, posted by its last CQE to that ring's worker, arms it again.
    if (q.armed_ && (!here_on_uring || !q.armed_in_this_runtime())) {
        // Armed on another runtime's ring (the stream moved): end it there, then take what it
        // queued before reading anything else. We wait for its last CQE, as for data.
        q.cancel_armed(wake);
    } else {
        if (q.take(out_)) {
            return false;
        }
        const int want = here_on_uring ? q.wanted_worker() : -1;
        if (!q.armed_) {
            if (!may_arm_ || !here_on_uring) {
                return false;  // drained and not armed: the caller reads the socket itself
            }
            if (want >= 0 && static_cast<unsigned>(want) != current_worker_index()) {
                // Its home is another worker's ring: go there first (the next wait arms it).
                // Nothing here is touched once the handle is posted.
                lock.unlock();
                try {
                    post_to_worker(static_cast<unsigned>(want), h);
                } catch (...) {
                    return false;  // (out of memory) arm it here at the next wait instead
                }
                return true;
            }
            uring_reactor& r = current_uring();
            if (r.buffers() == nullptr) {
                out_.heap_read = true;  // (this ring has no provided buffers) read plainly
                return false;
            }
            try {
                q.arm(r);
            } catch (const std::bad_alloc&) {
                out_.err = std::make_error_code(std::errc::not_enough_memory);
                return false;
            } catch (const std::system_error& e) {
                out_.err = e.code();  // the ring's submission queue stays full (EBUSY)
                return false;
            }
        } else if (want >= 0 && static_cast<unsigned>(want) != q.armed_worker_) {
            if (!q.cancelling_) {
                recv_home_moves.fetch_add(1, std::memory_order_relaxed);
            }
            q.cancel_armed(wake);
            move_to_ = want;
        }
    }
    // Registered under mu_ (the stop lock is a leaf; on_stop takes mu_, so it finds us queued).
    if (s != nullptr) {
        if (!s->try_add(this)) {
            out_.err = std::make_error_code(std::errc::operation_canceled);
            return false;
        }
        stop_ = s;
        registered_ = true;
    }
    waiter_ = h;
    home_ = current_worker();
    st_ = state::waiting;
    q.reader_ = this;
    return true;
}

auto recv_awaiter::await_resume() -> recv_outcome&& {
    if (registered_) {
        stop_->remove(this);  // waits for an on_stop running on another thread
        registered_ = false;
    }
    if (st_ == state::done && !cancelled_) {
        // Woken by a CQE: take what it brought (or nothing: the operation ended, ask again).
        std::lock_guard lock(q_->mu_);
        (void)q_->take(out_);
    }
    return std::move(out_);
}

void recv_awaiter::on_stop(stop_callback_node* n) noexcept {
    auto* w = static_cast<recv_awaiter*>(n);
    recv_queue& q = *w->q_;
    std::coroutine_handle<> resume;
    {
        std::lock_guard lock(q.mu_);
        if (w->st_ != state::waiting) {
            return;  // data got there first
        }
        q.reader_ = nullptr;
        w->st_ = state::done;
        w->cancelled_ = true;
        w->out_.err = std::make_error_code(std::errc::operation_canceled);
        resume = w->waiter_;
    }
    // The operation stays armed: what arrives meanwhile waits here for the next read.
    resume_soon(resume, w->home_);  // NOTE: w may be gone once the task runs
}

// ---- recv_queue ------------------------------------------------------------------------------

recv_queue::recv_queue(int fd) noexcept : multishot_op<recv_queue>(&recv_queue::on_cqe), fd_(fd) {}

recv_queue::~recv_queue() = default;  // queued chunks go back to their rings

auto recv_queue::take(recv_outcome& out) -> bool {
    if (head_ < ready_.size()) {
        out.data = std::move(ready_[head_++]);
        if (head_ == ready_.size()) {
            ready_.clear();  // keeps the capacity (at most max_ready and a few)
            head_ = 0;
        }
        return true;
    }
    if (end_) {
        out.err = end_;  // stays: every later read sees it too
        return true;
    }
    if (out_of_buffers_ && !armed_) {
        out_of_buffers_ = false;
        out.heap_read = true;
        return true;
    }
    return false;
}

void recv_queue::unread(bytes rest) {
    std::lock_guard lock(mu_);
    if (head_ > 0) {
        ready_[--head_] = std::move(rest);
    } else {
        ready_.insert(ready_.begin(), std::move(rest));
    }
}

auto recv_queue::wanted_worker() const noexcept -> int {
    const io_home h = current_io_home();
    if (!h.enabled) {
        return -1;
    }
    if (h.worker >= 0) {
        return h.worker;  // gathered: every receive on the home's ring
    }
    // No home (any more): one gathered under an earlier home moves once, to the worker its
    // socket hashes to (the streams split evenly over the rings, see spread_worker); after that
    // (armed in this epoch) it stays wherever its reader is stolen to.
    if (armed_ && armed_epoch_ != h.epoch && h.workers > 0) {
        const unsigned to = spread_worker(fd_, h.workers);
        if (to != armed_worker_) {
            return static_cast<int>(to);
        }
    }
    return -1;
}

void recv_queue::count_armed(int delta) const noexcept {
    if (armed_worker_ < std::size(recv_armed_on_worker_for_test)) {
        recv_armed_on_worker_for_test[armed_worker_].fetch_add(delta, std::memory_order_relaxed);
    }
}

void recv_queue::arm(uring_reactor& r) {
    armed_worker_ = current_worker_index();
    armed_epoch_ = current_io_home().epoch;
    pool_ = r.buffers();  // the caller checked that the ring has them
    io_uring_sqe* sqe = arm_on(r);
    count_armed(1);                                         // (after what can throw)
    io_uring_prep_recv_multishot(sqe, fd_, nullptr, 0, 0);  // 0: a whole provided buffer
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = provided_buffer_ring::group;
}

// On the ring's thread, for every CQE of the operation.
auto recv_queue::on_cqe(uring_op& op) noexcept -> bool {
    auto& q = static_cast<recv_queue&>(op);
    const bool last = (op.cqe_flags & IORING_CQE_F_MORE) == 0;
    const int res = op.res;
    bytes chunk;
    if ((op.cqe_flags & IORING_CQE_F_BUFFER) != 0) {
        // (q.pool_ is only written by arm, on this thread, before this operation's CQEs.)
        const unsigned bid = op.cqe_flags >> IORING_CQE_BUFFER_SHIFT;
        chunk = q.pool_->take(bid, res > 0 ? static_cast<std::size_t>(res) : 0);
    }
    std::coroutine_handle<> wake;
    worker_base* home = nullptr;
    int move_to = -1;
    wake_after_unlock cancel_wake;
    {
        std::lock_guard lock(q.mu_);
        if (res > 0 && !q.closed_ && !q.end_) {
            bool kept = true;
            try {
                q.ready_.push_back(std::move(chunk));  // (strong guarantee: kept on a throw)
            } catch (const std::bad_alloc&) {
                kept = false;
            }
            if (!kept) {
                // No memory to queue the chunk: the stream cannot go on with bytes missing.
                // Its reader gets the error after what is queued, and the operation ends.
                q.end_ = std::make_error_code(std::errc::not_enough_memory);
                q.cancel_armed(cancel_wake);
            } else if (!last && q.queued() >= max_ready) {
                if (!q.cancelling_) {
                    recv_lag_cancels_for_test.fetch_add(1, std::memory_order_relaxed);
                }
                q.cancel_armed(cancel_wake);  // a reader that lags: leave the rest in the socket
            }
        } else if (res == 0) {
            q.end_ = make_error_code(io_errc::eof);
        } else if (res == -ENOBUFS) {
            q.out_of_buffers_ = true;
            q.pool_->grow();  // (this is the pool's owner thread)
        } else if (res < 0 && res != -ECANCELED) {
            q.end_ = std::error_code(-res, std::system_category());
        }
        if (last) {
            q.count_armed(-1);
            q.disarmed();
        }
        if (recv_awaiter* w = q.reader_; w != nullptr && (q.queued() != 0 || q.end_ || last)) {
            q.reader_ = nullptr;
            w->st_ = recv_awaiter::state::done;
            wake = w->waiter_;
            home = w->home_;
            if (last) {
                move_to = w->move_to_;  // (a reader of this runtime: see suspend)
            }
        }
    }
    chunk = bytes();  // a chunk nobody will read (closed, or empty) back to the ring, unlocked
    bool queued_here = false;
    if (wake && move_to >= 0) {
        try {
            post_to_worker(static_cast<unsigned>(move_to), wake);  // it arms it there
        } catch (...) {
            queued_here = resume_from_io(wake, home);  // (out of memory) it arms it here
        }
    } else if (wake) {
        queued_here = resume_from_io(wake, home);
    }
    if (last) {
        q.unref();  // the ring's reference (may delete q)
    }
    return queued_here;
}

auto recv_queue::ring_detached() noexcept -> detached_reader {
    count_armed(-1);
    // Only a reader of another runtime can be waiting (this ring's runtime has ended all of its
    // tasks): it asks again and arms the operation on its own ring. Queued, not run, here.
    detached_reader out;
    if (recv_awaiter* w = reader_; w != nullptr) {
        reader_ = nullptr;
        w->st_ = recv_awaiter::state::done;
        out = {.waiter = w->waiter_, .home = w->home_};
    }
    return out;
}

void recv_queue::close() noexcept {
    std::vector<bytes> drop;
    {
        wake_after_unlock wake;
        std::lock_guard lock(mu_);
        closed_ = true;
        drop.swap(ready_);
        head_ = 0;
        cancel_armed(wake);
    }
    drop.clear();  // unlocked: a release may take the buffer pool's lock
    unref();       // the stream's reference
}

}  // namespace weft::detail
