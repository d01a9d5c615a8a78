#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "weft/core/sync_wait.hpp"
#include "weft/core/when_all.hpp"

namespace {

auto value(int v) -> weft::task<int> { co_return v; }
auto text(const char* s) -> weft::task<std::string> { co_return s; }
auto nothing() -> weft::task<void> { co_return; }

TEST(when_all, returns_every_value) {
    auto [a, b, c] = weft::sync_wait(weft::when_all(value(1), text("x"), nothing()));
    EXPECT_EQ(a, 1);
    EXPECT_EQ(b, "x");
    EXPECT_EQ(c, std::monostate{});
}

TEST(when_all, vector_form_keeps_order) {
    std::vector<weft::task<int>> ts;
    for (int i = 0; i < 50; ++i) {
        ts.push_back(value(i));
    }
    auto out = weft::sync_wait(weft::when_all(std::move(ts)));
    ASSERT_EQ(out.size(), 50U);
    for (int i = 0; i < 50; ++i) {
        EXPECT_EQ(out[static_cast<std::size_t>(i)], i);
    }
}

TEST(when_all, failure_cancels_others_and_rethrows_after_all_finished) {
    bool other_stopped = false;
    auto waiter = [&]() -> weft::task<int> {
        other_stopped = co_await weft::test::wait_for_stop{};
        co_return 0;
    };
    auto failing = []() -> weft::task<int> {
        throw std::runtime_error("x");
        co_return 0;
    };
    EXPECT_THROW(weft::sync_wait(weft::when_all(waiter(), failing())), std::runtime_error);
    EXPECT_TRUE(other_stopped);
}

}  // namespace
