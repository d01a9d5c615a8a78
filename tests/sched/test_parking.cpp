#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "runtime_core.hpp"
#include "test_util.hpp"
#include "weft/core/scope.hpp"
#include "weft/sched/driver.hpp"
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
            co_await weft::test::meeting_pair();
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

// ---- The IO home (runtime_options::consolidate_io) defers the wake-ups of its pushes ----
// A runtime with a driver of its own gathers IO on a home; a futex driver given as make_driver
// makes one without weft::io. Worker 0 is made the home for good.
auto home_runtime() -> std::unique_ptr<weft::runtime> {
    auto rt = std::make_unique<weft::runtime>(weft::runtime_options{
        .workers = 2, .make_driver = [](unsigned) { return weft::make_futex_driver(); }});
    weft::test::force_io_home(*rt, 0);
    return rt;
}

auto wakes(const weft::runtime& rt) -> std::uint64_t {
    return rt.worker_metrics(0).wakes + rt.worker_metrics(1).wakes;
}

// On the home, with the other worker parked, a spawned task that the home runs next (its
// parent awaits it at once) calls no helper. Before the rule each of these spawns woke the
// parked worker.
TEST(parking, a_spawn_the_io_home_runs_next_wakes_no_helper) {
    auto rt = home_runtime();
    const int spawns = 200;
    int joined = 0;
    rt->block_on([&]() -> weft::task<void> {
        for (int i = 0; i < spawns; ++i) {
            co_await weft::switch_to_worker(0);  // (a no-op while it stays there)
            auto& core = core_of_this_worker();
            while (core.idle_count.load() != 1) {  // until worker 1 is parked
                std::this_thread::yield();
            }
            joined += co_await weft::spawn([]() -> weft::task<int> { co_return 1; });
        }
    }());
    EXPECT_EQ(joined, spawns);
    EXPECT_EQ(wakes(*rt), 0U);
    // Not == spawns: the parked worker's watch may wake it between the check and a spawn.
    EXPECT_GE(rt->worker_metrics(0).deferred_wakes, 1U);
}

// More than the home runs next: a burst of spawns still calls a helper. The parked helper also
// wakes by itself every few milliseconds (its watch); a burst it joined that way calls nobody,
// so the burst is tried until one passes with the helper parked throughout (no unpark counted
// but the home's own), and that one must have woken it. A home that never calls a helper fails
// every try.
TEST(parking, a_burst_of_spawns_on_the_io_home_wakes_a_helper) {
    auto rt = home_runtime();
    std::atomic<int> ran{0};
    bool decided = false;
    std::uint64_t woken = 0;
    int bursts = 0;
    rt->block_on([&]() -> weft::task<void> {
        co_await weft::switch_to_worker(0);
        auto& core = core_of_this_worker();
        for (; bursts < 50 && !decided; ++bursts) {
            while (core.idle_count.load() != 1) {
                std::this_thread::yield();
            }
            const auto unparks_before = core.unparks.load();
            const auto wakes_before = wakes(*rt);
            co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
                for (int i = 0; i < 64; ++i) {
                    s.spawn([&]() -> weft::task<void> {
                        ran.fetch_add(1);
                        co_return;
                    });
                }
                co_return;
            });
            woken = wakes(*rt) - wakes_before;
            // The helper left its park once at most, and only if this burst woke it.
            decided = core.unparks.load() - unparks_before <= woken;
        }
    }());
    ASSERT_TRUE(decided) << "the helper's watch woke it during every burst";
    EXPECT_EQ(ran.load(), 64 * bursts);
    EXPECT_GE(woken, 1U);
}

// Two tasks spawned on the home that wait for each other without suspending: the home runs
// one, and the other, left queued behind it, must reach the helper (the home calls it at the
// pick). A rule that deferred these wake-ups with no such call deadlocked here.
TEST(parking, pairs_that_wait_for_each_other_on_the_io_home_run_on_both_workers) {
    auto rt = home_runtime();
    const int rounds = weft::test::scaled(2000);
    int pairs = 0;
    rt->block_on([&]() -> weft::task<void> {
        for (int round = 0; round < rounds; ++round) {
            co_await weft::switch_to_worker(0);
            co_await weft::test::meeting_pair();
            ++pairs;
        }
    }());
    EXPECT_EQ(pairs, rounds);
}

// A task on the home that spawns and then keeps its thread until the spawned task has run
// never reaches a pick: the helper's watch timeout finds the task and runs it.
TEST(parking, a_task_that_spins_on_the_io_home_is_relieved_by_the_watching_helper) {
    auto rt = home_runtime();
    const int rounds = 20;
    int relieved = 0;
    rt->block_on([&]() -> weft::task<void> {
        for (int round = 0; round < rounds; ++round) {
            co_await weft::switch_to_worker(0);  // the home (the last round ended on either)
            std::atomic<bool> ran{false};
            auto h = weft::spawn([&]() -> weft::task<void> {
                ran.store(true);
                co_return;
            });
            while (!ran.load()) {
                std::this_thread::yield();
            }
            co_await std::move(h);
            ++relieved;
        }
    }());
    EXPECT_EQ(relieved, rounds);
}

// A worker that parked while the runtime had no IO home sleeps with no watch timeout (there was
// nothing to watch). When the home is then chosen, the spawns on it defer their wake-ups: the
// sleeper must learn of the home, or a task on it that spawns and then keeps its thread leaves
// the spawned task queued for good (this hung).
TEST(parking, a_home_chosen_while_a_worker_sleeps_still_has_its_deferred_spawns_run) {
    const int rounds = 5;
    int relieved = 0;
    for (int round = 0; round < rounds; ++round) {
        weft::runtime rt{
            {.workers = 2, .make_driver = [](unsigned) { return weft::make_futex_driver(); }}};
        rt.block_on([&]() -> weft::task<void> {
            auto& core = core_of_this_worker();
            while (core.idle_count.load() != 1) {  // the other worker parked, with no home yet
                std::this_thread::yield();
            }
            weft::detail::force_io_home_for_test(
                static_cast<int>(weft::detail::current_worker_index()));
            std::atomic<bool> ran{false};
            auto h = weft::spawn([&]() -> weft::task<void> {
                ran.store(true);
                co_return;
            });
            while (!ran.load()) {
                std::this_thread::yield();
            }
            co_await std::move(h);
            ++relieved;
        }());
    }
    EXPECT_EQ(relieved, rounds);
}

}  // namespace
