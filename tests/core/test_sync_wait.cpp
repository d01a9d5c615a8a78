#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>

#include "weft/core/join_handle.hpp"
#include "weft/core/sync_wait.hpp"

namespace {

TEST(sync_wait, returns_value_and_rethrows) {
    EXPECT_EQ(weft::sync_wait([]() -> weft::task<int> { co_return 1; }()), 1);
    EXPECT_THROW(weft::sync_wait([]() -> weft::task<void> {
                     throw std::out_of_range("x");
                     co_return;
                 }()),
                 std::out_of_range);
}

TEST(sync_wait, finishes_detached_spawns_before_returning) {
    int ran = 0;
    weft::sync_wait([&]() -> weft::task<void> {
        for (int i = 0; i < 10; ++i) {
            weft::spawn([&]() -> weft::task<void> {
                ++ran;
                co_return;
            }).detach();
        }
        co_return;
    }());
    EXPECT_EQ(ran, 10);
}

TEST(sync_wait, root_resumed_on_foreign_thread_completes_back_here) {
    std::thread th;
    const auto caller = std::this_thread::get_id();
    std::thread::id finished_on;
    struct hop {
        std::thread* t;
        auto await_ready() noexcept -> bool { return false; }
        void await_suspend(std::coroutine_handle<> h) {
            *t = std::thread([h] { h.resume(); });
        }
        void await_resume() noexcept {}
    };
    weft::sync_wait([&]() -> weft::task<void> {
        co_await hop{&th};
        finished_on = std::this_thread::get_id();
    }());
    th.join();
    EXPECT_NE(finished_on, caller);  // the body ran on the foreign thread
}

TEST(sync_wait, nested_sync_wait_restores_executor) {
    int v = weft::sync_wait([]() -> weft::task<int> {
        int inner = weft::sync_wait([]() -> weft::task<int> { co_return 2; }());
        auto h = weft::spawn([]() -> weft::task<int> { co_return 3; }());
        co_return inner + co_await std::move(h);
    }());
    EXPECT_EQ(v, 5);
}

}  // namespace
