#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "announce_parked.hpp"
#include "test_util.hpp"
#include "weft/core/scope.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/yield.hpp"
#include "weft/sync/event.hpp"
#include "weft/sync/worker_pool.hpp"

namespace {

TEST(worker_pool, map_runs_the_async_handler) {
    weft::runtime rt{{.workers = 2}};
    auto v = rt.block_on([]() -> weft::task<int> {
        weft::worker_pool<int, int> pool{2, [](int x) -> weft::task<int> {
                                             co_await weft::yield();
                                             co_return x * 2;
                                         }};
        const int r = co_await pool.map(21);
        co_await pool.close();
        co_return r;
    }());
    EXPECT_EQ(v, 42);
}

TEST(worker_pool, map_runs_a_plain_handler_and_rethrows) {
    weft::runtime rt{{.workers = 2}};
    weft::worker_pool<int, int> pool{rt, 2, [](int x) {
                                         if (x < 0) {
                                             throw std::invalid_argument("negative");
                                         }
                                         return x + 1;
                                     }};
    rt.block_on([&]() -> weft::task<void> {
        EXPECT_EQ(co_await pool.map(1), 2);
        EXPECT_THROW(co_await pool.map(-1), std::invalid_argument);
        EXPECT_EQ(co_await pool.map(5), 6);  // the handler task survived the exception
        co_await pool.close();
    }());
}

TEST(worker_pool, map_batch_keeps_input_order) {
    weft::runtime rt{{.workers = 2}};
    rt.block_on([]() -> weft::task<void> {
        weft::worker_pool<int, int> pool{3, [](int x) -> weft::task<int> { co_return x* x; }, 4};
        std::vector<int> in{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
        auto out = co_await pool.map_batch(in);
        EXPECT_EQ(out, (std::vector<int>{1, 4, 9, 16, 25, 36, 49, 64, 81, 100}));
        co_await pool.close();
    }());
}

// close() while work is queued: the handler is held until the intake is closed, so close must
// drain everything queued before it, and a map after close fails.
TEST(worker_pool, close_drains_queued_work_then_map_fails_closed) {
    weft::runtime rt{{.workers = 2}};
    constexpr int capacity = 8;
    std::atomic<int> ran{0};
    weft::event handler_busy;  // the handler holds the first job
    weft::event gate;          // opened once the intake is closed
    weft::latch queued{capacity};
    rt.block_on([&]() -> weft::task<void> {
        weft::worker_pool<int, int> pool{1,
                                         [&](int x) -> weft::task<int> {
                                             handler_busy.set();
                                             (co_await gate.wait()).value();
                                             ran.fetch_add(1);
                                             co_return x;
                                         },
                                         capacity};
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {
                const int r = co_await pool.map(0);
                EXPECT_EQ(r, 0);
            });
            (co_await handler_busy.wait()).value();
            for (int i = 1; i <= capacity; ++i) {  // these fill the intake
                s.spawn([&, i]() -> weft::task<void> {
                    const int r =
                        co_await weft::test::announce_parked(queued, [&] { return pool.map(i); });
                    EXPECT_EQ(r, i);
                });
            }
            (co_await queued.wait()).value();
            // Opens the gate once the intake is closed: its map finds the intake full and waits
            // until close fails it (or, run later, finds it closed).
            s.spawn([&]() -> weft::task<void> {
                try {
                    (void)co_await pool.map(-1);
                    ADD_FAILURE() << "a map the intake had no room for before close must fail";
                } catch (const std::system_error& e) {
                    EXPECT_EQ(e.code(), weft::sync_errc::closed);
                }
                gate.set();
            });
            co_await pool.close();
            EXPECT_EQ(ran.load(), capacity + 1);  // everything queued before close ran
        });
        try {
            (void)co_await pool.map(1);
            ADD_FAILURE() << "map after close must throw";
        } catch (const std::system_error& e) {
            EXPECT_EQ(e.code(), weft::sync_errc::closed);
        }
    }());
    EXPECT_EQ(ran.load(), capacity + 1);
}

TEST(worker_pool, back_pressure_bounds_the_intake) {
    weft::runtime rt{{.workers = 2}};
    std::atomic<int> in_handler{0};
    std::atomic<int> peak{0};
    rt.block_on([&]() -> weft::task<void> {
        weft::worker_pool<int, int> pool{
            2,
            [&](int x) -> weft::task<int> {
                const int now = in_handler.fetch_add(1) + 1;
                int p = peak.load();
                while (now > p && !peak.compare_exchange_weak(p, now)) {
                }
                co_await weft::yield();
                in_handler.fetch_sub(1);
                co_return x;
            },
            2};
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            for (int i = 0; i < 200; ++i) {
                s.spawn([&, i]() -> weft::task<void> {
                    const int r = co_await pool.map(i);
                    EXPECT_EQ(r, i);
                });
            }
            co_return;
        });
        co_await pool.close();
    }());
    EXPECT_LE(peak.load(), 2);  // two handler tasks: never more than two jobs at once
}

// 10^4 concurrent callers: every call gets its own answer exactly once.
TEST(worker_pool, hammered_by_ten_thousand_callers) {
    weft::runtime rt{{.workers = 0}};
    const int callers = 10'000;
    std::atomic<long> sum{0};
    std::atomic<int> wrong{0};
    rt.block_on([&]() -> weft::task<void> {
        weft::worker_pool<int, long> pool{4,
                                          [](int x) -> weft::task<long> {
                                              if (x % 7 == 0) {
                                                  co_await weft::yield();
                                              }
                                              co_return 3L * x;
                                          },
                                          64};
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            for (int i = 0; i < callers; ++i) {
                s.spawn([&, i]() -> weft::task<void> {
                    const long r = co_await pool.map(i);
                    if (r != 3L * i) {
                        wrong.fetch_add(1);
                    }
                    sum.fetch_add(r);
                });
            }
            co_return;
        });
        co_await pool.close();
    }());
    EXPECT_EQ(wrong.load(), 0);
    EXPECT_EQ(sum.load(), 3L * callers * (callers - 1) / 2);
}

TEST(worker_pool, runtime_shutdown_with_pool_alive_does_not_hang) {
    auto rt = std::make_unique<weft::runtime>(weft::runtime_options{.workers = 2});
    weft::worker_pool<int, int> pool{*rt, 2, [](int x) { return x; }};
    auto map_once = [](weft::worker_pool<int, int>& p) -> weft::task<int> {
        co_return co_await p.map(3);
    };
    EXPECT_EQ(rt->block_on(map_once(pool)), 3);
    rt.reset();  // cancels the idle handler tasks
}

}  // namespace
