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

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "accept_queue.hpp"
#include "backend_test.hpp"
#include "multishot.hpp"
#include "provided_buffer_ring.hpp"
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

/// Provided buffers out of their io_uring rings now: taken by a receive's completion and not yet
/// back in the ring (held by a bytes, or released and waiting for the ring's worker to return
/// it). Always 0 on epoll. Counted only while an io_wait_test runs (it sets the hook).
inline std::atomic<std::int64_t> provided_buffers_out{0};

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
/// (a count a test left raised would let the next one act too early), and every provided
/// buffer a receive took is back in its ring (or freed with it): none leaked.
class io_wait_test : public backend_test {
protected:
    void SetUp() override {
        backend_test::SetUp();
        provided_buffers_out.store(0);
        detail::provided_buffers_out_for_test.store(&provided_buffers_out);
    }
    void TearDown() override {
        detail::provided_buffers_out_for_test.store(nullptr);
        EXPECT_EQ(provided_buffers_out.load(), 0) << "provided buffers not returned";
        EXPECT_EQ(detail::io_operations_waiting_for_test(), 0U);
        EXPECT_EQ(detail::accept_waiters_for_test.load(), 0);
        EXPECT_EQ(detail::accepted_unclaimed_for_test.load(), 0);
        EXPECT_EQ(detail::blocking_file_ops_for_test.load(), 0);
        EXPECT_EQ(multishot_armed(), 0);
    }
};

}  // namespace weft::test
