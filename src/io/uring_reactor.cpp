#include "uring_reactor.hpp"

#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <iterator>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>

#include "kernel_writes.hpp"
#include "weft/sched/detail/io_home.hpp"

namespace weft::detail {

auto current_uring() -> uring_reactor& {
    reactor* r = reactor::current();
    if (r == nullptr || r->backend() != io_backend::io_uring) {
        throw std::logic_error("weft IO: no io_uring reactor on this thread");
    }
    return static_cast<uring_reactor&>(*r);
}

namespace {
auto to_timespec(std::int64_t ns) noexcept -> __kernel_timespec {
    if (ns < 0) {
        ns = 0;
    }
    __kernel_timespec ts{};
    ts.tv_sec = ns / 1'000'000'000;
    ts.tv_nsec = ns % 1'000'000'000;
    return ts;
}
}  // namespace

uring_reactor::uring_reactor()
    : reactor(io_backend::io_uring), under_valgrind_(running_on_valgrind()) {
    // The wake fd outlives the ring: other threads may kick it until the reactor is destroyed
    // (after the worker threads are joined). Blocking: io_uring would complete a read of a
    // non-blocking eventfd at once with -EAGAIN, and the worker would never sleep.
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC);
    if (wake_fd_ < 0) {
        throw std::system_error(errno, std::system_category(), "eventfd");
    }
}

uring_reactor::~uring_reactor() {
    detach();
    // A thread that queued a cancel here may still be on its way to the wake-up it owes.
    while (wakes_owed_.load(std::memory_order_acquire) != 0) {
        std::this_thread::yield();
    }
    ::close(wake_fd_);
}

// Submission queue: 256 entries (16 KiB of SQEs). A worker fills one SQE per operation and
// submits them all once per loop turn; a turn that queues more submits early (get_sqe). With
// 4096 entries the SQEs cycled through 256 KiB and each one written was a cache miss, paid at
// the worker's next locked instruction (waiting for the store to drain; docs/design/
// decisions.md). Completion queue: 4096 entries, so
// that bursts of multishot completions (10,000 connections) rarely overflow into the kernel's
// overflow list (nothing is lost then, see IORING_SQ_CQ_OVERFLOW in poll(), but it is slower).
constexpr unsigned sq_entries = 256;
constexpr unsigned cq_entries = 4096;

void uring_reactor::attach() {
    // One thread submits and reaps (the worker): let the kernel skip its cross-thread work.
    // TASKRUN_FLAG: the kernel raises IORING_SQ_TASKRUN in the shared ring flags when it has
    // deferred completion work for us, so poll() can tell "nothing new" without a system call.
    // Older kernels refuse flags they do not know: drop them one step at a time.
    constexpr unsigned tries[] = {
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN, 0U};
    int rc = -EINVAL;
    for (unsigned flags : tries) {
        io_uring_params p{};
        p.flags = flags | IORING_SETUP_CQSIZE;
        p.cq_entries = cq_entries;
        rc = io_uring_queue_init_params(sq_entries, &ring_, &p);
        if (rc != -EINVAL) {
            break;
        }
    }
    if (rc != 0) {
        throw std::system_error(-rc, std::system_category(), "io_uring_queue_init");
    }
    ring_ok_ = true;
    taskrun_flag_ = (ring_.flags & IORING_SETUP_TASKRUN_FLAG) != 0;
    arm_wake();
    tl_reactor = this;
    attached_for_test();
}

void uring_reactor::detach() noexcept {
    if (tl_reactor == this) {
        tl_reactor = nullptr;
    }
    detached_for_test();
    if (ring_ok_ && !multishot_.empty() && current_worker() != nullptr) {
        end_multishots();  // before the buffers go: a last receive may still fill one
    }
    if (buffers_ != nullptr) {
        buffers_->orphan(&ring_);
        buffers_ = nullptr;
    }
    // Left only if the kernel did not end them in time: exiting the ring cancels them, no CQE
    // will say so.
    for (uring_op* op : std::exchange(multishot_, {})) {
        multishot_detach_leftovers.fetch_add(1, std::memory_order_relaxed);
        op->on_detach(*op);
    }
    if (ring_ok_) {
        io_uring_queue_exit(&ring_);
        ring_ok_ = false;
    }
}

// Why not leave the armed multishot operations to io_uring_queue_exit: the ring's teardown runs
// asynchronously in the kernel, and until it has cancelled them their poll entries stay on the
// sockets' wait queues. io_uring waits for a connection with EPOLLEXCLUSIVE, and the kernel wakes
// only the first exclusive waiter: the dead ring's, which then drops the wake-up. The listener's
// next multishot accept (armed by the next runtime, queued behind it) was not woken and the
// connection stayed in the backlog (tcp.listener_outlives_its_runtime_and_serves_in_the_next:
// 8, 27 and 23 rounds of 200 in three runs before this, none after). So every request still in
// the ring is cancelled here, by one IORING_ASYNC_CANCEL_ANY (every kernel with multishot
// accept has it, 5.19), and CQEs are reaped until each multishot operation has posted its last
// one (the kernel takes the poll entry off the wait queue before it posts that) and the cancel
// has posted its own: the kernel is then done with both. A connection or bytes it still
// delivers meanwhile go where a CQE's always go (on_complete: the listener's unclaimed queue, the
// stream's received chunks), not lost with the ring. One SQE, so a full submission queue only
// delays it (the submit in the loop makes room). Bounded (detach_drain_limit): what is still
// armed then is left to the exit.
void uring_reactor::end_multishots() noexcept {
    const auto deadline = std::chrono::steady_clock::now() + detach_drain_limit;
    bool cancel_queued = false;
    bool cancel_done = false;
    while (!multishot_.empty() || !cancel_done) {
        if (!cancel_queued) {
            if (io_uring_sqe* sqe = io_uring_get_sqe(&ring_); sqe != nullptr) {
                io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
                io_uring_sqe_set_data64(sqe, detach_cancel_tag);
                cancel_queued = true;
            }
        }
        const auto left = deadline - std::chrono::steady_clock::now();
        if (left <= std::chrono::steady_clock::duration::zero()) {
            return;
        }
        __kernel_timespec ts =
            to_timespec(std::chrono::duration_cast<std::chrono::nanoseconds>(left).count());
        io_uring_cqe* cqe = nullptr;
        // Not queued yet (the queue was full): submit and reap what is there, then queue it.
        io_uring_submit_and_wait_timeout(&ring_, &cqe, cancel_queued ? 1 : 0, &ts, nullptr);
        queued_ = 0;
        unsigned head = 0;
        unsigned seen = 0;
        io_uring_for_each_cqe(&ring_, head, cqe) {
            ++seen;
            const std::uint64_t ud = io_uring_cqe_get_data64(cqe);
            if (ud == detach_cancel_tag) {
                cancel_done = true;
                continue;
            }
            if (ud == cancel_tag || ud == wake_tag) {
                continue;  // (the wake read, cancelled too, is not re-armed)
            }
            auto* op = reinterpret_cast<uring_op*>(ud);
            // Anything else is not looked at (its frame may be gone with the runtime; the exit
            // would drop its CQE too).
            if (std::find(multishot_.begin(), multishot_.end(), op) == multishot_.end()) {
                continue;
            }
            op->res = cqe->res;
            op->cqe_flags = cqe->flags;
            if ((cqe->flags & IORING_CQE_F_MORE) == 0) {
                op->st = uring_op::state::done;
                std::erase(multishot_, op);
            }
            // Only tasks of other runtimes can wait on it now: they are scheduled there.
            (void)op->on_complete(*op);
        }
        io_uring_cq_advance(&ring_, seen);
    }
}

void uring_reactor::arm_wake() noexcept {
    io_uring_sqe* sqe = try_get_sqe();
    wake_armed_ = sqe != nullptr;
    if (sqe != nullptr) {
        io_uring_prep_read(sqe, wake_fd_, &wake_buf_, sizeof(wake_buf_), 0);
        io_uring_sqe_set_data64(sqe, wake_tag);
    }
}

auto uring_reactor::try_get_sqe() noexcept -> io_uring_sqe* {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) {
        // Full: send what is queued. The kernel may take none (EBUSY while its completion queue
        // overflows), and then there is no room until the next poll reaps.
        const int n = io_uring_submit(&ring_);
        queued_ -= n > 0 ? std::min(queued_, static_cast<unsigned>(n)) : 0;
        sqe = io_uring_get_sqe(&ring_);
        if (sqe == nullptr) {
            return nullptr;
        }
    }
    ++queued_;
    return sqe;
}

auto uring_reactor::get_sqe() -> io_uring_sqe* {
    io_uring_sqe* sqe = try_get_sqe();
    if (sqe == nullptr) {
        throw std::system_error(EBUSY, std::system_category(),
                                "weft IO: io_uring submission queue stays full");
    }
    return sqe;
}

void uring_reactor::submitted(uring_op& op) noexcept {
    op.st = uring_op::state::submitted;
    // Not an atomic RMW (one locked instruction less per operation): only this, the owner,
    // thread writes inflight_; others only read it.
    const std::size_t inflight = inflight_.load(std::memory_order_relaxed) + 1;
    inflight_.store(inflight, std::memory_order_relaxed);
    if (op.eager_submit && inflight > queued_) {  // others are in the kernel already
        const int n = io_uring_submit(&ring_);
        queued_ -= n > 0 ? std::min(queued_, static_cast<unsigned>(n)) : 0;
    }
}

auto uring_reactor::submit_multishot(uring_op& op) -> io_uring_sqe* {
    multishot_.reserve(multishot_.size() + 1);  // first: a throw leaves no SQE taken unfilled
    io_uring_sqe* sqe = get_sqe();
    op.multishot = true;
    op.owner = this;
    op.st = uring_op::state::submitted;
    io_uring_sqe_set_data(sqe, &op);
    multishot_.push_back(&op);
    return sqe;
}

auto uring_reactor::queue_cancel(uring_op& op) noexcept -> bool {
    // The owner looks at the list at its next poll or park: on its own thread nothing is owed.
    const bool owed = reactor::current() != this;
    std::lock_guard lock(cancel_mu_);
    if (op.cancel_queued.load(std::memory_order_relaxed)) {
        return false;
    }
    op.cancel_queued.store(true, std::memory_order_relaxed);
    op.cancel_prev = nullptr;
    op.cancel_next = cancel_head_;
    if (cancel_head_ != nullptr) {
        cancel_head_->cancel_prev = &op;
    }
    cancel_head_ = &op;
    cancels_waiting_.store(true, std::memory_order_release);
    if (owed) {
        wakes_owed_.fetch_add(1, std::memory_order_relaxed);  // (published by the unlock)
    }
    return owed;
}

void uring_reactor::wake_for_cancel() noexcept {
    unpark();  // the owner submits the cancel on its next poll or park
    wakes_owed_.fetch_sub(1, std::memory_order_release);
}

void uring_reactor::forget_cancel(uring_op& op) noexcept {
    // Called after the op's stop callback was removed (stop_state::remove waited for a running
    // one), so no request_cancel can still set the flag; the acquire pairs with that callback's
    // unlock, and with submit_cancels' release when it took the op off the list. Almost every op
    // was never cancelled: no lock then.
    if (!op.cancel_queued.load(std::memory_order_acquire)) {
        return;
    }
    std::lock_guard lock(cancel_mu_);
    if (!op.cancel_queued.load(std::memory_order_relaxed)) {
        return;
    }
    op.cancel_queued.store(false, std::memory_order_relaxed);
    if (op.cancel_prev != nullptr) {
        op.cancel_prev->cancel_next = op.cancel_next;
    } else if (cancel_head_ == &op) {
        cancel_head_ = op.cancel_next;
    }
    if (op.cancel_next != nullptr) {
        op.cancel_next->cancel_prev = op.cancel_prev;
    }
    op.cancel_next = op.cancel_prev = nullptr;
}

void uring_reactor::submit_cancels() noexcept {
    // Every poll and park comes here; almost never is a cancel queued: no lock then. A request
    // racing this look is seen at the next one (request_cancel unparks this worker after it).
    if (!cancels_waiting_.load(std::memory_order_acquire)) {
        return;
    }
    // Ops are taken off the list under the lock, as many as the submission queue has room for,
    // and their SQEs filled after it: a cancel names its op by address only, and once off the
    // list the op may be gone (forget_cancel's fast path). A queue with no room even after a
    // submit leaves the rest listed (cancels_waiting_ stays set) for the next poll or park.
    for (;;) {
        unsigned room = io_uring_sq_space_left(&ring_);
        if (room == 0) {
            const int n = io_uring_submit(&ring_);
            queued_ -= n > 0 ? std::min(queued_, static_cast<unsigned>(n)) : 0;
            room = io_uring_sq_space_left(&ring_);
            if (room == 0) {
                return;
            }
        }
        std::uint64_t batch[32];
        unsigned n = 0;
        bool more = false;
        {
            std::lock_guard lock(cancel_mu_);
            while (n < std::min<unsigned>(room, std::size(batch)) && cancel_head_ != nullptr) {
                uring_op* op = cancel_head_;
                cancel_head_ = op->cancel_next;
                if (cancel_head_ != nullptr) {
                    cancel_head_->cancel_prev = nullptr;
                }
                op->cancel_next = op->cancel_prev = nullptr;
                batch[n++] = reinterpret_cast<std::uint64_t>(op);
                // Off the list for good. release: forget_cancel's fast path reads false without
                // the lock (acquire) and may then free the op's frame at once; this store
                // publishes the writes to the op above, so none of them can race with whoever
                // reuses that memory (TSan saw the frame reused on another worker with relaxed
                // here, in the shutdown stress test).
                op->cancel_queued.store(false, std::memory_order_release);
            }
            more = cancel_head_ != nullptr;
            if (!more) {
                cancels_waiting_.store(false, std::memory_order_relaxed);
            }
        }
        for (unsigned i = 0; i < n; ++i) {
            io_uring_sqe* sqe = io_uring_get_sqe(&ring_);  // (room for n)
            ++queued_;
            io_uring_prep_cancel64(sqe, batch[i], 0);
            io_uring_sqe_set_data64(sqe, cancel_tag);
        }
        if (!more) {
            return;
        }
    }
}

auto uring_reactor::reap() -> bool {
    bool queued_any = false;
    unsigned queued = 0;
    unsigned head = 0;
    unsigned seen = 0;
    io_uring_cqe* cqe = nullptr;
    io_uring_for_each_cqe(&ring_, head, cqe) {
        ++seen;
        const std::uint64_t ud = io_uring_cqe_get_data64(cqe);
        if (ud == cancel_tag) {
            continue;
        }
        if (ud == wake_tag) {
            kernel_wrote(&wake_buf_, sizeof(wake_buf_));
            arm_wake();
            continue;
        }
        auto* op = reinterpret_cast<uring_op*>(ud);
        op->res = cqe->res;
        op->cqe_flags = cqe->flags;
        if (op->multishot) {
            if ((cqe->flags & IORING_CQE_F_MORE) == 0) {  // its last CQE: the hook may free it
                op->st = uring_op::state::done;
                std::erase(multishot_, op);
            }
            queued_any = op->on_complete(*op) || queued_any;
            continue;
        }
        op->st = uring_op::state::done;
        // The in-flight count drops only after the woken task is queued (release, by the
        // seq_cst RMW): shutdown reads this count before the queues (acquire), so it sees the
        // operation either still in flight or its task queued, never neither.
        // file_batch hook (see uring_op::on_complete): one resumption for many operations.
        if (op->on_complete != nullptr) {
            queued_any = op->on_complete(*op) || queued_any;
        } else {
            current_worker()->push_io_ready(op->waiter);
            queued_any = true;
            ++queued;
        }
        inflight_.fetch_sub(1, std::memory_order_seq_cst);
    }
    io_uring_cq_advance(&ring_, seen);
    // One wake-up for the whole batch; none on the IO home (runtime_options::consolidate_io):
    // the load fits it, and a helper woken for a batch only takes a CPU from someone else.
    if (queued >= wake_helper_batch && !current_worker_is_io_home()) {
        current_worker()->notify_idle();
    }
    return queued_any;
}

auto uring_reactor::buffers() -> provided_buffer_ring* {
    if (!buffers_tried_) {
        buffers_tried_ = true;
        buffers_ = provided_buffer_ring::create(&ring_);
    }
    return buffers_;
}

auto uring_reactor::poll() -> bool {
    submit_cancels();
    if (buffers_ != nullptr) {
        buffers_->drain_returns();
    }
    if (queued_ == 0 && inflight_.load(std::memory_order_relaxed) == 0 && multishot_.empty()) {
        return false;
    }
    // Nothing to submit, no CQE posted and no completion work deferred to us: skip the enter.
    // A busy worker polls between tasks and while it searches for work; without this check two
    // of every three polls of an echo server were system calls that found nothing (100
    // connections: 0.64 wasted io_uring_enter per request). A completion racing this check
    // raises the flag and is picked up by the next poll, or by park(), which always enters.
    if (taskrun_flag_ && io_uring_sq_ready(&ring_) == 0 && io_uring_cq_ready(&ring_) == 0 &&
        (IO_URING_READ_ONCE(*ring_.sq.kflags) & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW)) == 0) {
        return false;
    }
    io_uring_submit_and_get_events(&ring_);
    queued_ = 0;
    return reap();
}

// NOTE: valgrind. valgrind runs one thread at a time under its big lock, and drops the lock only
// around system calls its wrapper marks as possibly blocking. valgrind 3.19 wraps io_uring_setup
// and io_uring_enter, but not as blocking: a worker parked in io_uring_enter(min_complete=1)
// keeps the lock, no other thread of the process runs again (not even the one that would
// accept the connection the worker waits for), and the process hangs (--trace-syscalls=yes shows
// that enter "[sync]" and then nothing). So under valgrind (read once, at construction) a park
// waits at most valgrind_wait_ns in the kernel and then yields (sched_yield is a may-block wrapper,
// so the lock is dropped); the worker loop sees a timed-out park and parks again. The short wait
// alone is not enough: without the yield the lock seldom changed hands (an echo server under
// valgrind answered 8 requests in 3 s). Outside valgrind: one predictable branch.
constexpr std::int64_t valgrind_wait_ns = 1'000'000;

void uring_reactor::park(std::optional<std::int64_t> timeout_ns) {
    submit_cancels();
    if (buffers_ != nullptr) {
        buffers_->drain_returns();
    }
    if (!wake_armed_) {
        arm_wake();  // (its SQE was refused at the last wake-up: try again)
    }
    if (!wake_armed_ || !begin_sleep()) {
        poll();  // unarmed: nothing could end a blocking wait; the worker comes back here
        return;
    }
    io_uring_cqe* cqe = nullptr;
    __kernel_timespec ts{};
    std::optional<std::int64_t> wait = timeout_ns;
    if (under_valgrind_) {
        wait = std::min(wait.value_or(valgrind_wait_ns), valgrind_wait_ns);
    }
    if (wait) {
        ts = to_timespec(*wait);
    }
    io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, wait ? &ts : nullptr, nullptr);
    queued_ = 0;
    if (under_valgrind_) {
        ::sched_yield();  // valgrind drops its lock here (a may-block wrapper): others run
    }
    end_sleep();
    reap();
}

void uring_reactor::kick() noexcept {
    const std::uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
}

void uring_op::on_stop(stop_callback_node* n) noexcept {
    auto* op = static_cast<uring_op*>(n);
    op->owner->request_cancel(*op);
}

}  // namespace weft::detail
