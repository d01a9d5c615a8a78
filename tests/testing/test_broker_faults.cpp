// The memory broker's faults (drop, delay and duplicate, down and back up) on a test clock:
// each shows what a consumer sees, by counts, attempts and order; the ack timeouts of minutes
// pass in no wall time.

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "test_util.hpp"
#include "weft/bus/errc.hpp"
#include "weft/bus/memory_broker.hpp"
#include "weft/bus/publisher.hpp"
#include "weft/bus/subscriber.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"
#include "weft/testing/test_clock.hpp"

namespace {

using namespace std::chrono_literals;
using namespace weft::bus;
using weft::task;

auto env(const char* payload) -> envelope {
    envelope e;
    e.topic = "orders";
    e.key = "k";
    e.payload = payload;
    return e;
}

// Nothing more arrives within `d` (of test time).
auto quiet_for(subscription& s, std::chrono::minutes d) -> task<bool> {
    auto r = co_await weft::with_timeout(d, s.next());
    co_return !r && r.error() == std::errc::timed_out;
}

TEST(broker_faults, dropped_ack_redelivers_after_the_ack_timeout) {
    memory_broker broker;
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on([&]() -> task<void> {
        publisher pub{broker};
        subscriber sub{broker, {.ack_wait = 1min}};
        (co_await pub.publish(env("A"))).value();
        auto s = (co_await sub.subscribe("orders", "g")).value();
        broker.drop_acks(1);
        auto d1 = (co_await s.next()).value();
        EXPECT_TRUE(d1.ack());  // answered ok, lost
        auto d2 = (co_await s.next()).value();
        EXPECT_EQ(d2.message().payload, "A");
        EXPECT_EQ(d2.attempt(), 2U);
        EXPECT_TRUE(d2.ack());  // the count is used up: this one settles
        EXPECT_TRUE(co_await quiet_for(s, 10min));
        (co_await pub.close()).value();
    }());
}

TEST(broker_faults, ack_later_than_the_timeout_is_lost_one_within_it_settles) {
    memory_broker broker;
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on([&]() -> task<void> {
        publisher pub{broker};
        subscriber sub{broker, {.ack_wait = 1min}};
        (co_await pub.publish(env("A"))).value();
        auto s = (co_await sub.subscribe("orders", "g")).value();
        broker.delay_acks(2min);
        auto d1 = (co_await s.next()).value();
        EXPECT_TRUE(d1.ack());
        auto d2 = (co_await s.next()).value();  // expired before the ack landed
        EXPECT_EQ(d2.attempt(), 2U);
        broker.delay_acks(10s);
        EXPECT_TRUE(d2.ack());
        EXPECT_TRUE(co_await quiet_for(s, 10min));  // settled 10 s later, never redelivered
        (co_await pub.close()).value();
    }());
}

TEST(broker_faults, duplicated_delivery_arrives_twice_in_order) {
    memory_broker broker;
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on([&]() -> task<void> {
        publisher pub{broker};
        subscriber sub{broker, {.ack_wait = 1min}};
        (co_await pub.publish(env("A"))).value();
        (co_await pub.publish(env("B"))).value();
        auto s = (co_await sub.subscribe("orders", "g")).value();
        broker.duplicate_deliveries(1);
        std::string seen;
        for (int i = 0; i < 3; ++i) {
            auto d = (co_await s.next()).value();
            seen += d.message().payload + std::to_string(d.attempt());
            EXPECT_TRUE(d.ack());
        }
        EXPECT_EQ(seen, "A1A2B1");
        EXPECT_TRUE(co_await quiet_for(s, 10min));
        (co_await pub.close()).value();
    }());
}

TEST(broker_faults, broker_away_fails_publishes_and_redelivers_when_back) {
    memory_broker broker;
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on([&]() -> task<void> {
        publisher pub{broker};
        subscriber sub{broker, {.ack_wait = 1h}};
        (co_await pub.publish(env("A"))).value();
        auto s = (co_await sub.subscribe("orders", "g")).value();
        auto d1 = (co_await s.next()).value();
        broker.go_away();
        EXPECT_EQ((co_await pub.publish(env("B"))).error(), bus_errc::broker_unreachable);
        EXPECT_EQ(d1.ack().error(), bus_errc::broker_unreachable);
        EXPECT_TRUE(co_await quiet_for(s, 2h));  // past the ack timeout: nothing while down
        broker.come_back();
        auto d2 = (co_await s.next()).value();
        EXPECT_EQ(d2.message().payload, "A");
        EXPECT_EQ(d2.attempt(), 2U);
        EXPECT_TRUE(d2.ack());
        (co_await pub.publish(env("C"))).value();
        auto d3 = (co_await s.next()).value();
        EXPECT_EQ(d3.message().payload, "C");
        EXPECT_TRUE(d3.ack());
        EXPECT_EQ(broker.stored("orders"), 2U);  // B was never stored
        (co_await pub.close()).value();
    }());
}

}  // namespace
