#pragma once

// Private to weft::io: the life cycle the multishot operations share (accept_queue,
// recv_queue).

#include <atomic>
#include <cstdint>

#include "reactor.hpp"
#include "uring_reactor.hpp"

namespace weft::detail {

/// A multishot io_uring operation held by its socket and, while armed, by the ring whose CQEs
/// may still name it: reference-counted, the last reference deletes it. It is armed on the
/// ring of the worker that first waits and re-armed after it ends (an error, a cancel, the
/// reactor detaching); the derived class keeps what the CQEs bring under mu_. Waiters are
/// resumed by the ring's worker when they belong to its runtime, else on their own runtime
/// (resume_from_io).
/// mu_ is a spin lock, and holds to its contract: under it the queue and the operation's
/// state change, nothing else. A waiter is resumed, and the ring's worker woken for a cancel
/// (cancel_armed's wake_after_unlock), after it is released. The one exception is arming,
/// which must be one step with `armed_`: it takes an SQE of the calling worker's own ring
/// (a system call only when that queue is full) and may grow the ring's list of multishot
/// operations.
/// CRTP, not a virtual destructor: no vtable (UBSan's vptr check of a polymorphic object needs
/// a pipe, which fails, and so reports an error, in a process out of descriptors - exactly
/// where accept must keep working).
/// Multishot operations armed so far, process-wide (tests count re-arms with it).
inline std::atomic<std::uint64_t> multishot_arms{0};
/// Test hook: multishot operations armed now, process-wide (a test waits until a receive or
/// an accept has stopped: every CQE it will post has been reaped).
inline std::atomic<int> multishot_armed_for_test{0};

template <typename Derived>
class multishot_op : protected uring_op {
public:
    multishot_op(const multishot_op&) = delete;
    auto operator=(const multishot_op&) -> multishot_op& = delete;

protected:
    explicit multishot_op(bool (*complete)(uring_op&) noexcept) noexcept {
        on_complete = complete;  // every CQE, on the ring's thread
        on_detach = &multishot_op::on_ring_detach;
    }
    ~multishot_op() = default;

    /// Under mu_: an SQE to prepare for the operation on `r`, which takes a reference.
    auto arm_on(uring_reactor& r) -> io_uring_sqe* {
        io_uring_sqe* sqe = r.submit_multishot(*this);
        armed_ = true;
        armed_runtime_ = current_worker()->root_stop();
        multishot_arms.fetch_add(1, std::memory_order_relaxed);
        multishot_armed_for_test.fetch_add(1, std::memory_order_relaxed);
        cancelling_ = false;
        refs_.fetch_add(1, std::memory_order_relaxed);  // the ring's
        return sqe;
    }
    /// The wake-up a cancel owes the ring's worker (uring_reactor::queue_cancel), given once
    /// mu_ is released: declared before the lock guard, it is destroyed after it.
    class wake_after_unlock {
    public:
        wake_after_unlock() = default;
        wake_after_unlock(const wake_after_unlock&) = delete;
        auto operator=(const wake_after_unlock&) -> wake_after_unlock& = delete;
        ~wake_after_unlock() {
            if (owed_ != nullptr) {
                owed_->wake_for_cancel();
            }
        }

    private:
        friend class multishot_op;
        uring_reactor* owed_ = nullptr;
    };
    /// Under mu_: cancel it in the kernel (once) if it is armed; its last CQE follows. The
    /// ring's worker is woken for it through `wake`, after mu_ is released.
    void cancel_armed(wake_after_unlock& wake) noexcept {
        if (armed_ && !cancelling_) {
            cancelling_ = true;
            if (owner->queue_cancel(*this)) {
                wake.owed_ = owner;  // (at most one cancel per section: cancelling_)
            }
        }
    }
    /// Under mu_, on the ring's thread, at the last CQE (or the ring's detach): no longer armed.
    /// A cancel still queued for it is dropped here, under mu_, before another ring can arm it
    /// again (the queued cancel names this ring; the op must not sit in its list meanwhile).
    void disarmed() noexcept {
        if (armed_) {
            multishot_armed_for_test.fetch_sub(1, std::memory_order_relaxed);
        }
        armed_ = false;
        owner->forget_cancel(*this);
    }
    /// Drops a reference; the last one deletes this.
    void unref() noexcept {
        if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            delete static_cast<Derived*>(this);
        }
    }

    spin_lock mu_;        // a few moves per CQE and per wait (a cancel queued on the rare path)
    bool armed_ = false;  // guarded by mu_: the operation is in the kernel (owner: its ring)
    // Guarded by mu_: the runtime of the ring it is armed on (its workers' shared root stop).
    stop_state* armed_runtime_ = nullptr;
    /// Under mu_: is it armed on a ring of the calling worker's runtime?
    [[nodiscard]] auto armed_in_this_runtime() const noexcept -> bool {
        return armed_ && armed_runtime_ == current_worker()->root_stop();
    }
    bool cancelling_ = false;  // guarded by mu_
    bool closed_ = false;      // guarded by mu_: the socket let go

private:
    // The reactor detached with the operation armed (its runtime shut down). Its own tasks
    // are gone, but a task of another runtime may wait on it (the socket moved): the derived
    // class's ring_detached() (under mu_) takes those waiters off, and they are handed back to
    // their runtimes, to ask again, once mu_ is released.
    static void on_ring_detach(uring_op& op) noexcept {
        auto& m = static_cast<multishot_op&>(op);
        auto waiters = [&] {
            std::lock_guard lock(m.mu_);
            m.disarmed();
            return static_cast<Derived&>(m).ring_detached();
        }();
        m.unref();
        waiters.resume_on_their_runtimes();
    }

    std::atomic<int> refs_{1};  // the socket's, and the ring's while armed
};

}  // namespace weft::detail
