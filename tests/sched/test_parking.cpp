#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "runtime_core.hpp"
#include "test_util.hpp"
#include "weft/core/scope.hpp"
#include "weft/sched/runtime.hpp"

namespace {

auto core_of_this_worker() -> weft::detail::runtime_core& {
    return weft::detail::tl_sched_worker->runtime();
}

// Two spawned tasks that each wait, without suspending, until the other has started: a round
// ends only if both run at once, on the two workers. The spawning worker runs one of them and
// spins; the other worker must have been woken to steal the second.
TEST(parking, pairs_that_wait_for_each_other_run_on_both_workers) {
    weft::runtime rt{{.workers = 2}};
    const int rounds = weft::test::scaled(5000);
    int pairs = 0;
    rt.block_on([&]() -> weft::task<void> {
        for (int round = 0; round < rounds; ++round) {
            std::atomic<int> met{0};
            co_await weft::with_scope([&](weft::scope& pair) -> weft::task<void> {
                for (int i = 0; i < 2; ++i) {
                    pair.spawn([&]() -> weft::task<void> {
                        met.fetch_add(1);
                        while (met.load() < 2) {
                        }
                        co_return;
                    });
                }
                co_return;
            });
            ++pairs;
        }
    }());
    EXPECT_EQ(pairs, rounds);
}

// After each burst of spawns, once the runtime is idle, every worker is parked on the idle list
// and nobody counts as searching: a worker asleep off the list, or a searching count left
// above 0, would keep every later submission from waking anyone.
TEST(parking, quiescence_leaves_every_worker_listed_and_nobody_searching) {
    weft::runtime rt{{.workers = 2}};
    weft::detail::runtime_core* core = nullptr;
    const int bursts = weft::test::scaled(2000);
    std::atomic<int> ran{0};
    int unlisted_quiet = 0;
    for (int b = 0; b < bursts; ++b) {
        rt.block_on([&]() -> weft::task<void> {
            core = &core_of_this_worker();
            for (int i = 0; i < 8; ++i) {
                weft::spawn([&]() -> weft::task<void> {
                    ran.fetch_add(1);
                    co_return;
                }).detach();
            }
            co_return;
        }());
        while (ran.load() < 8 * (b + 1) || core->idle_count.load() != 2) {
            std::this_thread::yield();
        }
        std::lock_guard lock(core->idle_mu);
        if (core->searching.load() != 0 || core->idle.size() != 2) {
            ++unlisted_quiet;
        }
    }
    EXPECT_EQ(ran.load(), 8 * bursts);
    EXPECT_EQ(unlisted_quiet, 0);
}

}  // namespace
