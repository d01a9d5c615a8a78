#include <gtest/gtest.h>

#include <atomic>

#include "announce_parked.hpp"
#include "test_util.hpp"
#include "weft/core/scope.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/yield.hpp"
#include "weft/sync/semaphore.hpp"

namespace {

TEST(semaphore, try_acquire_and_release) {
    weft::semaphore s{2};
    EXPECT_TRUE(s.try_acquire());
    EXPECT_TRUE(s.try_acquire());
    EXPECT_FALSE(s.try_acquire());
    s.release(2);
    EXPECT_EQ(s.available(), 2);
}

TEST(semaphore, bounds_concurrency) {
    weft::runtime rt{{.workers = 2}};
    weft::semaphore sem{3};
    std::atomic<int> inside{0};
    std::atomic<int> peak{0};
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& sc) -> weft::task<void> {
            for (int t = 0; t < 32; ++t) {
                sc.spawn([&]() -> weft::task<void> {
                    for (int i = 0; i < 50; ++i) {
                        (co_await sem.acquire()).value();
                        const int now = inside.fetch_add(1) + 1;
                        int p = peak.load();
                        while (now > p && !peak.compare_exchange_weak(p, now)) {
                        }
                        co_await weft::yield();
                        inside.fetch_sub(1);
                        sem.release();
                    }
                });
            }
            co_return;
        });
    }());
    EXPECT_LE(peak.load(), 3);
    EXPECT_EQ(sem.available(), 3);
}

TEST(semaphore, cancelled_acquire_takes_no_unit) {
    weft::runtime rt{{.workers = 2}};
    weft::semaphore sem{0};
    weft::latch parked{1};
    std::error_code ec;
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {
                ec = (co_await weft::test::announce_parked(parked, [&] {
                         return sem.acquire();
                     })).error();
            });
            (co_await parked.wait()).value();
            s.request_stop();
            co_return;
        });
    }());
    EXPECT_EQ(ec, std::errc::operation_canceled);
    sem.release();
    EXPECT_EQ(sem.available(), 1);
}

TEST(semaphore, release_wakes_waiters) {
    weft::runtime rt{{.workers = 2}};
    weft::semaphore sem{0};
    std::atomic<int> woke{0};
    weft::latch parked{5};
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            for (int i = 0; i < 5; ++i) {
                s.spawn([&]() -> weft::task<void> {
                    (co_await weft::test::announce_parked(parked, [&] {
                        return sem.acquire();
                    })).value();
                    woke.fetch_add(1);
                });
            }
            (co_await parked.wait()).value();
            sem.release(5);
        });
    }());
    EXPECT_EQ(woke.load(), 5);
    EXPECT_EQ(sem.available(), 0);
}

}  // namespace
