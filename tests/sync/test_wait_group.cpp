#include <gtest/gtest.h>

#include <atomic>

#include "announce_parked.hpp"
#include "test_util.hpp"
#include "weft/core/join_handle.hpp"
#include "weft/core/scope.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/yield.hpp"
#include "weft/sync/wait_group.hpp"

namespace {

TEST(wait_group, waits_for_every_done_and_is_reusable) {
    weft::runtime rt{{.workers = 2}};
    weft::wait_group wg;
    std::atomic<int> finished{0};
    rt.block_on([&]() -> weft::task<void> {
        for (int round = 0; round < 3; ++round) {
            for (int i = 0; i < 10; ++i) {
                wg.add();
                weft::spawn([&]() -> weft::task<void> {
                    co_await weft::yield();
                    finished.fetch_add(1);
                    wg.done();
                }).detach();
            }
            (co_await wg.wait()).value();
            EXPECT_EQ(finished.load(), 10 * (round + 1));
            EXPECT_EQ(wg.count(), 0);
        }
    }());
}

TEST(wait_group, empty_group_is_ready) {
    weft::runtime rt{{.workers = 1}};
    weft::wait_group wg;
    EXPECT_TRUE(
        rt.block_on([&]() -> weft::task<bool> { co_return (co_await wg.wait()).has_value(); }()));
}

TEST(wait_group, cancelled_wait) {
    weft::runtime rt{{.workers = 2}};
    weft::wait_group wg;
    wg.add(1);
    weft::latch parked{1};
    std::error_code ec;
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {
                ec = (co_await weft::test::announce_parked(parked, [&] {
                         return wg.wait();
                     })).error();
            });
            (co_await parked.wait()).value();
            s.request_stop();
            co_return;
        });
    }());
    EXPECT_EQ(ec, std::errc::operation_canceled);
    wg.done();
}

}  // namespace
