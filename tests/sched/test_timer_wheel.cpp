#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <random>
#include <vector>

#include "test_util.hpp"
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

// Deadlines past the wheel's span (64^6 ms = 2^36 ms): 2^36 ms ahead (the top level's current
// slot one revolution on), a later one in another top-level slot, and the millisecond count of
// steady_clock::time_point::max() (what sleep_until(max) and a default deadline_timer arm).
// Advancing past everything else fires the near entries and returns; the far ones never fire
// early, are reported as a later deadline each time, and fire when their time comes.
TEST(timer_wheel, deadline_past_the_span_is_refiled_and_fires_on_time) {
    constexpr std::uint64_t span = std::uint64_t{1} << 36;
    const std::uint64_t max_ms = static_cast<std::uint64_t>(
        std::chrono::ceil<std::chrono::milliseconds>(std::chrono::steady_clock::duration::max())
            .count());
    const std::vector<std::uint64_t> near = {10, 5000, span - 1};
    const std::vector<std::uint64_t> far = {span, span + 7, 2 * span + (5ULL << 30) + 3, max_ms};
    for (const std::uint64_t start : {std::uint64_t{0}, std::uint64_t{123'456'789'012}}) {
        timer_wheel w;
        w.advance(start, [](timer_op*) {});
        std::vector<std::unique_ptr<timer_op>> ops;
        for (const auto d : near) {
            ops.push_back(std::make_unique<timer_op>());
            ops.back()->when_ms = start + d;
            w.insert(ops.back().get());
        }
        for (const auto d : far) {
            ops.push_back(std::make_unique<timer_op>());
            ops.back()->when_ms = d == max_ms ? max_ms : start + d;
            w.insert(ops.back().get());
        }
        std::vector<std::uint64_t> fired;
        std::uint64_t now = start;
        std::size_t steps = 0;
        while (w.size() > 0) {
            auto next = w.next_deadline();
            ASSERT_TRUE(next);
            ASSERT_GE(*next, now);
            now = *next;
            w.advance(now, [&](timer_op* op) {
                EXPECT_LE(op->when_ms, now);
                fired.push_back(op->when_ms);
            });
            // Each step moves a far entry forward by most of a revolution: a bounded count.
            ASSERT_LT(++steps, std::size_t{1} << 20) << "the wheel does not move on";
        }
        std::vector<std::uint64_t> expected;
        for (const auto d : near) {
            expected.push_back(start + d);
        }
        for (const auto d : far) {
            expected.push_back(d == max_ms ? max_ms : start + d);
        }
        std::sort(expected.begin(), expected.end());
        EXPECT_EQ(fired, expected) << "start " << start;
    }
}

// A far entry, advanced past everything else, is still removable, and what is inserted after
// it fires.
TEST(timer_wheel, far_entry_blocks_nothing_and_can_be_removed) {
    timer_wheel w;
    timer_op far;
    far.when_ms = std::uint64_t{1} << 36;
    w.insert(&far);
    timer_op near;
    near.when_ms = 50;
    w.insert(&near);
    int fired = 0;
    w.advance(1000, [&](timer_op* op) {
        EXPECT_EQ(op, &near);
        ++fired;
    });
    EXPECT_EQ(fired, 1);
    ASSERT_TRUE(w.next_deadline());
    EXPECT_GT(*w.next_deadline(), 1000U);
    timer_op later;
    later.when_ms = 2000;
    w.insert(&later);
    w.advance(2000, [&](timer_op* op) {
        EXPECT_EQ(op, &later);
        ++fired;
    });
    EXPECT_EQ(fired, 2);
    w.remove(&far);
    EXPECT_EQ(w.size(), 0U);
    EXPECT_FALSE(w.next_deadline());
}

// Random deadlines, random removals, random clock steps: the wheel fires exactly the entries
// due, never early, each once. 2,000 steps (scaled() under the sanitizers).
TEST(timer_wheel, matches_reference_under_random_schedule) {
    std::mt19937_64 rng(42);
    timer_wheel w;
    std::vector<std::unique_ptr<timer_op>> ops;
    std::vector<bool> live;
    std::uint64_t now = 0;
    std::size_t fired_total = 0;
    std::size_t removed = 0;
    const int steps = weft::test::scaled(2000);
    for (int step = 0; step < steps; ++step) {
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

// The same over spans far past the wheel's (up to 2^45 ms) and clock steps of up to 2^38 ms:
// entries beyond the horizon are re-filed as time passes and fire when due, never early.
TEST(timer_wheel, matches_reference_with_deadlines_past_the_span) {
    std::mt19937_64 rng(7);
    timer_wheel w;
    std::vector<std::unique_ptr<timer_op>> ops;
    std::vector<bool> live;
    std::uint64_t now = 0;
    std::size_t fired_total = 0;
    for (int step = 0; step < 500; ++step) {
        for (int k = 0; k < 3; ++k) {
            ops.push_back(std::make_unique<timer_op>());
            const std::uint64_t span = std::uint64_t{1} << (rng() % 46);
            ops.back()->when_ms = now + rng() % span;
            live.push_back(true);
            w.insert(ops.back().get());
        }
        now += rng() % (std::uint64_t{1} << (rng() % 39));
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
        if (auto next = w.next_deadline()) {
            EXPECT_GT(*next, now);
        }
    }
    EXPECT_GT(fired_total, 0U);
    EXPECT_EQ(fired_total + w.size(), ops.size());
}

}  // namespace
