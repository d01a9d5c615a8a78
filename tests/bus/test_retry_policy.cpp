// weft::bus::retry_policy: the delays it computes, and those a subscription's failures get
// from the memory broker on the test clock (where a ten-second back-off takes no wall time).

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "weft/bus/memory_broker.hpp"
#include "weft/bus/publisher.hpp"
#include "weft/bus/retry_policy.hpp"
#include "weft/bus/subscriber.hpp"
#include "weft/core/task.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/runtime_clock.hpp"
#include "weft/testing/test_clock.hpp"

namespace {

using namespace weft::bus;
using namespace std::chrono_literals;

const std::error_code busy = std::make_error_code(std::errc::device_or_resource_busy);

TEST(retry_policy, window_doubles_to_the_cap_after_the_immediate_retries) {
    const retry_policy p{.max_attempts = 0, .immediate_retries = 2, .base = 100ms, .cap = 400ms};
    EXPECT_EQ(p.window_after(1), 0ms);
    EXPECT_EQ(p.window_after(2), 0ms);
    EXPECT_EQ(p.window_after(3), 100ms);
    EXPECT_EQ(p.window_after(4), 200ms);
    EXPECT_EQ(p.window_after(5), 400ms);
    EXPECT_EQ(p.window_after(6), 400ms);
    EXPECT_EQ(p.window_after(4'000'000'000U), 400ms);  // no overflow past the cap
}

TEST(retry_policy, full_jitter_draws_from_the_whole_window) {
    retry_policy p{.max_attempts = 0, .immediate_retries = 0, .base = 100ms, .cap = 1s};
    EXPECT_EQ(p.delay_after(2, 0.0), 0ms);
    EXPECT_EQ(p.delay_after(2, 0.5), 100ms);
    EXPECT_EQ(p.delay_after(2, 1.0), 200ms);
    EXPECT_EQ(p.delay_after(2, 7.0), 200ms);  // a draw past 1 is clamped
    p.jitter = false;
    EXPECT_EQ(p.delay_after(2, 0.0), 200ms);
}

// Runs one message through a subscription that fails every delivery, and returns the test
// clock's reading at each delivery; `dead` gets the dead letter's delivery count.
auto deliveries_of_an_always_failing_handler(const retry_policy& policy, std::string& dead)
    -> std::vector<weft::runtime_clock::time_point> {
    std::vector<weft::runtime_clock::time_point> at;
    memory_broker broker;
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{broker};
        subscriber sub{broker, {.ack_wait = 1h, .retry = policy}};
        envelope e;
        e.topic = "orders";
        e.payload = "x";
        (co_await pub.publish(std::move(e))).value();
        auto s = (co_await sub.subscribe("orders", "g")).value();
        for (std::uint32_t k = 1; k <= policy.max_attempts; ++k) {
            auto d = (co_await s.next()).value();
            at.push_back(weft::runtime_clock::now());
            EXPECT_EQ(d.attempt(), k);
            EXPECT_TRUE(s.fail(d, busy));
        }
        auto dlq = (co_await sub.subscribe("orders.dead-letter", "ops")).value();
        auto d = (co_await dlq.next()).value();
        dead = d.message().find_header("weftdeliveries")->value;
        EXPECT_TRUE(d.ack());
        (co_await pub.close()).value();
    }());
    return at;
}

TEST(retry_policy, delays_are_observed_on_the_test_clock) {
    const retry_policy p{
        .max_attempts = 7, .immediate_retries = 2, .base = 100ms, .cap = 400ms, .jitter = false};
    std::string dead;
    const auto at = deliveries_of_an_always_failing_handler(p, dead);
    ASSERT_EQ(at.size(), 7U);
    std::vector<std::chrono::milliseconds> gaps;
    for (std::size_t i = 1; i < at.size(); ++i) {
        gaps.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(at[i] - at[i - 1]));
    }
    const std::vector<std::chrono::milliseconds> want{0ms, 0ms, 100ms, 200ms, 400ms, 400ms};
    EXPECT_EQ(gaps, want);
    EXPECT_EQ(dead, "7");
}

TEST(retry_policy, jittered_delays_stay_inside_their_windows) {
    const retry_policy p{.max_attempts = 12, .immediate_retries = 1, .base = 1s, .cap = 1min};
    std::string dead;
    const auto at = deliveries_of_an_always_failing_handler(p, dead);
    ASSERT_EQ(at.size(), 12U);
    std::chrono::milliseconds total{0};
    for (std::size_t i = 1; i < at.size(); ++i) {
        const auto gap = std::chrono::duration_cast<std::chrono::milliseconds>(at[i] - at[i - 1]);
        EXPECT_LE(gap, p.window_after(static_cast<std::uint32_t>(i)));
        EXPECT_GE(gap, 0ms);
        total += gap;
    }
    // Ten delayed windows (1 s doubling to the 1 min cap) sum to 5 min 3 s; the draws spread
    // inside them, so the total is well above zero (all ten below 1% of their window: ~1e-20).
    EXPECT_GT(total, 1s);
    EXPECT_EQ(dead, "12");
}

}  // namespace
