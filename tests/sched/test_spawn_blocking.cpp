#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>

#include "weft/core/scope.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/spawn_blocking.hpp"
#include "weft/sched/timer.hpp"
#include "weft/sched/yield.hpp"

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
            co_await weft::with_scope([&](weft::scope& inner) -> weft::task<void> {
                inner.spawn([&]() -> weft::task<void> {
                    auto r = co_await weft::spawn_blocking([&] { second_ran = true; });
                    second = r.error();
                });
                auto r = co_await weft::sleep_for(2ms);
                r.value();
                inner.request_stop();
            });
            release = true;
        });
    }());
    EXPECT_EQ(second, std::errc::operation_canceled);
    EXPECT_FALSE(second_ran.load());
}

}  // namespace
