#include <gtest/gtest.h>

#include <atomic>

#include "announce_parked.hpp"
#include "test_util.hpp"
#include "weft/core/scope.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sync/latch.hpp"

namespace {

TEST(latch, wait_completes_when_count_reaches_zero) {
    weft::runtime rt{{.workers = 2}};
    weft::latch l{4};
    std::atomic<int> arrived{0};
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            for (int i = 0; i < 4; ++i) {
                s.spawn([&]() -> weft::task<void> {
                    arrived.fetch_add(1);
                    (co_await l.arrive_and_wait()).value();
                    EXPECT_EQ(arrived.load(), 4);
                });
            }
            (co_await l.wait()).value();
            EXPECT_EQ(arrived.load(), 4);
        });
        EXPECT_TRUE(l.try_wait());
    }());
}

TEST(latch, zero_latch_is_ready) {
    weft::runtime rt{{.workers = 1}};
    weft::latch l{0};
    EXPECT_TRUE(
        rt.block_on([&]() -> weft::task<bool> { co_return (co_await l.wait()).has_value(); }()));
}

TEST(latch, cancelled_wait) {
    weft::runtime rt{{.workers = 2}};
    weft::latch l{1};
    weft::latch parked{1};
    std::error_code ec;
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {
                ec = (co_await weft::test::announce_parked(parked, [&] {
                         return l.wait();
                     })).error();
            });
            (co_await parked.wait()).value();
            s.request_stop();
            co_return;
        });
    }());
    EXPECT_EQ(ec, std::errc::operation_canceled);
    EXPECT_FALSE(l.try_wait());
}

}  // namespace
