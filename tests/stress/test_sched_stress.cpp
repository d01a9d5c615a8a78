// Scheduler stress tests, run under ThreadSanitizer in CI. They count: every task runs exactly
// once, every value arrives, nothing is lost in steals, wake-ups, cancellations or shutdown.

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <random>
#include <stdexcept>
#include <vector>

#include "sync/announce_parked.hpp"
#include "test_util.hpp"
#include "weft/core/scope.hpp"
#include "weft/core/when_any.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"
#include "weft/sched/yield.hpp"
#include "weft/sync/latch.hpp"

namespace {

using namespace std::chrono_literals;

using weft::test::scaled;

TEST(sched_stress, million_spawns_each_counted_exactly_once) {
    const int n = scaled(1'000'000);
    auto seen = std::make_unique<std::atomic<std::uint8_t>[]>(static_cast<std::size_t>(n));
    std::atomic<int> duplicates{0};
    weft::runtime rt{{.workers = 0}};
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            for (int i = 0; i < n; ++i) {
                s.spawn([&, i]() -> weft::task<void> {
                    if (seen[static_cast<std::size_t>(i)].exchange(1, std::memory_order_relaxed) !=
                        0) {
                        duplicates.fetch_add(1, std::memory_order_relaxed);
                    }
                    co_return;
                });
            }
            co_return;
        });
    }());
    int missing = 0;
    for (int i = 0; i < n; ++i) {
        missing += seen[static_cast<std::size_t>(i)].load() == 0 ? 1 : 0;
    }
    EXPECT_EQ(missing, 0);
    EXPECT_EQ(duplicates.load(), 0);
}

TEST(sched_stress, spawns_from_many_outside_threads) {
    weft::runtime rt{{.workers = 2}};
    const int per_thread = scaled(20'000);
    std::atomic<int> ran{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&] {
            for (int i = 0; i < per_thread; ++i) {
                rt.spawn([&]() -> weft::task<void> {
                      ran.fetch_add(1, std::memory_order_relaxed);
                      co_return;
                  }).detach();
            }
        });
    }
    for (auto& t : threads) {
        t.join();
    }
    rt.block_on([&]() -> weft::task<void> {
        while (ran.load() != 4 * per_thread) {
            co_await weft::yield();
        }
    }());
    EXPECT_EQ(ran.load(), 4 * per_thread);
}

auto stage(int depth) -> weft::task<int> {
    if (depth == 1) {
        co_return 1;
    }
    auto next = weft::spawn(stage(depth - 1));
    co_return co_await std::move(next) + 1;
}

// Each stage spawns the next and waits for it: a million-stage pipeline is unwound by
// symmetric transfers from the deepest stage outwards, without growing any stack.
TEST(sched_stress, million_stage_pipeline_does_not_grow_stack) {
    weft::runtime rt{{.workers = 0}};
    const int depth = scaled(1'000'000);
    EXPECT_EQ(rt.block_on(stage(depth)), depth);
}

auto fib(int n) -> weft::task<long> {
    if (n < 2) {
        co_return n;
    }
    auto a = co_await weft::fork(fib(n - 1));
    long b = co_await fib(n - 2);
    co_return co_await std::move(a) + b;
}

TEST(sched_stress, fork_join_with_continuation_stealing) {
    weft::runtime rt{{.workers = 0}};
    for (int round = 0; round < 5; ++round) {
        EXPECT_EQ(rt.block_on(fib(22)), 17711);
    }
}

// Random mixes of fork, spawn, yield, short sleeps and scope cancellation. Every leaf task
// reports exactly once, whether it finished or was cancelled.
TEST(sched_stress, random_yields_steals_and_cancellations) {
    weft::runtime rt{{.workers = 0}};
    std::atomic<long> finished{0};
    std::atomic<long> cancelled{0};
    const int groups = scaled(400);
    const int per_group = 50;
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& outer) -> weft::task<void> {
            for (int g = 0; g < groups; ++g) {
                outer.spawn(weft::with_scope([&, g](weft::scope& s) -> weft::task<void> {
                    std::mt19937 rng(static_cast<unsigned>(g));
                    for (int i = 0; i < per_group; ++i) {
                        const unsigned kind = rng() % 4;
                        s.spawn([&, kind]() -> weft::task<void> {
                            if (kind == 0) {
                                co_await weft::yield();
                            } else if (kind == 1) {
                                auto r = co_await weft::sleep_for(1ms);
                                if (!r) {
                                    cancelled.fetch_add(1);
                                    co_return;
                                }
                            } else if (kind == 2) {
                                auto h =
                                    co_await weft::fork([]() -> weft::task<int> { co_return 1; }());
                                (void)co_await std::move(h);
                            } else {
                                auto r = co_await weft::sleep_for(1h);  // only a stop ends it
                                if (!r) {
                                    cancelled.fetch_add(1);
                                    co_return;
                                }
                            }
                            finished.fetch_add(1);
                        });
                    }
                    if (g % 2 == 0) {
                        co_await weft::yield();
                    }
                    s.request_stop();  // ends the 1h sleepers (and maybe others)
                }));
            }
            co_return;
        });
    }());
    EXPECT_EQ(finished.load() + cancelled.load(), static_cast<long>(groups) * per_group);
    EXPECT_GT(cancelled.load(), 0);
}

TEST(sched_stress, exceptions_cross_threads_and_cancel_siblings) {
    weft::runtime rt{{.workers = 0}};
    int failures = 0;
    for (int round = 0; round < scaled(200); ++round) {
        try {
            rt.block_on(weft::with_scope([&](weft::scope& s) -> weft::task<void> {
                for (int i = 0; i < 20; ++i) {
                    s.spawn([](int i) -> weft::task<void> {
                        if (i == 7) {
                            throw std::runtime_error("seven");
                        }
                        auto r = co_await weft::sleep_for(1h);
                        (void)r;
                    }(i));
                }
                co_return;
            }));
        } catch (const std::runtime_error&) {
            ++failures;
        }
    }
    EXPECT_EQ(failures, scaled(200));
}

TEST(sched_stress, when_any_cancels_losers_under_load) {
    weft::runtime rt{{.workers = 0}};
    for (int round = 0; round < scaled(300); ++round) {
        std::vector<weft::task<int>> racers;
        for (int i = 0; i < 8; ++i) {
            racers.push_back([](int i) -> weft::task<int> {
                if (i == 3) {
                    co_return i;
                }
                auto r = co_await weft::sleep_for(1h);
                co_return r ? 100 : -1;
            }(i));
        }
        auto r = rt.block_on(weft::when_any(std::move(racers)));
        ASSERT_EQ(r.index, 3U);
        ASSERT_EQ(r.value, 3);
    }
}

TEST(sched_stress, shutdown_while_many_tasks_parked_on_timers) {
    std::atomic<int> cancelled{0};
    const int n = scaled(10'000);
    {
        weft::runtime rt{{.workers = 0}};
        weft::latch parked{n};
        rt.block_on([&]() -> weft::task<void> {
            for (int i = 0; i < n; ++i) {
                weft::spawn([&, i]() -> weft::task<void> {
                    auto r = co_await weft::test::announce_parked(
                        parked, [i] { return weft::sleep_for(std::chrono::seconds(100 + i)); });
                    if (!r) {
                        cancelled.fetch_add(1);
                    }
                }).detach();
            }
            (co_await parked.wait()).value();  // every sleeper armed: shut down with all parked
        }());
    }
    EXPECT_EQ(cancelled.load(), n);
}

}  // namespace
