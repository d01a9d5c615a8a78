#include <gtest/gtest.h>

#include <cstdint>

#include "weft/core/detail/work_deque.hpp"

namespace {

auto item(std::uintptr_t i) -> void* { return reinterpret_cast<void*>(i * 16); }

TEST(work_deque, owner_pops_lifo_thieves_steal_fifo) {
    weft::detail::work_deque d;
    for (std::uintptr_t i = 1; i <= 4; ++i) {
        ASSERT_TRUE(d.push(item(i)));
    }
    EXPECT_EQ(d.steal(), item(1));
    EXPECT_EQ(d.pop(), item(4));
    EXPECT_EQ(d.peek_bottom(), item(3));
    EXPECT_EQ(d.pop(), item(3));
    EXPECT_EQ(d.steal(), item(2));
    EXPECT_EQ(d.pop(), nullptr);
    EXPECT_EQ(d.steal(), nullptr);
    EXPECT_EQ(d.size(), 0);
}

TEST(work_deque, reports_full_at_capacity) {
    weft::detail::work_deque d;
    for (std::int64_t i = 0; i < weft::detail::work_deque::capacity; ++i) {
        ASSERT_TRUE(d.push(item(static_cast<std::uintptr_t>(i + 1))));
    }
    EXPECT_FALSE(d.push(item(9999)));
    EXPECT_NE(d.steal(), nullptr);
    EXPECT_TRUE(d.push(item(9999)));  // a steal made room; indices wrap
    EXPECT_EQ(d.pop(), item(9999));
}

TEST(work_deque, unshared_pop_matches_pop) {
    weft::detail::work_deque d;
    ASSERT_TRUE(d.push(item(1)));
    ASSERT_TRUE(d.push(item(2)));
    EXPECT_EQ(d.pop_unshared(), item(2));
    EXPECT_EQ(d.pop_unshared(), item(1));
    EXPECT_EQ(d.pop_unshared(), nullptr);
}

}  // namespace
