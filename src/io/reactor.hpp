#pragma once

// Private to weft::io: the two reactors and the per-socket state. A reactor is a worker's
// park_driver (sched/driver.hpp): the worker sleeps in it, and it queues the tasks whose IO
// finished on that worker.

#include <liburing.h>

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "weft/core/detail/spin_lock.hpp"
#include "weft/core/detail/worker_base.hpp"
#include "weft/core/stop.hpp"
#include "weft/io/bytes.hpp"
#include "weft/io/reactor.hpp"

namespace weft::detail {

class reactor : public park_driver {
public:
    explicit reactor(io_backend b) noexcept : backend_(b) {}
    [[nodiscard]] auto backend() const noexcept -> io_backend { return backend_; }

    /// The reactor of the worker running on this thread, or nullptr.
    [[nodiscard]] static auto current() noexcept -> reactor* { return tl_reactor; }

    void unpark() noexcept final;

protected:
    // Sleep protocol shared by both backends. unpark: notified_ = true, then if the owner is
    // sleeping_, kick its wake fd. park: sleeping_ = true, then re-check notified_ before the
    // blocking call. Both pairs are seq_cst, so one side always sees the other: no lost wake-up,
    // and no system call when the owner is awake anyway.
    auto begin_sleep() noexcept -> bool;  // false: a wake-up is pending, do not block
    void end_sleep() noexcept;
    virtual void kick() noexcept = 0;  // make the blocking call return

    static constinit thread_local reactor* tl_reactor;
    std::atomic<bool> notified_{false};
    std::atomic<bool> sleeping_{false};

private:
    io_backend backend_;
};

/// Queues `h` to run: on this thread's worker when it has one, else on `home`.
/// Does the calling worker run io_uring (else epoll)?
inline auto is_uring() -> bool { return current_io_backend() == io_backend::io_uring; }

/// On a reactor's thread (its ring's completions, its epoll's events), for a task that waited
/// there: queued here when the task belongs to this worker's runtime, whichever worker it last
/// ran on (the completions of its socket arrive here; a thief takes the task if this worker is
/// busy); else handed back to its own runtime (a socket used from another runtime), so a task
/// never runs on a runtime it does not belong to. Workers of one runtime share its root
/// stop_state. True if queued here.
inline auto resume_from_io(std::coroutine_handle<> h, worker_base* home) -> bool {
    worker_base* here = current_worker();
    if (home == nullptr || home == here || home->root_stop() == here->root_stop()) {
        here->push_io_ready(h);
        return true;
    }
    home->schedule_remote(h);
    return false;
}

inline void resume_soon(std::coroutine_handle<> h, worker_base* home) {
    if (worker_base* w = current_worker(); w != nullptr) {
        w->push(h);
    } else {
        home->schedule_remote(h);
    }
}

// ---- io_uring --------------------------------------------------------------------------------

class uring_reactor;

/// An operation submitted to a worker's ring, embedded in the awaiting frame.
/// user_data encoding on the ring: 0 = a cancel request (its CQE is ignored), 1 = the wake
/// eventfd read, anything else = the address of a uring_op.
/// `state` (owner thread only): idle -> submitted (SQE prepared) -> done (CQE reaped; `res` is
/// the kernel's result, -ECANCELED when cancelled in the kernel). Cancellation from any thread
/// links the op into the reactor's cancel list (under cancel_mu_); the owner turns that into an
/// IORING_OP_ASYNC_CANCEL. The op unlinks itself on resumption, so the list never holds a
/// finished op; the buffer stays valid until the CQE arrives because the waiter only resumes
/// then.
struct uring_op : stop_callback_node {
    enum class state : std::uint8_t { idle, submitted, done };
    uring_op() noexcept : stop_callback_node(&uring_op::on_stop) {}
    uring_op(const uring_op&) = delete;
    auto operator=(const uring_op&) -> uring_op& = delete;
    static void on_stop(stop_callback_node* n) noexcept;

    std::coroutine_handle<> waiter;
    uring_reactor* owner = nullptr;
    stop_state* stop = nullptr;
    int res = 0;
    std::uint32_t cqe_flags = 0;  // IORING_CQE_F_BUFFER and the buffer id, for buffer-select
    state st = state::idle;
    bool registered = false;
    // Send this SQE to the kernel at once when other operations of the ring are already there,
    // instead of at the next poll or park (O_DIRECT file IO: the device starts on it while the
    // worker is still resuming the rest of a batch; measured 0.83x -> 1.05x of fio at QD32).
    // Not for everything: buffered reads at QD32 lose 18% to the extra enters. A lone
    // operation waits for the poll anyway (one enter less). Its CQE is still reaped only on
    // the owner thread, in poll or park.
    bool eager_submit = false;
    // A multishot operation (multishot accept): one SQE, many CQEs. It is not counted in the
    // reactor's in-flight operations (it would keep the runtime from ever being quiescent) and
    // must set on_complete, which sees every CQE; the one without IORING_CQE_F_MORE is its
    // last. If the reactor detaches first, on_detach is called instead (on the owner thread,
    // with no task left to resume).
    bool multishot = false;
    // Written under owner->cancel_mu_; read without it by forget_cancel's fast path (see there).
    std::atomic<bool> cancel_queued{false};
    uring_op* cancel_next = nullptr;
    uring_op* cancel_prev = nullptr;
    // Completion hook (file_batch, src/io/file.cpp): when set, reap calls it on the owner
    // thread instead of queueing `waiter`, so one task can wait for many operations and be
    // resumed once. It returns whether it queued a task.
    bool (*on_complete)(uring_op& op) noexcept = nullptr;
    void (*on_detach)(uring_op& op) noexcept = nullptr;
};

/// A worker's provided-buffer ring: `count` buffers of `size` bytes that the kernel picks from
/// when a buffer-select receive completes, so a connection waiting for data holds no buffer (an
/// idle connection costs its task frame and socket, nothing more). A received buffer becomes a
/// weft::bytes; when the last reference goes (on any thread) the buffer returns to the ring: at
/// once on the owner's thread, else through a locked list the owner drains when it polls.
/// The pool is reference-counted (the reactor's reference plus one per buffer out), so bytes
/// may outlive the runtime: the memory goes when the last one does.
class buffer_pool {
public:
    static constexpr unsigned count = 1024;
    static constexpr std::size_t size = 4096;
    static constexpr unsigned short group = 1;
    /// Buffers handed to the kernel at first, and per grow(): the ring hands buffers out in
    /// FIFO order, so every buffer in it gets touched (resident) soon; starting small keeps a
    /// worker's receive memory at its working set (512 KiB, not 4 MiB) until load needs more.
    static constexpr unsigned grow_by = 128;

    /// Owner thread. nullptr if the kernel refuses the ring (receive then reads into the heap).
    [[nodiscard]] static auto create(io_uring* ring) -> buffer_pool*;
    /// Any thread: the received buffer `bid` with `len` bytes, as a bytes.
    [[nodiscard]] auto take(unsigned bid, std::size_t len) noexcept -> bytes;
    /// Owner thread: hands a buffer the kernel filled but nobody will read back to the ring.
    void give_back(unsigned bid) noexcept;
    /// Owner thread: returns buffers released on other threads to the ring.
    void drain_returns() noexcept;
    /// Owner thread, when a receive found the ring empty (ENOBUFS): hands the kernel grow_by
    /// more buffers, up to count.
    void grow() noexcept;
    /// Owner thread, before the ring goes away: unregister; drop the reactor's reference.
    void orphan(io_uring* ring) noexcept;

private:
    struct slot : bytes_block {
        buffer_pool* pool = nullptr;
        unsigned bid = 0;
    };
    buffer_pool() = default;
    ~buffer_pool();
    static void release(bytes_block* b) noexcept;
    void unref() noexcept;

    io_uring_buf_ring* br_ = nullptr;
    std::byte* mem_ = nullptr;
    slot* slots_ = nullptr;
    unsigned added_ = 0;  // buffers given to the ring so far (owner only)
    std::thread::id owner_;
    std::atomic<bool> orphaned_{false};
    std::atomic<std::uint32_t> refs_{1};  // the reactor's + one per buffer out
    std::mutex mu_;
    std::vector<unsigned> returned_;            // guarded by mu_
    std::atomic<bool> returns_waiting_{false};  // set under mu_ with a push to returned_
};

class uring_reactor final : public reactor {
public:
    uring_reactor();
    ~uring_reactor() override;

    void attach() override;
    void detach() noexcept override;
    void park(std::optional<std::int64_t> timeout_ns) override;
    auto poll() -> bool override;
    [[nodiscard]] auto pending() const noexcept -> std::size_t override {
        return inflight_.load(std::memory_order_seq_cst);
    }
    [[nodiscard]] auto expects_io() const noexcept -> bool override {
        return !multishot_.empty() || inflight_.load(std::memory_order_relaxed) != 0;
    }

    /// Owner thread: an SQE to fill (submits queued ones first if the ring is full).
    auto get_sqe() -> io_uring_sqe*;
    /// Owner thread: `op` was prepared in an SQE from get_sqe.
    void submitted(uring_op& op) noexcept;
    /// Owner thread: an SQE for the multishot operation `op` (see uring_op::multishot), which
    /// the reactor tracks until its last CQE or until it detaches.
    auto submit_multishot(uring_op& op) -> io_uring_sqe*;
    /// Owner thread: this worker's provided buffers (made on first use), or nullptr.
    auto buffers() -> buffer_pool*;
    /// Any thread.
    void request_cancel(uring_op& op) noexcept;
    /// Owner or thief after resumption: drop a queued cancel of a finished op.
    void forget_cancel(uring_op& op) noexcept;

    static constexpr std::uint64_t cancel_tag = 0;
    static constexpr std::uint64_t wake_tag = 1;

private:
    void kick() noexcept override;
    auto reap() -> bool;
    void submit_cancels();
    void arm_wake();

    io_uring ring_{};
    bool ring_ok_ = false;
    bool taskrun_flag_ = false;  // the kernel flags deferred completion work (IORING_SQ_TASKRUN)
    int wake_fd_ = -1;
    std::uint64_t wake_buf_ = 0;
    buffer_pool* buffers_ = nullptr;
    bool buffers_tried_ = false;
    unsigned queued_ = 0;                   // SQEs prepared since the last submit (owner only)
    std::atomic<std::size_t> inflight_{0};  // written by the owner only; read by any thread
    std::vector<uring_op*> multishot_;      // armed multishot operations (owner only)
    std::mutex cancel_mu_;
    uring_op* cancel_head_ = nullptr;           // guarded by cancel_mu_
    std::atomic<bool> cancels_waiting_{false};  // set under cancel_mu_ with a push to the list
};

// ---- epoll ---------------------------------------------------------------------------------

class epoll_reactor;
struct readiness_waiter;

}  // namespace weft::detail

namespace weft::detail {

/// Per-socket state. io_uring needs none of it beyond the fd; epoll keeps the readiness
/// registration here: the socket is registered (edge-triggered, in and out) with the epoll of the
/// first worker that waits on it, and that worker's reactor delivers its events from then on,
/// whichever worker the waiting task runs on.
/// read_seq / write_seq count readiness events (changed under mu; read without it for a
/// snapshot): a waiter snapshots one before its non-blocking attempt and sleeps only if, under
/// mu, no event came in between (so an edge is never lost between EAGAIN and the wait; a stale
/// snapshot only costs one more attempt).
/// read_spent_at / write_spent_at: a stream transfer moved fewer bytes than asked, so it drained
/// the receive queue (or filled the send buffer); the field holds the sequence it ran at, plus
/// one (0: none). Until the next event another attempt could only fail with EAGAIN, so the next
/// transfer waits for the event instead: one system call per request saved. Edge-triggered epoll
/// reports every arrival after the drain as a new event, and the wait re-checks the sequence
/// under mu, so skipping the attempt never strands data. Except the end: a peer's FIN or reset
/// that came in with the last data is reported in the same event as the data, and no later
/// event announces it; so once an event has said hang-up or error, read_final / write_final
/// are set for good and every transfer is attempted (it returns 0 or the error at once).
/// readers / writers list the tasks waiting (usually one of each; several tasks accepting on
/// one listener wait together): an event wakes them all, and those that lose the race for the
/// data (or connection) wait again.
struct io_handle {
    explicit io_handle(int f) noexcept : fd(f) {}
    int fd;
    spin_lock mu;  // held for a few pointer moves (and the epoll_ctl of the first wait)
    epoll_reactor* owner = nullptr;           // guarded by mu; set once
    std::atomic<std::uint32_t> read_seq{0};   // written under mu
    std::atomic<std::uint32_t> write_seq{0};  // written under mu
    std::atomic<std::uint32_t> read_spent_at{0};
    std::atomic<std::uint32_t> write_spent_at{0};
    std::atomic<bool> read_final{false};
    std::atomic<bool> write_final{false};
    readiness_waiter* readers = nullptr;  // guarded by mu
    readiness_waiter* writers = nullptr;  // guarded by mu
    io_handle* reg_prev = nullptr;        // in owner's registered list (its reg_mu_)
    io_handle* reg_next = nullptr;
};

/// Waits for a readiness event on an io_handle, embedded in the awaiting frame.
/// `state` (guarded by the handle's mu): idle -> waiting -> fired | cancelled. Whoever moves it
/// out of waiting resumes the waiter, once.
struct readiness_waiter : stop_callback_node {
    enum class state : std::uint8_t { idle, waiting, fired, cancelled };
    readiness_waiter() noexcept : stop_callback_node(&readiness_waiter::on_stop) {}
    readiness_waiter(const readiness_waiter&) = delete;
    auto operator=(const readiness_waiter&) -> readiness_waiter& = delete;
    static void on_stop(stop_callback_node* n) noexcept;

    io_handle* handle = nullptr;
    bool write = false;
    state st = state::idle;
    bool registered = false;
    readiness_waiter* next_waiter = nullptr;  // in the handle's readers / writers (its mu)
    std::coroutine_handle<> waiter;
    worker_base* home = nullptr;
    stop_state* stop = nullptr;
};

class epoll_reactor final : public reactor {
public:
    epoll_reactor();
    ~epoll_reactor() override;

    void attach() override;
    void detach() noexcept override;
    void park(std::optional<std::int64_t> timeout_ns) override;
    auto poll() -> bool override;
    [[nodiscard]] auto poll_is_cheap() const noexcept -> bool override { return false; }
    [[nodiscard]] auto expects_io() const noexcept -> bool override {
        return waiting_.load(std::memory_order_relaxed) != 0;
    }
    [[nodiscard]] auto pending() const noexcept -> std::size_t override {
        return waiting_.load(std::memory_order_seq_cst);
    }

    /// Owner thread: registers `h` with this epoll if it is not registered anywhere yet (or
    /// only with the epoll of a runtime that has stopped: sockets may outlive a runtime).
    auto ensure_registered(io_handle& h) -> std::error_code;
    /// Any thread: unregisters and frees `h` once no event of this reactor can still name it.
    void retire(io_handle* h) noexcept;
    void waiting_changed(int delta) noexcept {
        waiting_.fetch_add(delta, std::memory_order_seq_cst);
    }

private:
    void kick() noexcept override;
    auto wait(int timeout_ms) -> bool;
    void free_retired() noexcept;

    int epfd_ = -1;
    int wake_fd_ = -1;
    std::atomic<std::size_t> waiting_{0};
    std::mutex retire_mu_;
    std::vector<io_handle*> retired_;  // guarded by retire_mu_
    std::mutex reg_mu_;
    io_handle* registered_ = nullptr;  // guarded by reg_mu_; orphaned at detach
};

/// The reactor on this thread as an io_uring / epoll reactor, or a clear error.
auto current_uring() -> uring_reactor&;
auto current_epoll() -> epoll_reactor&;

}  // namespace weft::detail
