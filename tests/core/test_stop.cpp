#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "weft/core/stop.hpp"

namespace {

TEST(stop_state, request_runs_registered_callbacks_once) {
    weft::stop_state s;
    int calls = 0;
    {
        weft::stop_callback cb(&s, [&] { ++calls; });
        EXPECT_FALSE(s.stop_requested());
        EXPECT_TRUE(s.request_stop());
        EXPECT_FALSE(s.request_stop());
    }
    EXPECT_TRUE(s.stop_requested());
    EXPECT_EQ(calls, 1);
}

TEST(stop_state, callback_after_stop_runs_immediately) {
    weft::stop_state s;
    s.request_stop();
    int calls = 0;
    weft::stop_callback cb(&s, [&] { ++calls; });
    EXPECT_EQ(calls, 1);
}

TEST(stop_state, removed_callback_never_runs) {
    weft::stop_state s;
    int calls = 0;
    {
        weft::stop_callback cb(&s, [&] { ++calls; });
    }
    s.request_stop();
    EXPECT_EQ(calls, 0);
}

TEST(stop_state, linked_state_follows_parent) {
    weft::stop_state parent;
    weft::linked_stop_state child(&parent);
    weft::linked_stop_state grandchild(&child);
    parent.request_stop();
    EXPECT_TRUE(child.stop_requested());
    EXPECT_TRUE(grandchild.stop_requested());
}

TEST(stop_state, linked_state_of_stopped_parent_starts_stopped) {
    weft::stop_state parent;
    parent.request_stop();
    weft::linked_stop_state child(&parent);
    EXPECT_TRUE(child.stop_requested());
}

TEST(stop_state, child_stop_does_not_reach_parent) {
    weft::stop_state parent;
    weft::linked_stop_state child(&parent);
    child.request_stop();
    EXPECT_FALSE(parent.stop_requested());
}

// The std::stop_callback contract: destroying a callback while it runs on another thread waits
// for it to return.
TEST(stop_state, remove_waits_for_callback_running_on_other_thread) {
    weft::stop_state s;
    std::atomic<int> phase{0};
    std::atomic<bool> finished{false};
    auto cb =
        std::make_unique<weft::stop_callback<std::function<void()>>>(&s, std::function<void()>([&] {
            phase.store(1);
            while (phase.load() != 2) {
                std::this_thread::yield();
            }
            finished.store(true);
        }));
    std::thread t([&] { s.request_stop(); });
    while (phase.load() != 1) {
        std::this_thread::yield();
    }
    std::thread releaser([&] { phase.store(2); });
    cb.reset();  // must wait for the callback
    EXPECT_TRUE(finished.load());
    t.join();
    releaser.join();
}

TEST(stop_state, callback_may_destroy_itself) {
    weft::stop_state s;
    std::unique_ptr<weft::stop_callback<std::function<void()>>> cb;
    cb = std::make_unique<weft::stop_callback<std::function<void()>>>(
        &s, std::function<void()>([&] { cb.reset(); }));
    s.request_stop();
    EXPECT_EQ(cb, nullptr);
}

}  // namespace
