#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>

#include "blocking_pool.hpp"
#include "sync/announce_parked.hpp"
#include "weft/core/scope.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/spawn_blocking.hpp"
#include "weft/sched/timer.hpp"
#include "weft/sched/yield.hpp"
#include "weft/sync/latch.hpp"

namespace {

using namespace std::chrono_literals;

TEST(spawn_blocking, returns_value_from_another_thread) {
    weft::runtime rt{{.workers = 1}};
    auto [v, same] = rt.block_on([]() -> weft::task<std::pair<int, bool>> {
        const auto here = std::this_thread::get_id();
        auto r = co_await weft::spawn_blocking([here] {
            return std::pair{7, std::this_thread::get_id() == here};
        });
        co_return *r;
    }());
    EXPECT_EQ(v, 7);
    EXPECT_FALSE(same);
}

// A thread that cannot be created: the awaiting task gets the error as an exception, and the
// call is neither queued nor counted (it used to be both: a later thread ran it from the dead
// awaiter, and the runtime waited forever for its count to drop).
TEST(spawn_blocking, thread_creation_failure_is_thrown_and_leaves_nothing_behind) {
    weft::runtime rt{{.workers = 1}};
    std::atomic<int> ran{0};
    bool threw = false;
    const int v = rt.block_on([&]() -> weft::task<int> {
        weft::detail::fail_next_blocking_threads_for_test(1);
        try {
            (void)co_await weft::spawn_blocking([&] { ran.fetch_add(1); });
        } catch (const std::system_error&) {
            threw = true;
        }
        auto r = co_await weft::spawn_blocking([&] {
            ran.fetch_add(1);
            return 7;
        });
        co_return r.value();
    }());
    EXPECT_TRUE(threw);
    EXPECT_EQ(v, 7);
    EXPECT_EQ(ran.load(), 1);
}

// A call that does not return by the shutdown deadline is reported and left to finish on its
// own thread; the runtime's destructor returns (it used to wait forever), and the thread, once
// released, finishes without touching the runtime that is gone.
TEST(spawn_blocking, shutdown_timeout_leaves_a_call_that_never_returns_behind) {
    std::mutex m;
    std::condition_variable cv;
    bool release = false;
    std::atomic<bool> started{false};
    std::atomic<bool> finished{false};
    std::string report;
    {
        weft::runtime rt{{.workers = 1, .shutdown_timeout = std::chrono::milliseconds(20)}};
        rt.spawn([&]() -> weft::task<void> {
              (void)co_await weft::spawn_blocking([&] {
                  started.store(true);
                  {
                      std::unique_lock lock(m);
                      cv.wait(lock, [&] { return release; });
                  }
                  finished.store(true);  // the last thing it touches of this test
              });
          }).detach();
        while (!started.load()) {
            std::this_thread::yield();
        }
        testing::internal::CaptureStderr();
    }  // ~runtime: returns once the deadline has passed
    report = testing::internal::GetCapturedStderr();
    EXPECT_NE(report.find("1 blocking call(s) still running"), std::string::npos) << report;
    {
        const std::lock_guard lock(m);
        release = true;
    }
    cv.notify_all();
    while (!finished.load()) {
        std::this_thread::yield();
    }
}

// A shutdown_timeout of milliseconds::max() is a deadline that never passes (it must not wrap
// into the past): the destructor waits for the running call, released from another thread
// while it waits, and reports nothing.
TEST(spawn_blocking, shutdown_timeout_of_duration_max_waits_for_the_call) {
    std::mutex m;
    std::condition_variable cv;
    bool release = false;
    std::atomic<bool> started{false};
    std::atomic<bool> finished{false};
    std::string report;
    std::thread releaser;
    {
        weft::runtime rt{{.workers = 1, .shutdown_timeout = std::chrono::milliseconds::max()}};
        rt.spawn([&]() -> weft::task<void> {
              (void)co_await weft::spawn_blocking([&] {
                  started.store(true);
                  {
                      std::unique_lock lock(m);
                      cv.wait(lock, [&] { return release; });
                  }
                  finished.store(true);
              });
          }).detach();
        while (!started.load()) {
            std::this_thread::yield();
        }
        // Released once the destructor below is (most likely) waiting; its outcome does not
        // depend on when.
        releaser = std::thread([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            {
                const std::lock_guard lock(m);
                release = true;
            }
            cv.notify_all();
        });
        testing::internal::CaptureStderr();
    }  // ~runtime
    const bool finished_before_return = finished.load();
    report = testing::internal::GetCapturedStderr();
    releaser.join();
    while (!finished.load()) {
        std::this_thread::yield();
    }
    EXPECT_TRUE(finished_before_return);
    EXPECT_EQ(report.find("shutdown_timeout"), std::string::npos) << report;
}

TEST(spawn_blocking, rethrows_exception) {
    weft::runtime rt{{.workers = 1}};
    EXPECT_THROW(rt.block_on([]() -> weft::task<void> {
        auto r = co_await weft::spawn_blocking([]() -> int { throw std::domain_error("x"); });
        (void)r;
    }()),
                 std::domain_error);
}

// One blocking thread, busy with a call that waits for a flag; a second call queued behind it is
// cancelled before it starts and reports operation_canceled without ever running.
TEST(spawn_blocking, cancelled_before_start_never_runs) {
    weft::runtime rt{{.workers = 2, .max_blocking_threads = 1}};
    std::atomic<bool> release{false};
    std::atomic<bool> first_started{false};
    std::atomic<bool> second_ran{false};
    std::error_code second;
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {
                auto r = co_await weft::spawn_blocking([&] {
                    first_started = true;
                    while (!release.load()) {
                        std::this_thread::yield();
                    }
                });
                r.value();
            });
            while (!first_started.load()) {  // the only blocking thread is now taken
                co_await weft::yield();
            }
            weft::latch queued{1};
            co_await weft::with_scope([&](weft::scope& inner) -> weft::task<void> {
                inner.spawn([&]() -> weft::task<void> {
                    auto r = co_await weft::test::announce_parked(
                        queued, [&] { return weft::spawn_blocking([&] { second_ran = true; }); });
                    second = r.error();
                });
                (co_await queued.wait()).value();  // queued behind the first: cancel it there
                inner.request_stop();
            });
            release = true;
        });
    }());
    EXPECT_EQ(second, std::errc::operation_canceled);
    EXPECT_FALSE(second_ran.load());
}

}  // namespace
