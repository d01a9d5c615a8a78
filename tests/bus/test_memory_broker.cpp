#include <gtest/gtest.h>

#include "conformance.hpp"
#include "weft/bus/memory_broker.hpp"

namespace {

using namespace weft::bus;
using namespace std::chrono_literals;
using weft::bus::test::bus_conformance;

INSTANTIATE_TEST_SUITE_P(memory,
                         bus_conformance,
                         ::testing::Values(test::backend_factory{
                             .make = []() -> std::unique_ptr<backend> {
                                 return std::make_unique<memory_broker>();
                             },
                             .pause = [](backend& b) { static_cast<memory_broker&>(b).pause(); },
                             .resume = [](backend& b) { static_cast<memory_broker&>(b).resume(); },
                             .runtime_for = {},
                             .topic_prefix = ""}));

TEST(memory_broker, features_and_name) {
    memory_broker b;
    EXPECT_EQ(b.name(), "memory");
    EXPECT_FALSE(b.features().durable);
    EXPECT_TRUE(b.features().deduplicates_ids);
}

TEST(memory_broker, retention_bounds_what_a_new_group_gets) {
    memory_broker b{{.retention = 3}};
    weft::runtime rt{{.workers = 1}};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{b};
        for (int i = 0; i < 5; ++i) {
            envelope e;
            e.topic = "t";
            e.payload = std::to_string(i);
            (co_await pub.publish(std::move(e))).value();
        }
        EXPECT_EQ(b.stored("t"), 5U);
        EXPECT_EQ(b.stored("never"), 0U);
        subscriber sub{b};
        auto s = (co_await sub.subscribe("t", "late")).value();
        for (const char* want : {"2", "3", "4"}) {
            auto d = (co_await s.next()).value();
            EXPECT_EQ(d.message().payload, want);
            EXPECT_TRUE(d.ack());
        }
        (co_await pub.close()).value();
    }());
}

TEST(memory_broker, message_too_large_is_an_error_value) {
    memory_broker b{{.max_message_bytes = 16}};
    weft::runtime rt{{.workers = 1}};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{b};
        envelope e;
        e.topic = "t";
        e.payload.assign(64, 'x');
        auto r = co_await pub.publish(std::move(e));
        EXPECT_EQ(r.error(), bus_errc::message_too_large);
        EXPECT_EQ(b.stored("t"), 0U);
        (co_await pub.close()).value();
    }());
}

TEST(memory_broker, resume_keeps_the_order_of_arrival) {
    memory_broker b;
    weft::runtime rt{{.workers = 1}};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{b, {.max_pending = 8}};
        b.pause();
        for (int i = 0; i < 5; ++i) {
            envelope e;
            e.topic = "t";
            e.payload = std::to_string(i);
            EXPECT_TRUE(pub.try_publish_async(std::move(e)));
        }
        EXPECT_EQ(b.stored("t"), 0U);
        b.resume();
        for (std::uint64_t i = 0; i < 5; ++i) {
            auto r = (co_await pub.results().recv()).value();
            EXPECT_EQ(r.outcome->sequence, i + 1);
        }
        (co_await pub.close()).value();
    }());
}

}  // namespace
