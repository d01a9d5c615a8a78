#include <gtest/gtest.h>

#include <atomic>

#include "announce_parked.hpp"
#include "test_util.hpp"
#include "weft/core/scope.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sync/channel.hpp"
#include "weft/sync/event.hpp"

namespace {

TEST(event, manual_reset_releases_all_and_stays_set) {
    weft::runtime rt{{.workers = 2}};
    weft::event e;
    std::atomic<int> woke{0};
    weft::latch parked{5};
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            for (int i = 0; i < 5; ++i) {
                s.spawn([&]() -> weft::task<void> {
                    (co_await weft::test::announce_parked(parked, [&] {
                        return e.wait();
                    })).value();
                    woke.fetch_add(1);
                });
            }
            (co_await parked.wait()).value();
            e.set();
        });
        EXPECT_TRUE(e.is_set());
        EXPECT_TRUE(co_await e.wait());
        e.reset();
        EXPECT_FALSE(e.is_set());
    }());
    EXPECT_EQ(woke.load(), 5);
}

TEST(event, auto_reset_releases_one_per_set) {
    weft::runtime rt{{.workers = 2}};
    weft::event e{weft::event::reset_mode::automatic};
    std::atomic<int> woke{0};
    weft::latch parked{3};
    weft::channel<int> woken{weft::unbounded};  // one item per waiter that woke
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            for (int i = 0; i < 3; ++i) {
                s.spawn([&]() -> weft::task<void> {
                    (co_await weft::test::announce_parked(parked, [&] {
                        return e.wait();
                    })).value();
                    woke.fetch_add(1);
                    (co_await woken.send(1)).value();
                });
            }
            (co_await parked.wait()).value();
            e.set();
            (co_await woken.recv()).value();  // the one it released has run
            EXPECT_EQ(woke.load(), 1);
            EXPECT_FALSE(e.is_set());
            e.set();
            e.set();
        });
        e.set();  // nobody waits: stays set for one wait
        EXPECT_TRUE(e.is_set());
        EXPECT_TRUE(co_await e.wait());
        EXPECT_FALSE(e.is_set());
    }());
    EXPECT_EQ(woke.load(), 3);
}

TEST(event, cancelled_wait) {
    weft::runtime rt{{.workers = 2}};
    weft::event e;
    weft::latch parked{1};
    std::error_code ec;
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {
                ec = (co_await weft::test::announce_parked(parked, [&] {
                         return e.wait();
                     })).error();
            });
            (co_await parked.wait()).value();
            s.request_stop();
            co_return;
        });
    }());
    EXPECT_EQ(ec, std::errc::operation_canceled);
}

}  // namespace
