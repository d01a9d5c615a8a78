#include <gtest/gtest.h>

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
