#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "weft/core/join_handle.hpp"
#include "weft/core/sync_wait.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/yield.hpp"

namespace {

TEST(yield, lets_queued_work_run_first) {
    std::vector<int> order;
    weft::sync_wait([&]() -> weft::task<void> {
        auto h = weft::spawn([&]() -> weft::task<void> {
            order.push_back(1);
            co_return;
        });
        co_await weft::yield();
        order.push_back(2);
        co_await std::move(h);
    }());
    EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST(yield, on_runtime_resumes) {
    weft::runtime rt{{.workers = 2}};
    int n = rt.block_on([]() -> weft::task<int> {
        int i = 0;
        for (; i < 1000; ++i) {
            co_await weft::yield();
        }
        co_return i;
    }());
    EXPECT_EQ(n, 1000);
}

}  // namespace

namespace {

// A task that only ever joins finished tasks still gives the others a turn: every
// budget_per_turn ready joins it yields, so a task queued behind it runs before it finishes.
TEST(budget, ready_joins_yield_when_the_turn_is_spent) {
    weft::runtime rt{{.workers = 1}};
    const bool other_ran_first = rt.block_on([]() -> weft::task<bool> {
        std::vector<weft::join_handle<int>> done;
        for (int i = 0; i < 4 * weft::detail::worker_base::budget_per_turn; ++i) {
            done.push_back(weft::spawn([]() -> weft::task<int> { co_return 1; }()));
        }
        for (auto& d : done) {
            while (!d.done()) {
                co_await weft::yield();
            }
        }
        bool other = false;
        auto h = weft::spawn([&]() -> weft::task<void> {
            other = true;
            co_return;
        });
        bool seen_before_end = false;
        for (auto& d : done) {
            (void)co_await std::move(d);
            seen_before_end = seen_before_end || other;
        }
        co_await std::move(h);
        co_return seen_before_end;
    }());
    EXPECT_TRUE(other_ran_first);
}

// Thread-per-core: a task placed on a worker stays there across yields and remote wake-ups (a
// yield went through the shared injector, so any worker could take the task).
TEST(yield, thread_per_core_keeps_the_task_on_its_worker) {
    weft::runtime rt{{.workers = 2, .stealing = false}};
    int moved = 0;
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::switch_to_worker(1);
        const auto home = std::this_thread::get_id();
        for (int i = 0; i < 200; ++i) {
            co_await weft::yield();
            moved += std::this_thread::get_id() == home ? 0 : 1;
        }
    }());
    EXPECT_EQ(moved, 0);
}

}  // namespace
