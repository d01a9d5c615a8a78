#pragma once

// Private to weft::io: the io_uring reactor and the operations it runs.

#include <liburing.h>

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "provided_buffer_ring.hpp"
#include "reactor.hpp"

namespace weft::detail {

class uring_reactor;

/// An operation submitted to a worker's ring, embedded in the awaiting frame.
/// user_data encoding on the ring: 0 = a cancel request (its CQE is ignored), 1 = the wake
/// eventfd read, 2 = the cancel of every request when the reactor detaches, anything else = the
/// address of a uring_op.
/// `state` (owner thread only): idle -> submitted (SQE prepared) -> done (CQE reaped; `res` is
/// the kernel's result, -ECANCELED when cancelled in the kernel). Cancellation from any thread
/// links the op into the reactor's cancel list (under cancel_mu_); the owner turns that into an
/// IORING_OP_ASYNC_CANCEL, which names the op by its address only. The op unlinks itself on
/// resumption, so the list never holds a finished op; the buffer stays valid until the CQE
/// arrives because the waiter only resumes then.
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
    // worker is still resuming the rest of a batch). Not for everything: buffered reads lose
    // to the extra enters (docs/design/decisions.md). A lone
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

/// Multishot operations a detaching reactor left to the ring's exit because the kernel had not
/// ended them within detach_drain_limit (process-wide, relaxed; expected to stay 0).
inline std::atomic<std::uint64_t> multishot_detach_leftovers{0};
inline constexpr std::chrono::milliseconds detach_drain_limit{1000};

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

    /// Owner thread: an SQE to fill (submits queued ones first if the ring is full); throws
    /// std::system_error (EBUSY) when the kernel takes none of them (its completion queue is
    /// full: the next poll reaps it).
    auto get_sqe() -> io_uring_sqe*;
    /// Owner thread: get_sqe for paths that cannot throw; nullptr where get_sqe throws.
    auto try_get_sqe() noexcept -> io_uring_sqe*;
    /// Owner thread: `op` was prepared in an SQE from get_sqe.
    void submitted(uring_op& op) noexcept;
    /// Owner thread: an SQE for the multishot operation `op` (see uring_op::multishot), which
    /// the reactor tracks until its last CQE or until it detaches. Throws as get_sqe does (or
    /// std::bad_alloc), with nothing changed.
    auto submit_multishot(uring_op& op) -> io_uring_sqe*;
    /// Owner thread: this worker's provided buffers (made on first use), or nullptr.
    auto buffers() -> provided_buffer_ring*;
    /// Any thread: cancel `op` in the kernel (the owner submits the cancel at its next poll or
    /// park). The caller keeps `op` registered meanwhile (its stop callback, or a multishot
    /// operation still armed here), so the reactor is alive.
    void request_cancel(uring_op& op) noexcept {
        if (queue_cancel(op)) {
            wake_for_cancel();
        }
    }
    /// request_cancel in two steps, for a caller that holds a spin lock (multishot_op): queues
    /// the cancel, and returns true if the owner must be woken for it, which the caller does
    /// with wake_for_cancel once its lock is released. The reactor stays alive until then: its
    /// destructor waits for every wake-up owed.
    [[nodiscard]] auto queue_cancel(uring_op& op) noexcept -> bool;
    void wake_for_cancel() noexcept;
    /// Owner or thief after resumption: drop a queued cancel of a finished op.
    void forget_cancel(uring_op& op) noexcept;

    static constexpr std::uint64_t cancel_tag = 0;
    static constexpr std::uint64_t wake_tag = 1;
    static constexpr std::uint64_t detach_cancel_tag = 2;

private:
    void kick() noexcept override;
    auto reap() -> bool;
    void submit_cancels() noexcept;
    void arm_wake() noexcept;        // wake_armed_ tells whether it got an SQE
    void end_multishots() noexcept;  // detach: cancel each armed multishot op, reap to its end

    io_uring ring_{};
    bool ring_ok_ = false;
    // Read once, at construction: park never blocks for long under valgrind (see park()).
    bool under_valgrind_ = false;
    bool taskrun_flag_ = false;  // the kernel flags deferred completion work (IORING_SQ_TASKRUN)
    int wake_fd_ = -1;
    std::uint64_t wake_buf_ = 0;
    // The read of wake_fd_ is in the ring (owner only). Without it nothing can end a park, so
    // park does not block until arm_wake got an SQE again.
    bool wake_armed_ = false;
    provided_buffer_ring* buffers_ = nullptr;
    bool buffers_tried_ = false;
    unsigned queued_ = 0;                   // SQEs prepared since the last submit (owner only)
    std::atomic<std::size_t> inflight_{0};  // written by the owner only; read by any thread
    std::vector<uring_op*> multishot_;      // armed multishot operations (owner only)
    // A spin lock: its sections only link and unlink ops (SQEs are prepared after it), and a
    // multishot operation's own spin lock is held around queue_cancel.
    spin_lock cancel_mu_;
    uring_op* cancel_head_ = nullptr;           // guarded by cancel_mu_
    std::atomic<bool> cancels_waiting_{false};  // set under cancel_mu_ with a push to the list
    // Wake-ups queue_cancel owes (wake_for_cancel not yet called). Incremented under
    // cancel_mu_, decremented (release) after the wake-up; the destructor waits (acquire) for
    // 0 before the reactor goes.
    std::atomic<int> wakes_owed_{0};
};

/// This thread's io_uring reactor; throws std::logic_error when it has none.
auto current_uring() -> uring_reactor&;

}  // namespace weft::detail
