#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdio>

#include "conformance.hpp"
#include "weft/bus/memory_broker.hpp"
#include "weft/core/scope.hpp"
#include "weft/sched/yield.hpp"
#include "weft/testing/test_clock.hpp"

namespace {

using namespace weft::bus;
using namespace std::chrono_literals;
using namespace std::string_view_literals;
using weft::bus::test::bus_conformance;

INSTANTIATE_TEST_SUITE_P(memory,
                         bus_conformance,
                         ::testing::Values(test::backend_factory{
                             .make = []() -> std::unique_ptr<backend> {
                                 return std::make_unique<memory_broker>();
                             },
                             .pause = [](backend& b) { static_cast<memory_broker&>(b).pause(); },
                             .resume = [](backend& b) { static_cast<memory_broker&>(b).resume(); },
                             // The test clock: ack timeouts, nack delays and the suite's
                             // own waits take no wall time, and fire in deadline order.
                             .runtime_for =
                                 [](unsigned workers) {
                                     return weft::testing::test_clock_runtime({.workers = workers});
                                 },
                             .topic_prefix = ""}));

TEST(memory_broker, features_and_name) {
    memory_broker b;
    EXPECT_EQ(b.name(), "memory");
    EXPECT_FALSE(b.features().durable);
    EXPECT_TRUE(b.features().deduplicates_ids);
}

// ack::stream is the topic's one shared name: every ack (awaited or async, from any publisher
// of the broker) views the same characters, none copies them.
TEST(memory_broker, acks_of_a_topic_share_its_name) {
    memory_broker b;
    weft::runtime rt{{.workers = 2}};
    rt.block_on([&]() -> weft::task<void> {
        const std::string topic = "orders.a-topic-name-longer-than-the-small-string-buffer";
        publisher pub{b, {.max_pending = 32}};  // the 20 unread results fit
        publisher other{b};
        auto make = [&](std::string t) {
            envelope e;
            e.topic = std::move(t);
            return e;
        };
        const ack first = (co_await pub.publish(make(topic))).value();
        EXPECT_EQ(first.stream, topic);
        EXPECT_EQ(first.stream.view(), topic);
        EXPECT_EQ(first.stream.str(), topic);
        const char* chars = first.stream.view().data();
        for (int i = 0; i < 20; ++i) {
            (co_await pub.publish_async(make(topic))).value();
        }
        int read = 0;
        for (; read < 20; ++read) {
            auto r = co_await pub.results().recv();
            const ack& a = r.value().outcome.value();
            EXPECT_EQ(a.stream.view().data(), chars);
            EXPECT_EQ(a.stream, first.stream);
        }
        EXPECT_EQ(read, 20);
        const ack from_other = (co_await other.publish(make(topic))).value();
        EXPECT_EQ(from_other.stream.view().data(), chars);
        const ack u = (co_await pub.publish(make("u"))).value();
        EXPECT_EQ(u.stream, "u"sv);
        EXPECT_FALSE(u.stream == first.stream);
        const ack empty{};
        EXPECT_TRUE(empty.stream.empty());
        EXPECT_EQ(empty.stream.view(), ""sv);
        (co_await pub.close()).value();
        (co_await other.close()).value();
    }());
}

// close() wakes a publish_async waiting at the bound with publisher_closed; in_flight() and
// the results read account for every message.
TEST(memory_broker, close_wakes_a_publish_waiting_at_the_bound) {
    memory_broker b;
    weft::runtime rt{{.workers = 2}};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{b, {.max_pending = 3}};
        auto make = [] {
            envelope e;
            e.topic = "t";
            return e;
        };
        for (int i = 0; i < 3; ++i) {
            (co_await pub.publish_async(make())).value();
        }
        EXPECT_EQ(pub.try_publish_async(make()).error(), std::errc::operation_would_block);
        std::error_code waiting_publish;
        auto w = weft::spawn([&]() -> weft::task<void> {  // the bound is held by unread results
            waiting_publish = (co_await pub.publish_async(make())).error();
        });
        (co_await pub.flush()).value();  // nothing in flight: the bound is the unread results
        EXPECT_EQ(pub.in_flight(), 0);
        EXPECT_EQ(pub.results().size(), 3U);
        (co_await pub.close()).value();
        co_await std::move(w);
        EXPECT_EQ(waiting_publish, bus_errc::publisher_closed);
        int read = 0;
        for (;;) {
            auto r = co_await pub.results().recv();
            if (!r) {
                break;
            }
            EXPECT_TRUE(r.value().outcome);
            ++read;
        }
        EXPECT_EQ(read, 3);
    }());
}

// An awaited publish whose task is stopped returns operation_canceled at once; the message
// stays with the broker, and its ack, when it comes, frees the slot and the unit (nothing
// waits for it any more).
TEST(memory_broker, stopped_awaited_publish_is_canceled_and_its_late_ack_frees_the_slot) {
    memory_broker b;
    weft::runtime rt{{.workers = 2}};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{b, {.max_pending = 2}};
        auto make = [] {
            envelope e;
            e.topic = "t";
            return e;
        };
        b.pause();
        std::error_code stopped;
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {
                auto r = co_await pub.publish(make());
                stopped = r ? std::error_code{} : r.error();
            });
            while (pub.in_flight() < 1) {
                co_await weft::yield();
            }
            s.request_stop();
            co_return;
        });
        EXPECT_EQ(stopped, std::errc::operation_canceled);
        EXPECT_EQ(pub.in_flight(), 1);  // the broker still holds it
        EXPECT_EQ(b.stored("t"), 0U);
        b.resume();
        EXPECT_EQ(pub.in_flight(), 0);
        EXPECT_EQ(b.stored("t"), 1U);  // stopping the wait does not take the message back
        EXPECT_TRUE(pub.try_publish_async(make()));  // both units are free again
        EXPECT_TRUE(pub.try_publish_async(make()));
        EXPECT_EQ(pub.try_publish_async(make()).error(), std::errc::operation_would_block);
        for (int i = 0; i < 2; ++i) {
            EXPECT_TRUE((co_await pub.results().recv()).value().outcome);
        }
        (co_await pub.close()).value();
    }());
}

// Stops racing acks on two workers: each stopped publish either has its ack (ok) or returns
// operation_canceled, and either way its slot and unit come back (flush returns, the whole
// bound is free afterwards). Every message is stored once.
TEST(memory_broker, awaited_publishes_stopped_while_their_acks_arrive_lose_no_slot) {
    memory_broker b;
    weft::runtime rt{{.workers = 2}};
    rt.block_on([&]() -> weft::task<void> {
        constexpr int tasks = 8;
        constexpr int rounds = 200;
        publisher pub{b, {.max_pending = tasks}};
        auto make = [] {
            envelope e;
            e.topic = "t";
            return e;
        };
        std::atomic<int> acked{0};
        std::atomic<int> canceled{0};
        std::atomic<int> failed{0};
        for (int round = 0; round < rounds; ++round) {
            b.pause();
            co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
                for (int t = 0; t < tasks; ++t) {
                    s.spawn([&]() -> weft::task<void> {
                        auto r = co_await pub.publish(make());
                        if (r) {
                            acked.fetch_add(1, std::memory_order_relaxed);
                        } else if (r.error() == std::errc::operation_canceled) {
                            canceled.fetch_add(1, std::memory_order_relaxed);
                        } else {
                            failed.fetch_add(1, std::memory_order_relaxed);
                        }
                    });
                }
                while (pub.in_flight() < tasks) {
                    co_await weft::yield();
                }
                s.spawn([&]() -> weft::task<void> {  // a thief may run it beside the stop
                    b.resume();
                    co_return;
                });
                s.request_stop();
                co_return;
            });
            b.resume();  // in case the stopped scope's resume task did not run
            (co_await pub.flush()).value();
            EXPECT_EQ(pub.in_flight(), 0);
        }
        EXPECT_EQ(acked.load() + canceled.load(), tasks * rounds);
        EXPECT_EQ(failed.load(), 0);
        EXPECT_GT(canceled.load(), 0);
        EXPECT_EQ(b.stored("t"), std::uint64_t{tasks} * rounds);
        for (int i = 0; i < tasks; ++i) {
            EXPECT_TRUE(pub.try_publish_async(make()));
        }
        EXPECT_EQ(pub.try_publish_async(make()).error(), std::errc::operation_would_block);
        for (int i = 0; i < tasks; ++i) {
            EXPECT_TRUE((co_await pub.results().recv()).value().outcome);
        }
        (co_await pub.close()).value();
        std::printf("stopped awaited publishes: %d acked, %d canceled\n", acked.load(),
                    canceled.load());
    }());
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

// The window is exact: after many publishes (the ring wrapped several times, the id table
// shifted entries back on every eviction) the last `dedup_window` ids are repeats with their
// original sequences and the one before them is new again. The ids differ only in their first
// bytes (a caller's counter), so the table must not rely on their last bytes being random.
// De-duplication is per topic, also when one publisher alternates between topics.
TEST(memory_broker, dedup_window_is_exact_and_per_topic) {
    constexpr int window = 100;
    constexpr int published = 1000;
    memory_broker b{{.retention = 0, .dedup_window = window}};
    weft::runtime rt{{.workers = 1}};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{b};
        auto id_of = [](int i) {
            message_id id;
            id.bytes[0] = static_cast<std::uint8_t>(i >> 8);
            id.bytes[1] = static_cast<std::uint8_t>(i);
            id.bytes[15] = 1;
            return id;
        };
        auto make = [&](const char* topic, int i) {
            envelope e;
            e.topic = topic;
            e.id = id_of(i);
            return e;
        };
        for (int i = 0; i < published; ++i) {
            const ack a = (co_await pub.publish(make("t", i))).value();
            EXPECT_FALSE(a.duplicate);
            EXPECT_EQ(a.sequence, static_cast<std::uint64_t>(i + 1));
            const ack other = (co_await pub.publish(make("u", i))).value();
            EXPECT_FALSE(other.duplicate);
        }
        for (int i = published - window; i < published; ++i) {
            const ack a = (co_await pub.publish(make("t", i))).value();
            EXPECT_TRUE(a.duplicate) << i;
            EXPECT_EQ(a.sequence, static_cast<std::uint64_t>(i + 1));
        }
        EXPECT_EQ(b.stored("t"), static_cast<std::uint64_t>(published));
        const ack again = (co_await pub.publish(make("t", published - window - 1))).value();
        EXPECT_FALSE(again.duplicate);
        EXPECT_EQ(again.sequence, static_cast<std::uint64_t>(published + 1));
        (co_await pub.close()).value();
    }());
}

// Ids that arrive below the largest seen (a caller's own ids, publishes that overtake each other)
// are kept apart from those that arrive in rising order, with the same exact window: here every
// even publish rises and every odd one falls, so both kinds expire interleaved, and the repeats
// come newest first.
TEST(memory_broker, dedup_window_is_exact_for_ids_out_of_order) {
    constexpr int window = 100;
    constexpr int published = 1000;
    memory_broker b{{.retention = 0, .dedup_window = window}};
    weft::runtime rt{{.workers = 1}};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{b};
        auto make = [](int i) {
            const int v = i % 2 == 0 ? 5000 + i : 5000 - i;
            envelope e;
            e.topic = "t";
            e.id.bytes[0] = static_cast<std::uint8_t>(v >> 8);
            e.id.bytes[1] = static_cast<std::uint8_t>(v);
            e.id.bytes[15] = 1;
            return e;
        };
        for (int i = 0; i < published; ++i) {
            const ack a = (co_await pub.publish(make(i))).value();
            EXPECT_FALSE(a.duplicate) << i;
            EXPECT_EQ(a.sequence, static_cast<std::uint64_t>(i + 1));
        }
        for (int i = published - 1; i >= published - window; --i) {
            const ack a = (co_await pub.publish(make(i))).value();
            EXPECT_TRUE(a.duplicate) << i;
            EXPECT_EQ(a.sequence, static_cast<std::uint64_t>(i + 1));
        }
        EXPECT_EQ(b.stored("t"), static_cast<std::uint64_t>(published));
        const std::array<int, 2> older{published - window - 1, published - window - 2};
        for (const int i : older) {
            const ack again = (co_await pub.publish(make(i))).value();
            EXPECT_FALSE(again.duplicate) << i;
        }
        EXPECT_EQ(b.stored("t"), static_cast<std::uint64_t>(published + 2));
        (co_await pub.close()).value();
    }());
}

// Deadlines are a FIFO with stale entries left behind by acks: one delivery held unsettled
// while 300 later ones are acked (the FIFO is compacted behind it) still expires and comes back,
// and no acked one does.
TEST(memory_broker, held_delivery_expires_after_later_ones_are_acked) {
    constexpr int later = 300;
    memory_broker b;
    weft::runtime rt{{.workers = 1}};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{b};
        for (int i = 0; i <= later; ++i) {
            envelope e;
            e.topic = "t";
            e.payload = std::to_string(i);
            (co_await pub.publish(std::move(e))).value();
        }
        subscriber sub{b, {.ack_wait = 2s}};  // the 300 acks fit well inside it under load
        auto s = (co_await sub.subscribe("t", "g")).value();
        auto held = (co_await s.next()).value();
        EXPECT_EQ(held.message().payload, "0"sv);
        for (int i = 1; i <= later; ++i) {
            auto d = (co_await s.next()).value();
            EXPECT_EQ(d.message().payload, std::to_string(i));
            EXPECT_EQ(d.attempt(), 1U);
            EXPECT_TRUE(d.ack());
        }
        auto again = (co_await s.next()).value();
        EXPECT_EQ(again.message().payload, "0"sv);
        EXPECT_EQ(again.attempt(), 2U);
        EXPECT_FALSE(held.ack());  // no longer the pending delivery
        EXPECT_TRUE(again.ack());
        auto none = co_await weft::with_timeout(300ms, s.next());
        EXPECT_FALSE(none);
        if (!none) {
            EXPECT_EQ(none.error(), std::errc::timed_out);
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

// Dead letters of a memory broker topic: listed with their reason and original topic; drop
// removes one; requeue publishes the envelope as it was (same id, key, type, headers and
// payload, without the dead-letter headers) to its topic, where the group gets it as new.
TEST(memory_broker, dead_letters_list_show_requeue_and_drop) {
    memory_broker b;
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{b};
        subscriber sub{b};
        std::vector<envelope> sent;
        for (int i = 0; i < 2; ++i) {
            envelope e;
            e.id = message_id::generate();
            e.topic = "orders";
            e.key = "k" + std::to_string(i);
            e.type = "order.placed";
            e.headers = {{"tenant", "acme"}};
            e.payload = "p" + std::to_string(i);
            e.time = std::chrono::system_clock::time_point{std::chrono::seconds{1'700'000'000}};
            sent.push_back(e);
            (co_await pub.publish(std::move(e))).value();
        }
        auto s = (co_await sub.subscribe("orders", "g")).value();
        for (int i = 0; i < 2; ++i) {
            auto d = (co_await s.next()).value();
            EXPECT_TRUE(d.term("cannot parse"));
        }
        auto dead = b.open_dead_letters("orders.dead-letter");
        const auto all = dead->list(10).value();
        EXPECT_EQ(all.size(), 2U);
        EXPECT_EQ(dead->list(1).value().size(), 1U);
        EXPECT_EQ(all.at(0).reason, "cannot parse");
        EXPECT_EQ(all.at(0).topic, "orders");
        EXPECT_EQ(original_of(dead->show(all.at(0).ref).value().message), sent[0]);
        EXPECT_EQ(dead->show("77").error(), std::errc::no_such_file_or_directory);
        EXPECT_TRUE(dead->drop(all.at(1).ref));
        EXPECT_EQ(dead->drop(all.at(1).ref).error(), std::errc::no_such_file_or_directory);
        EXPECT_TRUE(dead->requeue(all.at(0).ref));
        EXPECT_TRUE(dead->list(10).value().empty());
        auto again = (co_await s.next()).value();
        EXPECT_EQ(again.message(), sent[0]);
        EXPECT_EQ(again.attempt(), 1U);
        EXPECT_TRUE(again.ack());
        (co_await pub.close()).value();
    }());
}

}  // namespace
