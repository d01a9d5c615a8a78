// The epoll reactor's park: the timeout it is given (nanoseconds, any int64) becomes the int
// milliseconds epoll_wait takes without wrapping, so a far timer neither parks the worker for
// ever (a negative timeout) nor wakes it early (a wrapped-around small one).

#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <optional>

#include "epoll_reactor.hpp"

namespace {

using weft::detail::epoll_timeout_ms;

constexpr std::int64_t ns_per_ms = 1'000'000;

TEST(epoll_reactor, park_timeout_rounds_up_to_whole_milliseconds) {
    EXPECT_EQ(epoll_timeout_ms(std::nullopt), -1);
    EXPECT_EQ(epoll_timeout_ms(std::int64_t{0}), 0);
    EXPECT_EQ(epoll_timeout_ms(std::int64_t{-5}), 0);
    EXPECT_EQ(epoll_timeout_ms(INT64_MIN), 0);
    EXPECT_EQ(epoll_timeout_ms(std::int64_t{1}), 1);
    EXPECT_EQ(epoll_timeout_ms(ns_per_ms), 1);
    EXPECT_EQ(epoll_timeout_ms(ns_per_ms + 1), 2);
}

// Past INT_MAX milliseconds (24.8 days) the park waits INT_MAX milliseconds: never a negative
// (infinite) or wrapped-around timeout. The worker parks again when it wakes.
TEST(epoll_reactor, park_timeout_past_int_range_is_clamped) {
    EXPECT_EQ(epoll_timeout_ms(std::int64_t{INT_MAX} * ns_per_ms), INT_MAX);
    EXPECT_EQ(epoll_timeout_ms(std::int64_t{INT_MAX} * ns_per_ms + 1), INT_MAX);
    EXPECT_EQ(epoll_timeout_ms((std::int64_t{1} << 31) * ns_per_ms), INT_MAX);
    EXPECT_EQ(epoll_timeout_ms((std::int64_t{3} << 30) * ns_per_ms), INT_MAX);
    EXPECT_EQ(epoll_timeout_ms((std::int64_t{1} << 32) * ns_per_ms), INT_MAX);
    EXPECT_EQ(epoll_timeout_ms(((std::int64_t{1} << 32) + 1) * ns_per_ms), INT_MAX);
    EXPECT_EQ(epoll_timeout_ms(INT64_MAX), INT_MAX);
}

}  // namespace
