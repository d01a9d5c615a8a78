#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>

#include "test_util.hpp"
#include "weft/core/scope.hpp"
#include "weft/core/sync_wait.hpp"

namespace {

TEST(scope, waits_for_every_child) {
    int done = 0;
    auto body = [&](weft::scope& s) -> weft::task<void> {
        for (int i = 0; i < 100; ++i) {
            s.spawn([&]() -> weft::task<void> {
                ++done;
                co_return;
            });
        }
        co_return;
    };
    weft::sync_wait(weft::with_scope(body));
    EXPECT_EQ(done, 100);
}

TEST(scope, returns_body_value) {
    auto r =
        weft::sync_wait(weft::with_scope([](weft::scope&) -> weft::task<int> { co_return 7; }));
    EXPECT_EQ(r, 7);
}

TEST(scope, first_child_failure_cancels_siblings_and_is_rethrown) {
    bool sibling_saw_stop = false;
    auto body = [&](weft::scope& s) -> weft::task<void> {
        s.spawn(
            [&]() -> weft::task<void> { sibling_saw_stop = co_await weft::test::wait_for_stop{}; });
        s.spawn([]() -> weft::task<void> {
            throw std::runtime_error("child");
            co_return;
        }());
        co_return;
    };
    EXPECT_THROW(weft::sync_wait(weft::with_scope(body)), std::runtime_error);
    EXPECT_TRUE(sibling_saw_stop);
}

TEST(scope, body_failure_cancels_children_after_they_finish) {
    bool child_done = false;
    auto body = [&](weft::scope& s) -> weft::task<void> {
        s.spawn([&]() -> weft::task<void> {
            co_await weft::test::wait_for_stop{};
            child_done = true;
        });
        throw std::logic_error("body");
        co_return;
    };
    EXPECT_THROW(weft::sync_wait(weft::with_scope(body)), std::logic_error);
    EXPECT_TRUE(child_done);
}

TEST(scope, children_see_the_scope_stop_token) {
    bool stopped = false;
    auto body = [&](weft::scope& s) -> weft::task<void> {
        s.spawn([&]() -> weft::task<void> { stopped = co_await weft::test::wait_for_stop{}; });
        s.request_stop();
        co_return;
    };
    weft::sync_wait(weft::with_scope(body));
    EXPECT_TRUE(stopped);
}

TEST(scope, nested_scope_is_cancelled_by_outer) {
    bool inner_child_stopped = false;
    auto outer = [&](weft::scope& s) -> weft::task<void> {
        s.spawn(weft::with_scope([&](weft::scope& inner) -> weft::task<void> {
            inner.spawn([&]() -> weft::task<void> {
                inner_child_stopped = co_await weft::test::wait_for_stop{};
            });
            co_return;
        }));
        s.request_stop();
        co_return;
    };
    weft::sync_wait(weft::with_scope(outer));
    EXPECT_TRUE(inner_child_stopped);
}

}  // namespace
