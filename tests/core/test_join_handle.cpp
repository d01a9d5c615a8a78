#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "weft/core/join_handle.hpp"
#include "weft/core/sync_wait.hpp"

namespace {

TEST(fork, child_runs_first_then_parent_continues) {
    std::vector<std::string> log;
    auto child = [&]() -> weft::task<int> {
        log.push_back("child");
        co_return 5;
    };
    auto parent = [&]() -> weft::task<int> {
        auto h = co_await weft::fork(child());
        log.push_back("parent");
        co_return co_await std::move(h) * 2;
    };
    EXPECT_EQ(weft::sync_wait(parent()), 10);
    EXPECT_EQ(log, (std::vector<std::string>{"child", "parent"}));
}

auto fib(int n) -> weft::task<long> {
    if (n < 2) {
        co_return n;
    }
    auto a = co_await weft::fork(fib(n - 1));
    long b = co_await fib(n - 2);
    co_return co_await std::move(a) + b;
}

TEST(fork, fib_on_inline_executor) { EXPECT_EQ(weft::sync_wait(fib(20)), 6765); }

TEST(fork, exception_reaches_joiner) {
    auto parent = []() -> weft::task<void> {
        auto h = co_await weft::fork([]() -> weft::task<int> {
            throw std::runtime_error("child failed");
            co_return 0;
        }());
        (void)co_await std::move(h);
    };
    EXPECT_THROW(weft::sync_wait(parent()), std::runtime_error);
}

// A fork on a thread that runs no executor degrades to "child first, then parent".
TEST(fork, works_without_an_executor) {
    std::vector<int> order;
    auto child = [&]() -> weft::task<int> {
        order.push_back(1);
        co_return 1;
    };
    auto parent_fn = [&]() -> weft::task<int> {
        auto h = co_await weft::fork(child());
        order.push_back(2);
        co_return co_await std::move(h);
    };
    auto parent = parent_fn();
    auto handle = parent.handle();
    handle.resume();  // no tl_worker on this thread
    ASSERT_TRUE(handle.done());
    EXPECT_EQ(handle.promise().result(), 1);
    EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST(spawn, runs_and_joins) {
    auto parent = []() -> weft::task<int> {
        auto h = weft::spawn([]() -> weft::task<int> { co_return 3; }());
        co_return co_await std::move(h) + 1;
    };
    EXPECT_EQ(weft::sync_wait(parent()), 4);
}

TEST(spawn, detached_task_runs_and_frees_itself) {
    auto token = std::make_shared<int>(0);
    auto parent = [&]() -> weft::task<void> {
        weft::spawn([](std::shared_ptr<int> t) -> weft::task<void> {
            ++*t;
            co_return;
        }(token))
            .detach();
        co_return;
    };
    weft::sync_wait(parent());
    EXPECT_EQ(*token, 1);
    EXPECT_EQ(token.use_count(), 1);  // the frame (holding a copy) is gone
}

TEST(spawn, dropped_handle_detaches) {
    int runs = 0;
    auto parent = [&]() -> weft::task<void> {
        {
            auto h = weft::spawn([&]() -> weft::task<void> {
                ++runs;
                co_return;
            });
        }
        co_return;
    };
    weft::sync_wait(parent());
    EXPECT_EQ(runs, 1);
}

TEST(spawn, outside_an_executor_throws) {
    EXPECT_THROW((void)weft::spawn([]() -> weft::task<void> { co_return; }()), std::logic_error);
}

TEST(join_handle, join_from_another_thread) {
    // The child is resumed by a foreign thread; the joiner waits for it.
    struct resume_on_thread {
        std::thread* t;
        auto await_ready() noexcept -> bool { return false; }
        void await_suspend(std::coroutine_handle<> h) {
            *t = std::thread([h] { h.resume(); });
        }
        void await_resume() noexcept {}
    };
    std::thread th;
    auto parent = [&]() -> weft::task<int> {
        auto h = co_await weft::fork([&]() -> weft::task<int> {
            co_await resume_on_thread{&th};
            co_return 11;
        }());
        co_return co_await std::move(h);
    };
    EXPECT_EQ(weft::sync_wait(parent()), 11);
    th.join();
}

}  // namespace
