#include <gtest/gtest.h>

#include <atomic>
#include <deque>

#include "announce_parked.hpp"
#include "test_util.hpp"
#include "weft/core/scope.hpp"
#include "weft/core/sync_wait.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/yield.hpp"
#include "weft/sync/latch.hpp"
#include "weft/sync/mutex.hpp"

namespace {

TEST(mutex, lock_and_try_lock) {
    weft::mutex m;
    weft::sync_wait([&]() -> weft::task<void> {
        auto g = co_await m.lock();
        EXPECT_TRUE(g);
        EXPECT_FALSE(m.try_lock());
        g->unlock();
        EXPECT_TRUE(m.try_lock());
        m.unlock();
    }());
}

TEST(mutex, excludes_across_workers) {
    weft::runtime rt{{.workers = 2}};
    weft::mutex m;
    long counter = 0;  // guarded by m
    std::atomic<int> inside{0};
    std::atomic<int> overlap{0};
    const int tasks = 8;
    const int iters = 2000;
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            for (int t = 0; t < tasks; ++t) {
                s.spawn([&]() -> weft::task<void> {
                    for (int i = 0; i < iters; ++i) {
                        auto g = (co_await m.lock()).value();
                        if (inside.fetch_add(1) != 0) {
                            overlap.fetch_add(1);
                        }
                        ++counter;
                        if (i % 64 == 0) {
                            co_await weft::yield();  // hold it across a suspension
                        }
                        inside.fetch_sub(1);
                    }
                });
            }
            co_return;
        });
    }());
    EXPECT_EQ(counter, static_cast<long>(tasks) * iters);
    EXPECT_EQ(overlap.load(), 0);
}

TEST(mutex, cancelled_waiter_gets_operation_canceled_and_does_not_own) {
    weft::runtime rt{{.workers = 2}};
    weft::mutex m;
    weft::latch parked{1};
    std::error_code ec;
    rt.block_on([&]() -> weft::task<void> {
        auto held = (co_await m.lock()).value();
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {
                ec = (co_await weft::test::announce_parked(parked, [&] {
                         return m.lock();
                     })).error();
            });
            (co_await parked.wait()).value();
            s.request_stop();
            co_return;
        });
        held.unlock();
        EXPECT_TRUE(m.try_lock());  // the cancelled waiter was not handed the lock
        m.unlock();
    }());
    EXPECT_EQ(ec, std::errc::operation_canceled);
}

TEST(mutex, unlock_hands_over_fifo) {
    weft::runtime rt{{.workers = 1}};
    weft::mutex m;
    std::vector<int> order;
    std::deque<weft::latch> parking;
    rt.block_on([&]() -> weft::task<void> {
        auto g = (co_await m.lock()).value();
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            for (int i = 0; i < 3; ++i) {
                weft::latch& parked = parking.emplace_back(1);  // outlives the waiters
                s.spawn([&, i]() -> weft::task<void> {
                    auto g2 = (co_await weft::test::announce_parked(parked, [&] {
                                  return m.lock();
                              })).value();
                    order.push_back(i);
                });
                (co_await parked.wait()).value();  // waiting in lock() before the next starts
            }
            g.unlock();
        });
    }());
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
}

}  // namespace
