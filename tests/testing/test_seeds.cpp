// weft::testing's seeded runtime: one thread picks the next runnable task with a seeded
// generator, so a seed names one interleaving, and a failing seed replays.

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "weft/core/join_handle.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"
#include "weft/sched/yield.hpp"
#include "weft/testing/seeds.hpp"

namespace {

using namespace std::chrono_literals;
using weft::task;

// Three tasks take turns appending their letter; the trace is the interleaving.
auto interleaving() -> task<std::string> {
    std::string trace;
    std::vector<weft::join_handle<void>> hs;
    for (char c : {'a', 'b', 'c'}) {
        hs.push_back(weft::spawn([&trace, c]() -> task<void> {
            for (int i = 0; i < 4; ++i) {
                trace += c;  // one thread: no race
                co_await weft::yield();
            }
        }));
    }
    for (auto& h : hs) {
        co_await std::move(h);
    }
    co_return trace;
}

auto trace_of(std::uint64_t seed) -> std::string {
    weft::runtime rt{weft::testing::seeded_runtime(seed)};
    return rt.block_on(interleaving());
}

TEST(seeded_runtime, same_seed_same_interleaving_other_seeds_differ) {
    std::set<std::string> traces;
    for (std::uint64_t seed = 1; seed <= 16; ++seed) {
        const std::string t = trace_of(seed);
        EXPECT_EQ(t.size(), 12U);
        EXPECT_EQ(trace_of(seed), t) << "seed " << seed;
        traces.insert(t);
    }
    EXPECT_GE(traces.size(), 8U);  // 16 seeds over 34,650 orders: nearly all distinct
}

// Timers on a seeded runtime run on its test clock: equal deadlines race by the seed, but the
// clock reads the same in every run.
TEST(seeded_runtime, timers_run_on_the_test_clock) {
    weft::runtime rt{weft::testing::seeded_runtime(7)};
    rt.block_on([]() -> task<void> {
        const auto start = weft::runtime_clock::now();
        (co_await weft::sleep_for(1h)).value();
        EXPECT_EQ(weft::runtime_clock::now() - start, 1h);
    }());
}

// A body that fails only for some interleavings: run_seeds stops at the first failing seed and
// names it, and rerunning that seed alone (WEFT_TEST_SEED) fails the same way.
TEST(run_seeds, failing_seed_is_reported_and_reproduces) {
    auto body = [](std::uint64_t) -> task<void> {
        const std::string t = co_await interleaving();
        if (t.substr(0, 2) == "ba") {
            throw std::runtime_error("b ran before a: " + t);
        }
    };
    ::unsetenv("WEFT_TEST_SEED");
    std::optional<std::uint64_t> failing;
    try {
        weft::testing::run_seeds(200, body);
    } catch (const weft::testing::seed_failure& f) {
        failing = f.seed();
        EXPECT_NE(std::string(f.what()).find("WEFT_TEST_SEED=" + std::to_string(f.seed())),
                  std::string::npos);
    }
    ASSERT_TRUE(failing.has_value()) << "no seed out of 200 ran b before a";
    // Seeds before it pass: rerun each alone.
    for (std::uint64_t s = 1; s < *failing; ++s) {
        ::setenv("WEFT_TEST_SEED", std::to_string(s).c_str(), 1);
        EXPECT_EQ(weft::testing::run_seeds(200, body), 1U);
    }
    ::setenv("WEFT_TEST_SEED", std::to_string(*failing).c_str(), 1);
    for (int again = 0; again < 3; ++again) {
        try {
            weft::testing::run_seeds(200, body);
            ADD_FAILURE() << "seed " << *failing << " passed when replayed";
        } catch (const weft::testing::seed_failure& f) {
            EXPECT_EQ(f.seed(), *failing);
        }
    }
    ::unsetenv("WEFT_TEST_SEED");
}

}  // namespace
