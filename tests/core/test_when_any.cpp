#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "test_util.hpp"
#include "weft/core/sync_wait.hpp"
#include "weft/core/when_any.hpp"

namespace {

TEST(when_any, first_finished_wins_and_losers_are_cancelled_and_awaited) {
    int losers_stopped = 0;
    auto loser = [&]() -> weft::task<int> {
        if (co_await weft::test::wait_for_stop{}) {
            ++losers_stopped;
        }
        co_return -1;
    };
    auto winner = []() -> weft::task<int> { co_return 42; };
    auto r = weft::sync_wait(weft::when_any(loser(), winner(), loser()));
    EXPECT_EQ(r.index, 1U);
    EXPECT_EQ(r.value, 42);
    EXPECT_EQ(losers_stopped, 2);  // both were cancelled, and finished before when_any returned
}

TEST(when_any, winner_exception_is_rethrown) {
    auto loser = []() -> weft::task<int> {
        co_await weft::test::wait_for_stop{};
        co_return 0;
    };
    auto failing = []() -> weft::task<int> {
        throw std::runtime_error("fail");
        co_return 0;
    };
    EXPECT_THROW(weft::sync_wait(weft::when_any(loser(), failing())), std::runtime_error);
}

TEST(when_any, empty_is_an_error) {
    EXPECT_THROW(weft::sync_wait(weft::when_any(std::vector<weft::task<int>>{})),
                 std::invalid_argument);
}

}  // namespace
