#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "timer_wheel.hpp"

namespace {

using weft::detail::timer_op;
using weft::detail::timer_wheel;

TEST(timer_wheel, fires_in_deadline_order_across_levels) {
    timer_wheel w;
    std::vector<std::uint64_t> deadlines = {1, 5, 63, 64, 65, 4095, 4096, 300'000, 20'000'000};
    std::vector<std::unique_ptr<timer_op>> ops;
    for (auto d : deadlines) {
        ops.push_back(std::make_unique<timer_op>());
        ops.back()->when_ms = d;
        w.insert(ops.back().get());
    }
    EXPECT_EQ(w.size(), deadlines.size());
    std::vector<std::uint64_t> fired;
    std::uint64_t now = 0;
    while (w.size() > 0) {
        auto next = w.next_deadline();
        ASSERT_TRUE(next);
        ASSERT_GE(*next, now);
        now = *next;
        w.advance(now, [&](timer_op* op) {
            EXPECT_LE(op->when_ms, now);
            fired.push_back(op->when_ms);
        });
    }
    EXPECT_EQ(fired, deadlines);
}

TEST(timer_wheel, removed_entry_never_fires) {
    timer_wheel w;
    timer_op a;
    timer_op b;
    a.when_ms = 10;
    b.when_ms = 10;
    w.insert(&a);
    w.insert(&b);
    w.remove(&a);
    int fired = 0;
    w.advance(100, [&](timer_op* op) {
        EXPECT_EQ(op, &b);
        ++fired;
    });
    EXPECT_EQ(fired, 1);
    EXPECT_EQ(w.size(), 0U);
    EXPECT_FALSE(w.next_deadline());
}

TEST(timer_wheel, past_deadline_fires_on_next_advance) {
    timer_wheel w;
    w.advance(1000, [](timer_op*) {});
    timer_op a;
    a.when_ms = 3;  // already in the past
    w.insert(&a);
    int fired = 0;
    w.advance(1000, [&](timer_op*) { ++fired; });
    EXPECT_EQ(fired, 1);
}

// Random deadlines, random removals, random clock steps: the wheel fires exactly the entries
// due, never early, each once.
TEST(timer_wheel, matches_reference_under_random_schedule) {
    std::mt19937_64 rng(42);
    timer_wheel w;
    std::vector<std::unique_ptr<timer_op>> ops;
    std::vector<bool> live;
    std::uint64_t now = 0;
    std::size_t fired_total = 0;
    std::size_t removed = 0;
    for (int step = 0; step < 2000; ++step) {
        for (int k = 0; k < 5; ++k) {
            ops.push_back(std::make_unique<timer_op>());
            const std::uint64_t span = std::uint64_t{1} << (rng() % 24);
            ops.back()->when_ms = now + rng() % span;
            live.push_back(true);
            w.insert(ops.back().get());
        }
        if (rng() % 3 == 0) {
            const std::size_t i = rng() % ops.size();
            if (live[i]) {
                w.remove(ops[i].get());
                live[i] = false;
                ++removed;
            }
        }
        now += rng() % 5000;
        w.advance(now, [&](timer_op* op) {
            EXPECT_LE(op->when_ms, now);
            auto it =
                std::find_if(ops.begin(), ops.end(), [&](const auto& p) { return p.get() == op; });
            const auto idx = static_cast<std::size_t>(it - ops.begin());
            EXPECT_TRUE(live[idx]);
            live[idx] = false;
            ++fired_total;
        });
        for (std::size_t i = 0; i < ops.size(); ++i) {
            if (live[i]) {
                EXPECT_GT(ops[i]->when_ms, now) << "due entry not fired";
            }
        }
    }
    EXPECT_EQ(fired_total + removed + w.size(), ops.size());
}

}  // namespace
