#pragma once

// Private to weft::io: a stream's multishot receive on io_uring.

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <mutex>
#include <system_error>
#include <vector>

#include "multishot.hpp"
#include "reactor.hpp"
#include "uring_reactor.hpp"
#include "weft/io/bytes.hpp"
#include "weft/sched/detail/io_home.hpp"

namespace weft::detail {

/// What one wait on a recv_queue ends with: data (non-empty), an error (io_errc::eof once the
/// peer closed and everything before it was taken; operation_canceled; what the kernel said),
/// or neither with `heap_read` set: the worker's provided buffers ran out, nothing is queued and
/// the operation ended, so the caller reads once into memory of its own (nothing else reads the
/// socket meanwhile) and the next wait arms the operation again.
struct recv_outcome {
    bytes data;
    std::error_code err;
    bool heap_read = false;
};

class recv_queue;

/// Where a stream's receive goes when the IO home is dropped (the load outgrew one worker):
/// a multiplicative (Fibonacci) hash of its descriptor, so the streams split evenly over the
/// rings whatever pattern their descriptor numbers follow. Moving each instead to the thief
/// that first ran its reader left most connections on the old home's ring, and the
/// connections there were served less often (docs/design/decisions.md).
[[nodiscard]] inline auto spread_worker(int fd, unsigned workers) noexcept -> unsigned {
    return ((static_cast<std::uint32_t>(fd) * 2654435761U) >> 16) % workers;
}

/// Test hook: multishot receives cancelled because their reader lagged (max_ready chunks
/// queued), process-wide (relaxed; counted once per cancel, on that rare path only).
inline std::atomic<int> recv_lag_cancels_for_test{0};
/// Multishot receives ended on one ring to be armed on another of the same runtime because its
/// IO home changed (runtime_options::consolidate_io), process-wide (relaxed; once per move).
inline std::atomic<std::uint64_t> recv_home_moves{0};
/// Test hook: multishot receives armed now on the ring of worker i (i < 4), process-wide, over
/// every runtime (relaxed; a test with one io_uring runtime reads where its streams are).
inline std::atomic<int> recv_armed_on_worker_for_test[4] = {};

/// The stream's one reader, waiting for data; embedded in its frame. `st` is guarded by the
/// queue's mutex: idle -> waiting -> done; whoever moves it to done resumes the reader, once.
class recv_awaiter : private stop_callback_node {
public:
    recv_awaiter(recv_queue& q, bool may_arm) noexcept
        : stop_callback_node(&recv_awaiter::on_stop), q_(&q), may_arm_(may_arm) {}
    recv_awaiter(const recv_awaiter&) = delete;
    auto operator=(const recv_awaiter&) -> recv_awaiter& = delete;

    auto await_ready() -> bool;
    template <typename P>
    WEFT_PUBLISHES_HANDLE auto await_suspend(std::coroutine_handle<P> h) -> bool {
        return suspend(h, stop_of(h));
    }
    /// The outcome, where it lies in this awaiter (moved from by whoever takes it).
    auto await_resume() -> recv_outcome&&;

private:
    friend class recv_queue;
    enum class state : std::uint8_t { idle, waiting, done };
    auto suspend(std::coroutine_handle<> h, stop_state* s) -> bool;
    static void on_stop(stop_callback_node* n) noexcept;

    recv_queue* q_;
    bool may_arm_;
    std::coroutine_handle<> waiter_;
    worker_base* home_ = nullptr;
    stop_state* stop_ = nullptr;
    bool registered_ = false;
    bool cancelled_ = false;
    // Set when this wait ended the operation to move it to worker move_to_'s ring (IO home):
    // its last CQE sends the reader there, which arms it again.
    int move_to_ = -1;
    state st_ = state::idle;
    recv_outcome out_;
};

/// One IORING_OP_RECV with IORING_RECV_MULTISHOT and buffer select, armed on the ring of the
/// worker whose task receives (first, or after the stream moved to another runtime): the kernel
/// posts every chunk that arrives, in a buffer from that worker's provided-buffer ring, with no SQE
/// per receive. Chunks queue here (at most `max_ready`, 32 KiB: beyond that the operation is
/// cancelled, so a reader that stops reading leaves data in the socket and TCP flow control applies
/// as without multishot; the next wait re-arms it). It ends at eof, an error, when the buffers run
/// out (ENOBUFS), the stream closes or the reactor detaches; eof and errors are delivered after the
/// data before them.
///
/// IO home (runtime_options::consolidate_io, see src/sched/runtime_core.hpp): when its reader
/// waits with nothing queued and the runtime wants the receive on another worker's ring, the
/// operation is cancelled where it is armed and its last CQE posts the reader to that worker,
/// which arms it on its own ring (a ring is reaped only by its own thread: SINGLE_ISSUER and
/// DEFER_TASKRUN). A reader that finds it not armed and belonging elsewhere posts itself there
/// first. Once per stream per change of the home, never per wait.
///
/// Once a stream has received this way, every read of it goes through the queue (read_some
/// copies out of it), so data is never taken by two operations at once and stays in order.
/// Heap-allocated and reference-counted (multishot_op): the stream holds one reference, the
/// ring one while armed (its last CQE may come after the stream is gone).
class recv_queue final : private multishot_op<recv_queue> {
public:
    static constexpr unsigned max_ready = 8;

    explicit recv_queue(int fd) noexcept;

    /// `co_await q.next()`: the next chunk (see recv_outcome). One reader at a time.
    /// Armed on another ring than the caller's (the stream moved to another runtime), the
    /// operation is cancelled there first and what it queued is read before anything else.
    /// `may_arm == false` (a reader that is leaving io_uring: an epoll runtime) never arms it:
    /// once nothing is queued and it is not armed, the outcome is empty (no data, no error).
    [[nodiscard]] auto next(bool may_arm = true) noexcept -> recv_awaiter {
        return recv_awaiter(*this, may_arm);
    }
    /// Puts back the unread tail of a chunk (read_some took less than it got); it comes first.
    void unread(bytes rest);
    /// The stream is closing (no operation pending on it): cancels the operation in the kernel,
    /// releases the queued buffers, drops the stream's reference.
    void close() noexcept;

private:
    friend class recv_awaiter;
    friend class multishot_op<recv_queue>;  // deletes it; ring_detached
    /// A reader ring_detached took off, to hand back to its runtime after mu_ is released.
    struct detached_reader {
        std::coroutine_handle<> waiter;
        worker_base* home = nullptr;
        void resume_on_their_runtimes() const noexcept {
            if (waiter) {
                home->schedule_remote(waiter);
            }
        }
    };
    auto ring_detached() noexcept -> detached_reader;  // under mu_: takes a waiting reader off
    ~recv_queue();
    // Under mu_:
    auto take(recv_outcome& out) -> bool;  // data, a final error or heap_read; false: wait
    [[nodiscard]] auto queued() const noexcept -> std::size_t { return ready_.size() - head_; }
    void arm(uring_reactor& r);  // throws (no SQE, no memory) with nothing armed
    /// The worker whose ring this receive should move to (consolidate_io), or -1: stay.
    [[nodiscard]] auto wanted_worker() const noexcept -> int;
    void count_armed(int delta) const noexcept;  // recv_armed_on_worker_for_test
    static auto on_cqe(uring_op& op) noexcept -> bool;

    const int fd_;
    bool out_of_buffers_ = false;  // guarded by mu_ (here, beside fd_: no word of padding)
    // Guarded by mu_:
    // Queued chunks: ready_[head_..]. A vector, not a deque: an idle stream allocates nothing
    // (a default std::deque allocates ~570 B, which doubled an idle connection's memory).
    std::vector<bytes> ready_;
    std::size_t head_ = 0;
    provided_buffer_ring* pool_ = nullptr;  // of the ring it is armed on
    recv_awaiter* reader_ = nullptr;
    // Where and when it was last armed: the worker of the ring (an index in armed_runtime_) and
    // the IO home's epoch then (see wanted_worker).
    unsigned armed_worker_ = 0;
    std::uint32_t armed_epoch_ = 0;
    std::error_code end_;  // eof or an error, after the queued data
};

}  // namespace weft::detail
