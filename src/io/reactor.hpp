#pragma once

// Private to weft::io: what both reactors share. A reactor is a worker's park_driver
// (sched/driver.hpp): the worker sleeps in it, and it queues the tasks whose IO finished on that
// worker. The backends: uring_reactor.hpp, epoll_reactor.hpp.

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
    reactor(const reactor&) = delete;
    auto operator=(const reactor&) -> reactor& = delete;
    ~reactor() override { detached_for_test(); }  // if it never detached
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

    // Test hook bookkeeping (io_operations_waiting_for_test): attach and detach call these.
    void attached_for_test();
    void detached_for_test() noexcept;

    static constinit thread_local reactor* tl_reactor;
    std::atomic<bool> notified_{false};
    std::atomic<bool> sleeping_{false};

private:
    io_backend backend_;
};

/// Test hook: operations waiting in every attached reactor of the process, the sum of their
/// pending(): SQEs in flight on io_uring rings (a multishot operation is not one: see
/// accept_waiters_for_test), readiness waiters registered with epoll reactors. A test waits
/// until the task it is about to act on is parked in the reactor. Costs nothing unless called:
/// it reads the counts shutdown reads anyway (the list changes only when a reactor attaches or
/// detaches).
auto io_operations_waiting_for_test() -> std::size_t;
/// Test hook: file operations (a file_batch counts once) an epoll worker handed to the blocking
/// pool (file IO waits there, not in the reactor) that have not finished, process-wide
/// (relaxed).
inline std::atomic<int> blocking_file_ops_for_test{0};

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
        if (WEFT_SHUFFLED(2)) {
            here->push(h);  // shuffle.hpp: completions of one poll run in another order
        } else {
            here->push_io_ready(h);
        }
        return true;
    }
    home->schedule_remote(h);
    return false;
}

/// Any thread, for a task whose wait was cancelled or failed there (a stop callback, a listener
/// closing): queued on the calling worker when it belongs to the task's runtime (`home`, the
/// worker it waited on, names it), else handed back to its own runtime. Never queued on the
/// executor of whoever requested the stop (a thread in sync_wait, another runtime's worker):
/// it would run the task there, outside its runtime, whose shutdown does not wait for it.
inline void resume_soon(std::coroutine_handle<> h, worker_base* home) {
    worker_base* here = current_worker();
    if (here != nullptr &&
        (home == nullptr || here == home || here->root_stop() == home->root_stop())) {
        here->push(h);
    } else {
        home->schedule_remote(h);
    }
}

// A poll that made fewer tasks runnable than this runs them itself: waking a parked worker
// (a context switch on each side) to steal a handful of short IO tasks costs more than it saves
// (echo server, 2 workers: 23,500 vs 2,000 context switches per 150k requests). A bigger batch
// wakes one helper.
inline constexpr unsigned wake_helper_batch = 8;

}  // namespace weft::detail
