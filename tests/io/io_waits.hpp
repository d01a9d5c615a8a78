#pragma once

// For IO tests that must act on a task they know is waiting in IO (cancel it, hand its socket
// on), or on a state the IO layer reaches in the background (a multishot operation stopped,
// a connection queued), without sleeping and hoping it got there: the counts src/io exposes
// (its *_for_test hooks), and a wait that yields until one says so. A state that never comes
// hangs the test until the watchdog (tests/test_util.hpp) fails it.
//
// The counts are process-wide: tests run one at a time, and every count is back to zero once a
// test's runtimes and sockets are gone (io_wait_test checks it after each test).

#include <gtest/gtest.h>

#include <cstddef>

#include "accept_queue.hpp"
#include "backend_test.hpp"
#include "multishot.hpp"
#include "reactor.hpp"
#include "weft/core/task.hpp"
#include "weft/sched/yield.hpp"

namespace weft::test {

/// Tasks waiting in IO now: operations in flight on io_uring rings and readiness waits
/// registered with epoll (one per task in these tests), tasks queued on a listener's multishot
/// accept (io_uring), and file operations queued or running on an epoll runtime's blocking pool.
inline auto io_waits() -> std::size_t {
    const auto accepting = detail::accept_waiters_for_test.load(std::memory_order_relaxed);
    const auto files = detail::blocking_file_ops_for_test.load(std::memory_order_relaxed);
    return detail::io_operations_waiting_for_test() + static_cast<std::size_t>(accepting) +
           static_cast<std::size_t>(files);
}

/// Multishot operations (io_uring accepts and receives) armed now; 0 on epoll.
inline auto multishot_armed() -> int {
    return detail::multishot_armed_for_test.load(std::memory_order_relaxed);
}

/// `co_await until([&] { return ...; })`: yields (the worker polls its reactor meanwhile) until
/// `ready()` is true.
template <typename Ready>
auto until(Ready ready) -> task<void> {
    for (;;) {
        if (ready()) {
            co_return;
        }
        co_await yield();
    }
}

/// The fixture of the tests that wait on these counts: after each test, all are back to zero
/// (a count a test left raised would let the next one act too early).
class io_wait_test : public backend_test {
protected:
    void TearDown() override {
        EXPECT_EQ(detail::io_operations_waiting_for_test(), 0U);
        EXPECT_EQ(detail::accept_waiters_for_test.load(), 0);
        EXPECT_EQ(detail::accepted_unclaimed_for_test.load(), 0);
        EXPECT_EQ(detail::blocking_file_ops_for_test.load(), 0);
        EXPECT_EQ(multishot_armed(), 0);
    }
};

}  // namespace weft::test
