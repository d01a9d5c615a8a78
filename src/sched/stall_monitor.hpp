#pragma once

// Private to weft::sched: the stall detector and the reader of runtime_options::dump_signal.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "worker.hpp"

namespace weft::detail {

class runtime_core;

/// The worker's capture buffer, for the stack signal's handler (set by the worker at start).
extern constinit thread_local sched_worker::stack_capture* tl_stack_capture;

/// One thread per runtime that has a stall_threshold or a dump_signal. Every tick (half the
/// threshold, or 50 ms) it:
/// - prints runtime::dump() to stderr if dump_signal arrived since the last tick;
/// - reads each worker's heartbeat (sched_worker::beat): odd and unchanged since a reading at
///   least `threshold` ago means the worker is still inside the task it entered then (or in the
///   loop steps after it, before it found more work or parked: see sched_worker::beat). Each such
///   stall is reported once (the beat value is remembered): the worker is counted
///   (sched_worker::stalls), sent stack_signal() so that its handler records its native stack
///   into the worker's preallocated buffer (backtrace(), nothing else), and the report goes to
///   on_stall, or to stderr.
/// The workers' side is two relaxed stores per task they run; the monitor never blocks them.
class stall_monitor {
public:
    explicit stall_monitor(runtime_core& rt);
    stall_monitor(const stall_monitor&) = delete;
    auto operator=(const stall_monitor&) -> stall_monitor& = delete;
    ~stall_monitor();

    /// The signal that asks a worker for its native stack (a real-time signal: SIGRTMIN + 4).
    [[nodiscard]] static auto stack_signal() noexcept -> int;

private:
    void run();
    void check(std::chrono::steady_clock::time_point now);
    void report(sched_worker& w);

    struct watch {
        std::uint64_t beat = 0;  // the last odd beat seen
        std::chrono::steady_clock::time_point since{};
        std::uint64_t reported = 0;  // the beat of the last stall reported
    };

    runtime_core& rt_;
    const std::chrono::milliseconds threshold_;  // 0: stall detection off
    std::vector<watch> watches_;
    std::uint64_t dumps_seen_ = 0;
    std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false;     // guarded by mu_
    bool started_ = false;  // guarded by mu_: the thread runs
    std::thread thread_;
};

}  // namespace weft::detail
