#pragma once

// Private to weft::bus: how a backend's drain task resumes the awaited publishes it completes.

#include <coroutine>
#include <cstddef>
#include <vector>

namespace weft::bus {

/// The awaited publishes one drain task completed in one pass over its delivery reports,
/// resumed by that task, in completion order, on its own worker, before it waits again.
///
/// Why: through the usual wake-up (resume_waiter: the LIFO slot, each newly woken task pushing
/// the one before into the deque, where a parked worker is called to steal it), a pass that
/// completes many awaited publishes spread them over the workers, and each produced its next
/// message from there: the workers then contended for the producer's and librdkafka's locks
/// and freed each other's allocations, and 2 workers made fewer messages per second than 1 at
/// more CPU per message (docs/design/decisions.md).
///
/// Protocol (one thread, no atomics): the drain task calls collect() (out of line; or holds a
/// collecting_scope), completes its reports through publish_sink::complete, calls
/// stop_collecting(), then resume_all().
/// Between collect() and stop_collecting(), publisher::complete on this thread appends a task
/// it would have woken to the run (add) instead of waking it, when the task belongs to the
/// executor of this thread's worker and the run has room (capacity: the producer's
/// max_pending, so it never allocates); otherwise it wakes it as usual. resume_all() runs
/// each task until its next suspension (its next publish waiting for its ack, typically), one
/// after the other: a bounded run of at most `capacity` turns.
/// Lifetime: the run belongs to the drain task's state, not to the publisher, because a
/// resumed task may close and destroy the publisher before the run ends.
/// NOTE: only outside coroutine bodies (these functions read a thread_local): the functions
/// are out of line in publisher.cpp.
class completion_run {
public:
    explicit completion_run(std::size_t capacity) { handles_.reserve(capacity); }
    completion_run(const completion_run&) = delete;
    auto operator=(const completion_run&) -> completion_run& = delete;

    /// From now on publisher::complete on this thread adds to this run.
    [[gnu::noinline]] void collect() noexcept;
    /// publisher::complete on this thread wakes tasks as usual again.
    [[gnu::noinline]] void stop_collecting() noexcept;
    /// Resumes every task added, in the order added; the number resumed.
    [[gnu::noinline]] auto resume_all() -> std::size_t;

    /// collect() now and stop_collecting() at the end of the scope, also when the pass throws
    /// (the thread is never left collecting into a run nobody resumes).
    class [[nodiscard]] collecting_scope {
    public:
        explicit collecting_scope(completion_run& r) noexcept : run_(r) { run_.collect(); }
        collecting_scope(const collecting_scope&) = delete;
        auto operator=(const collecting_scope&) -> collecting_scope& = delete;
        ~collecting_scope() { run_.stop_collecting(); }

    private:
        completion_run& run_;
    };

    /// The run collecting on this thread now, or nullptr.
    [[nodiscard]] static auto collecting() noexcept -> completion_run*;
    /// publisher::complete: takes `h` to resume later; false (nothing taken) when full.
    auto add(std::coroutine_handle<> h) noexcept -> bool {
        if (handles_.size() == handles_.capacity()) {
            return false;
        }
        handles_.push_back(h);
        return true;
    }

private:
    std::vector<std::coroutine_handle<>> handles_;
};

}  // namespace weft::bus
