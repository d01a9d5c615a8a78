#pragma once

// For IO tests of a cancellation that comes from outside the waiting task's runtime: the stop
// is requested on a thread of its own, by a plain thread, by a thread inside sync_wait (which
// runs an inline executor there) or by a task of another runtime. Whichever it is, the
// cancelled task must resume on a worker of its own runtime.

#include <thread>

#include "weft/core/sync_wait.hpp"
#include "weft/core/task.hpp"
#include "weft/io/reactor.hpp"
#include "weft/sched/runtime.hpp"

namespace weft::test {

enum class stopper { plain_thread, sync_wait, other_runtime };

inline constexpr stopper every_stopper[] = {stopper::plain_thread, stopper::sync_wait,
                                            stopper::other_runtime};

inline auto to_string(stopper s) -> const char* {
    switch (s) {
        case stopper::plain_thread:
            return "a plain thread";
        case stopper::sync_wait:
            return "a thread in sync_wait";
        case stopper::other_runtime:
            return "a task of another runtime";
    }
    return "?";
}

/// Calls `stop()` from `who` (another runtime: one worker on `backend`) on a thread of its own,
/// and returns once that thread has ended.
template <typename Stop>
void stop_from(stopper who, io_backend backend, Stop stop) {
    std::thread t([&] {
        switch (who) {
            case stopper::plain_thread:
                stop();
                break;
            case stopper::sync_wait:
                weft::sync_wait([&]() -> task<void> {
                    stop();
                    co_return;
                }());
                break;
            case stopper::other_runtime: {
                weft::runtime other{io_runtime_options(1, backend)};
                other.block_on([&]() -> task<void> {
                    stop();
                    co_return;
                }());
                break;
            }
        }
    });
    t.join();
}

}  // namespace weft::test
