#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

namespace weft {

/// How an idle worker sleeps. The runtime has exactly one place where a worker waits: it calls
/// `park(timeout)` when it has nothing to run, and other threads call `unpark()` when they give
/// it work. The default is a futex; weft::io supplies a reactor (io_uring / epoll wait with the
/// next timer as the timeout, woken through an eventfd or a ring message) so that sleeping and
/// waiting for IO are the same wait.
///
/// Thread contract: `park` is called only by the owning worker; `unpark` by any thread, any
/// number of times. An `unpark` that comes before `park` makes that `park` return at once (the
/// wake-up is never lost).
class park_driver {
public:
    virtual ~park_driver() = default;

    /// Called once, on the worker's own thread, before it runs anything. A reactor sets itself
    /// up here (io_uring's single-issuer mode ties a ring to the thread that uses it).
    virtual void attach() {}
    /// Called on the worker's thread when it stops (after its last task).
    virtual void detach() noexcept {}

    /// Sleeps until unparked or, if given, until `timeout_ns` nanoseconds have passed. A
    /// reactor also completes IO here: it queues (detail::current_worker()->push) every task whose
    /// operation finished.
    virtual void park(std::optional<std::int64_t> timeout_ns) = 0;
    virtual void unpark() noexcept = 0;

    /// Without blocking: submit queued operations and queue the tasks of finished ones. True if
    /// it queued any. The worker calls it between tasks (every few dozen) and before it looks
    /// for work elsewhere, so a busy worker still completes IO.
    virtual auto poll() -> bool { return false; }
    /// False if `poll()` makes a system call even when nothing is ready (epoll_wait): a worker
    /// that runs out of tasks then does not poll before or during its search (each empty look
    /// costs a system call); its park waits on the reactor, which returns at once if events are
    /// ready, and a busy worker still polls at every fairness tick.
    [[nodiscard]] virtual auto poll_is_cheap() const noexcept -> bool { return true; }
    /// Owner thread: true while an IO operation of this worker is in flight or armed, so its
    /// next work will likely come as a completion, delivered by the kernel to the reactor it
    /// parks in. Such a worker searches other workers briefly before parking instead of
    /// spinning: spinning only pays when the wake-up it saves is another worker's system call.
    [[nodiscard]] virtual auto expects_io() const noexcept -> bool { return false; }
    /// Operations in flight (any thread; shutdown waits until it is 0).
    [[nodiscard]] virtual auto pending() const noexcept -> std::size_t { return 0; }
};

/// A park_driver on a Linux futex (no file descriptors, no system call when not sleeping).
[[nodiscard]] auto make_futex_driver() -> std::unique_ptr<park_driver>;

}  // namespace weft
