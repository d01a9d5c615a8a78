// The bus's metrics (publisher_options::metrics, subscriber_options::metrics): counts after
// known traffic on the memory broker, read back from the Prometheus text exposition.

#include <gtest/gtest.h>

#include <array>
#include <map>
#include <sstream>
#include <string>

#include "weft/bus/memory_broker.hpp"
#include "weft/bus/publisher.hpp"
#include "weft/bus/subscriber.hpp"
#include "weft/metrics/registry.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/testing/test_clock.hpp"

namespace {

using namespace weft::bus;
using namespace std::chrono_literals;

// Every sample of a text exposition: "name{labels}" -> value. Fails the test on a line that
// is neither a comment nor `series value`.
auto parse(const std::string& text) -> std::map<std::string, double> {
    std::map<std::string, double> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') {
            continue;
        }
        const auto space = line.rfind(' ');
        EXPECT_NE(space, std::string::npos) << line;
        if (space == std::string::npos) {
            continue;
        }
        const std::string series = line.substr(0, space);
        EXPECT_EQ(out.count(series), 0U) << "repeated series " << series;
        out[series] = std::stod(line.substr(space + 1));
    }
    return out;
}

auto at(const std::map<std::string, double>& m, const std::string& series) -> double {
    auto it = m.find(series);
    EXPECT_NE(it, m.end()) << "no series " << series;
    return it == m.end() ? -1 : it->second;
}

auto make_env(const std::string& payload) -> envelope {
    envelope e;
    e.topic = "orders";
    e.key = "k";
    e.payload = payload;
    return e;
}

const std::error_code busy = std::make_error_code(std::errc::device_or_resource_busy);
const std::error_code garbage = std::make_error_code(std::errc::bad_message);

TEST(bus_metrics, publisher_counts_outcomes_in_flight_and_ack_latency) {
    weft::metrics::registry reg;
    memory_broker broker;
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{broker, {.max_pending = 16, .metrics = &reg}};
        for (int i = 0; i < 5; ++i) {
            envelope e = make_env("ok");
            (co_await pub.publish(std::move(e))).value();
        }
        broker.set_publish_fault([](const envelope& e) {
            return e.payload == "refused" ? std::make_error_code(std::errc::io_error)
                                          : std::error_code{};
        });
        for (int i = 0; i < 2; ++i) {
            envelope e = make_env("refused");
            auto r = co_await pub.publish(std::move(e));
            EXPECT_FALSE(r);
        }
        broker.pause();
        for (int i = 0; i < 3; ++i) {
            envelope e = make_env("held");
            (co_await pub.publish_async(std::move(e))).value();
        }
        auto m = parse(reg.render(weft::metrics::exposition_format::prometheus_text));
        EXPECT_EQ(at(m, R"(weft_bus_published_total{backend="memory"})"), 10);
        EXPECT_EQ(at(m, R"(weft_bus_publish_acked_total{backend="memory"})"), 5);
        EXPECT_EQ(at(m, R"(weft_bus_publish_failed_total{backend="memory"})"), 2);
        EXPECT_EQ(at(m, R"(weft_bus_publish_in_flight{backend="memory"})"), 3);
        EXPECT_EQ(at(m, R"(weft_bus_publish_ack_seconds_count{backend="memory"})"), 5);
        broker.resume();
        (co_await pub.flush()).value();
        for (int i = 0; i < 3; ++i) {
            auto r = co_await pub.results().recv();
            EXPECT_TRUE(r && r->outcome);
        }
        m = parse(reg.render(weft::metrics::exposition_format::prometheus_text));
        EXPECT_EQ(at(m, R"(weft_bus_publish_acked_total{backend="memory"})"), 8);
        EXPECT_EQ(at(m, R"(weft_bus_publish_in_flight{backend="memory"})"), 0);
        EXPECT_EQ(at(m, R"(weft_bus_publish_ack_seconds_count{backend="memory"})"), 8);
        (co_await pub.close()).value();
    }());
    // The publisher is gone: its in-flight gauge with it.
    const auto m = parse(reg.render(weft::metrics::exposition_format::prometheus_text));
    EXPECT_EQ(m.count(R"(weft_bus_publish_in_flight{backend="memory"})"), 0U);
}

// Five messages, each handled its own way under a policy of 3 attempts:
//   ok: acked at once; flaky: fails once, then acked; garbage: a permanent error;
//   doomed: fails all 3 attempts; late: acked at once.
// deliveries 1+2+1+3+1 = 8, redeliveries 1+2 = 3, acks 3, nacks 1+2 = 3, dead letters 2.
TEST(bus_metrics, subscriber_counts_deliveries_settlements_and_dead_letters) {
    weft::metrics::registry reg;
    memory_broker broker;
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{broker};
        const std::array<const char*, 5> payloads{"ok", "flaky", "garbage", "doomed", "late"};
        for (const char* p : payloads) {
            envelope e = make_env(p);
            (co_await pub.publish(std::move(e))).value();
        }
        subscriber sub{broker,
                       {.retry = {.max_attempts = 3,
                                  .base = 10ms,
                                  .classify =
                                      [](std::error_code e) {
                                          return e == garbage ? error_class::permanent
                                                              : error_class::transient;
                                      }},
                        .metrics = &reg}};
        auto s = (co_await sub.subscribe("orders", "billing")).value();
        int finished = 0;
        while (finished < 5) {
            auto d = (co_await s.next()).value();
            const std::string& p = d.message().payload;
            if (p == "garbage") {
                EXPECT_TRUE(s.fail(d, garbage));
                ++finished;
            } else if (p == "doomed" || (p == "flaky" && d.attempt() == 1)) {
                EXPECT_TRUE(s.fail(d, busy));
                finished += d.attempt() == 3 ? 1 : 0;
            } else {
                EXPECT_TRUE(d.ack());
                ++finished;
            }
        }
        const auto m = parse(reg.render(weft::metrics::exposition_format::prometheus_text));
        const std::string l = R"({backend="memory",topic="orders",group="billing"})";
        EXPECT_EQ(at(m, "weft_bus_deliveries_total" + l), 8);
        EXPECT_EQ(at(m, "weft_bus_redeliveries_total" + l), 3);
        EXPECT_EQ(at(m, "weft_bus_delivery_acks_total" + l), 3);
        EXPECT_EQ(at(m, "weft_bus_delivery_nacks_total" + l), 3);
        EXPECT_EQ(at(m, "weft_bus_dead_letters_total" + l), 2);
        EXPECT_EQ(broker.stored("orders.dead-letter"), 2U);
        (co_await pub.close()).value();
    }());
}

}  // namespace
