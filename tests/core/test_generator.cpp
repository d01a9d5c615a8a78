#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "weft/core/generator.hpp"

namespace {

auto iota(int n) -> weft::generator<int> {
    for (int i = 0; i < n; ++i) {
        co_yield i;
    }
}

TEST(generator, yields_in_order) {
    std::vector<int> got;
    for (int v : iota(5)) {
        got.push_back(v);
    }
    EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(generator, is_lazy_and_can_stop_early) {
    int produced = 0;
    auto make = [&]() -> weft::generator<int> {
        for (int i = 0;; ++i) {
            ++produced;
            co_yield i;
        }
    };
    auto g = make();
    EXPECT_EQ(produced, 0);
    for (int v : g) {
        if (v == 3) {
            break;
        }
    }
    EXPECT_EQ(produced, 4);
}

TEST(generator, exception_surfaces_from_iteration) {
    auto g = []() -> weft::generator<std::string> {
        co_yield "a";
        throw std::runtime_error("stop");
    }();
    auto it = g.begin();
    EXPECT_EQ(*it, "a");
    EXPECT_THROW(++it, std::runtime_error);
}

TEST(generator, empty_sequence) {
    auto g = []() -> weft::generator<int> { co_return; }();
    EXPECT_TRUE(g.begin() == g.end());
}

}  // namespace
