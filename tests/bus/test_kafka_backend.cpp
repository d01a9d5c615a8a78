// The Kafka backend against a real single-node KRaft broker: the conformance suite, and what
// only Kafka has. The broker is started by CTest's fixture (scripts/brokers.sh start kafka on
// a private port, WEFT_KAFKA_BROKERS); a broker that is not there fails these tests, never
// skips them.

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "awaited_on_worker.hpp"
#include "conformance.hpp"
#include "weft/bus/envelope_codec.hpp"
#include "weft/bus/kafka_backend.hpp"
#include "weft/io/reactor.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"

namespace {

using namespace weft::bus;
using namespace std::chrono_literals;
using weft::bus::test::bus_conformance;

auto kafka_brokers() -> std::string {
    const char* b = std::getenv("WEFT_KAFKA_BROKERS");
    return b != nullptr ? b : "127.0.0.1:19092";
}

// Every test topic is unique, so the backend creates it on first use (create_topics_on_use).
// linger 1 ms: the suite waits on single publishes; batching is for the throughput runs.
auto make_kafka() -> std::unique_ptr<kafka_backend> {
    kafka_backend_options o;
    o.brokers = kafka_brokers();
    o.linger = 1ms;
    return std::make_unique<kafka_backend>(std::move(o));
}

// What Kafka cannot hold, by feature flag:
// - can_pause is false (holding the broker's acks would take stopping the broker), so
//   back_pressure_at_max_pending and flush_and_close_wait_for_in_flight report skipped here;
//   the memory backend runs them against the same publisher code.
// - deduplicates_ids is false: the idempotent producer drops its own retries, but a message
//   re-published with the same envelope id is a new record to Kafka, so
//   republished_id_is_deduplicated reports skipped.
// The broker-outage tests stop and start the broker the fixture started, keeping its data:
// scripts/brokers.sh (its path compiled in) with WEFT_KAFKA_KEEP_DATA=1, on the port of
// WEFT_KAFKA_BROKERS.
void run_brokers_script(const char* action) {
    const std::string brokers = kafka_brokers();
    const std::string port = brokers.substr(brokers.rfind(':') + 1);
    const std::string cmd = "WEFT_KAFKA_KEEP_DATA=1 WEFT_KAFKA_PORT=" + port + " '" +
                            WEFT_BROKERS_SCRIPT + "' " + action + " kafka >&2";
    if (std::system(cmd.c_str()) != 0) {
        throw std::runtime_error(cmd + " failed");
    }
}

// A publish fails 3 s into an outage (message.timeout.ms) instead of 30.
auto make_kafka_for_outage() -> std::unique_ptr<kafka_backend> {
    kafka_backend_options o;
    o.brokers = kafka_brokers();
    o.linger = 1ms;
    o.publish_timeout = 3s;
    return std::make_unique<kafka_backend>(std::move(o));
}

INSTANTIATE_TEST_SUITE_P(
    kafka,
    bus_conformance,
    ::testing::Values(test::backend_factory{
        .make = []() -> std::unique_ptr<backend> { return make_kafka(); },
        .pause = {},
        .resume = {},
        .runtime_for = [](unsigned workers) { return weft::io_runtime_options(workers); },
        .topic_prefix = "weft-test-",
        .stop_broker = [] { run_brokers_script("stop"); },
        .start_broker = [] { run_brokers_script("start"); },
        .make_for_outage = []() -> std::unique_ptr<backend> { return make_kafka_for_outage(); }}),
    [](const auto&) { return std::string("librdkafka"); });

TEST(kafka_backend, unreachable_broker_names_the_address) {
    kafka_backend_options o;
    o.brokers = "127.0.0.1:1";
    o.admin_timeout = 1s;
    try {
        kafka_backend b{o};
        FAIL() << "connected to nothing";
    } catch (const std::system_error& e) {
        EXPECT_EQ(e.code(), bus_errc::broker_unreachable);
        EXPECT_NE(std::string(e.what()).find("127.0.0.1:1"), std::string::npos) << e.what();
    }
}

TEST(kafka_backend, publisher_needs_a_reactor) {
    auto b = make_kafka();
    // A runtime that opts out of reactors (a futex driver): the publisher cannot wait for the
    // client library's descriptors there.
    weft::runtime rt{
        {.workers = 1, .make_driver = [](unsigned) { return weft::make_futex_driver(); }}};
    rt.block_on([&]() -> weft::task<void> {
        EXPECT_THROW({ publisher p{*b}; }, std::system_error);
        co_return;
    }());
}

TEST(kafka_backend, topics_are_made_at_start_and_the_ack_names_the_partition) {
    const std::string topic = "weft-start-" + message_id::generate().to_string().substr(24);
    kafka_backend_options o;
    o.brokers = kafka_brokers();
    o.topics = {topic};
    o.create_topics_on_use = false;
    o.linger = 1ms;
    kafka_backend b{o};
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{b};
        envelope e;
        e.topic = topic;
        e.type = "test.event";
        e.key = "k";
        e.payload = "x";
        auto a = (co_await pub.publish(std::move(e))).value();
        EXPECT_EQ(a.stream, topic);
        EXPECT_EQ(a.partition, 0);
        EXPECT_EQ(a.sequence, 0U);
        envelope e2;
        e2.topic = topic;
        e2.type = "test.event";
        e2.key = "k";
        e2.payload = "y";
        auto a2 = (co_await pub.publish(std::move(e2))).value();
        EXPECT_EQ(a2.sequence, 1U);
        (co_await pub.close()).value();
    }());
}

// The record's `weft-id` header is the envelope id's text (for consumers that do not decode
// the envelope): read back with a plain librdkafka consumer.
/// The records of `topic` from its beginning (partition 0), read by plain librdkafka as a
/// service in another language would, until `count` arrived or 10 s passed.
struct raw_record {
    std::string key;
    std::string value;
    std::vector<std::pair<std::string, std::string>> headers;
    auto header(std::string_view name) const -> std::string {
        for (const auto& [n, v] : headers) {
            if (n == name) {
                return v;
            }
        }
        return "<absent>";
    }
};

auto read_raw(const std::string& topic, std::size_t count) -> std::vector<raw_record> {
    char err[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", kafka_brokers().c_str(), err, sizeof(err));
    rd_kafka_conf_set(conf, "group.id", "weft-test-raw", err, sizeof(err));
    rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
    EXPECT_NE(rk, nullptr) << err;
    std::vector<raw_record> out;
    if (rk == nullptr) {
        return out;
    }
    rd_kafka_topic_partition_list_t* parts = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(parts, topic.c_str(), 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
    EXPECT_EQ(rd_kafka_assign(rk, parts), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_topic_partition_list_destroy(parts);
    for (int i = 0; i < 100 && out.size() < count; ++i) {
        rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, 100);
        if (m == nullptr) {
            continue;
        }
        if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
            raw_record r;
            r.key.assign(static_cast<const char*>(m->key), m->key_len);
            r.value.assign(static_cast<const char*>(m->payload), m->len);
            rd_kafka_headers_t* hs = nullptr;
            if (rd_kafka_message_headers(m, &hs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
                const char* name = nullptr;
                const void* v = nullptr;
                std::size_t n = 0;
                for (std::size_t k = 0;
                     rd_kafka_header_get_all(hs, k, &name, &v, &n) == RD_KAFKA_RESP_ERR_NO_ERROR;
                     ++k) {
                    r.headers.emplace_back(name, std::string(static_cast<const char*>(v), n));
                }
            }
            out.push_back(std::move(r));
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return out;
}

/// Produces one record with plain librdkafka (waits for it to be stored).
void produce_raw(const std::string& topic,
                 const std::string& key,
                 const std::string& value,
                 const std::vector<std::pair<std::string, std::string>>& headers) {
    char err[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", kafka_brokers().c_str(), err, sizeof(err));
    rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
    ASSERT_NE(rk, nullptr) << err;
    rd_kafka_headers_t* hs = rd_kafka_headers_new(headers.size());
    for (const auto& [n, v] : headers) {
        rd_kafka_header_add(hs, n.c_str(), -1, v.data(), static_cast<ssize_t>(v.size()));
    }
    rd_kafka_vu_t vus[4];
    vus[0].vtype = RD_KAFKA_VTYPE_TOPIC;
    vus[0].u.cstr = topic.c_str();
    vus[1].vtype = RD_KAFKA_VTYPE_KEY;
    vus[1].u.mem = {const_cast<char*>(key.data()), key.size()};
    vus[2].vtype = RD_KAFKA_VTYPE_VALUE;
    vus[2].u.mem = {const_cast<char*>(value.data()), value.size()};
    vus[3].vtype = RD_KAFKA_VTYPE_HEADERS;
    vus[3].u.headers = hs;
    rd_kafka_error_t* e = rd_kafka_produceva(rk, vus, 4);
    EXPECT_EQ(e, nullptr);
    if (e != nullptr) {
        rd_kafka_error_destroy(e);
        rd_kafka_headers_destroy(hs);
    }
    EXPECT_EQ(rd_kafka_flush(rk, 10'000), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_destroy(rk);
}

auto typed(const std::string& topic, std::string key, std::string payload) -> envelope {
    envelope e;
    e.topic = topic;
    e.key = std::move(key);
    e.type = "order.placed";
    e.payload = std::move(payload);
    return e;
}

// CloudEvents binary content mode per the Kafka binding: ce_ headers, content-type for
// datacontenttype, the key as the record key, the payload as the value byte for byte; a
// header name an attribute cannot have is refused, and nothing of it is stored.
TEST(kafka_backend, publish_is_cloudevents_binary_on_the_wire) {
    const std::string topic = "weft-test-ce-" + message_id::generate().to_string();
    kafka_backend_options o;
    o.brokers = kafka_brokers();
    o.linger = 1ms;
    o.wire.source = "/orders-service";
    kafka_backend b{o};
    weft::runtime rt{weft::io_runtime_options(2)};
    const message_id sent = message_id::generate();
    const std::string payload("{\"total\": 12}\0\xff", 15);
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{b};
        envelope bad = typed(topic, "k", "refused");
        bad.headers = {{"Trace-Id", "x"}};
        auto r = co_await pub.publish(std::move(bad));
        EXPECT_EQ(r.error(), bus_errc::not_expressible);
        envelope e = typed(topic, "order-42", payload);
        e.id = sent;
        e.headers = {{"tenant", "acme"}, {"datacontenttype", "application/json"}};
        e.time = std::chrono::system_clock::time_point{std::chrono::seconds{1'767'225'600}};
        (co_await pub.publish(std::move(e))).value();
        (co_await pub.close()).value();
    }());
    const auto records = read_raw(topic, 1);
    ASSERT_EQ(records.size(), 1U);
    const raw_record& r = records[0];
    EXPECT_EQ(r.value, payload);
    EXPECT_EQ(r.key, "order-42");
    EXPECT_EQ(r.header("ce_specversion"), "1.0");
    EXPECT_EQ(r.header("ce_id"), sent.to_string());
    EXPECT_EQ(r.header("ce_source"), "/orders-service");
    EXPECT_EQ(r.header("ce_type"), "order.placed");
    EXPECT_EQ(r.header("ce_time"), "2026-01-01T00:00:00.000000000Z");
    EXPECT_EQ(r.header("ce_subject"), "order-42");
    EXPECT_EQ(r.header("ce_tenant"), "acme");
    EXPECT_EQ(r.header("content-type"), "application/json");
    EXPECT_EQ(r.headers.size(), 8U);
}

// A record a foreign service produced is read; a malformed one goes, as it came, to the
// dead-letter topic with its defect in weft-malformed, and the member goes on.
TEST(kafka_backend, subscriber_reads_foreign_events_and_dead_letters_malformed_ones) {
    const std::string topic = "weft-test-foreign-" + message_id::generate().to_string();
    kafka_backend_options o;
    o.brokers = kafka_brokers();
    o.linger = 1ms;
    o.topics = {topic};  // and its dead-letter topic, before anything is produced to them
    auto b = std::make_unique<kafka_backend>(std::move(o));
    const message_id id = message_id::generate();
    std::vector<std::pair<std::string, std::string>> good = {{"ce_specversion", "1.0"},
                                                             {"ce_id", id.to_string()},
                                                             {"ce_source", "/inventory"},
                                                             {"ce_type", "stock.reserved"},
                                                             {"ce_time", "2026-01-02T03:04:05.5Z"},
                                                             {"content-type", "application/json"},
                                                             {"ce_tenant", "acme"}};
    auto bad = good;
    bad[1].second = "not-a-uuid";
    produce_raw(topic, "sku-1", "malformed", bad);
    produce_raw(topic, "sku-2", R"({"n":3})", good);
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        subscriber sub{*b};
        auto s = (co_await sub.subscribe(topic, "g")).value();
        auto d = (co_await s.next()).value();
        const envelope& e = d.message();
        EXPECT_EQ(e.id, id);
        EXPECT_EQ(e.key, "sku-2");  // the record key: no ce_subject
        EXPECT_EQ(e.type, "stock.reserved");
        EXPECT_EQ(e.payload, R"({"n":3})");
        EXPECT_EQ(e.time, std::chrono::system_clock::time_point{
                              std::chrono::milliseconds{1'767'323'045'500}});
        const header* ct = e.find_header("datacontenttype");
        EXPECT_EQ(ct != nullptr ? ct->value : "", "application/json");
        const header* tenant = e.find_header("tenant");
        EXPECT_EQ(tenant != nullptr ? tenant->value : "", "acme");
        EXPECT_TRUE(d.ack());
    }());
    const auto dead = read_raw(topic + ".dead-letter", 1);
    ASSERT_EQ(dead.size(), 1U);
    EXPECT_EQ(dead[0].value, "malformed");
    EXPECT_EQ(dead[0].key, "sku-1");
    EXPECT_EQ(dead[0].header("weft-malformed"),
              "CloudEvents binary: id 'not-a-uuid' is not a UUID");
    EXPECT_EQ(dead[0].header("weft-original-topic"), topic);
    EXPECT_EQ(dead[0].header("ce_id"), "not-a-uuid");
}

// Delivery reports wake weft once per batch: with a window of messages in flight, far fewer
// wake-ups than acks (the ratio depends on timing; the figure is printed, the bound is loose).
// Both delivery-report paths (kafka_ack_path): every outcome arrives once, fewer wake-ups
// than acks.
void acks_complete_in_batches(kafka_ack_path path) {
    kafka_backend_options o;
    o.brokers = kafka_brokers();
    o.linger = 1ms;
    o.ack_path = path;
    auto b = std::make_unique<kafka_backend>(std::move(o));
    const std::string t = "weft-test-batch-" + message_id::generate().to_string();
    const int n = weft::test::scaled(5000);
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{*b, {.max_pending = 512}};
        envelope first;  // the topic made before the measured run
        first.topic = t;
        first.type = "test.event";
        first.payload = "p";
        (co_await pub.publish(std::move(first))).value();
        const auto before = b->stats();
        int ok = 0;
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {
                for (int i = 0; i < n; ++i) {
                    auto r = co_await pub.results().recv();
                    if (r && r->outcome) {
                        ++ok;
                    }
                }
            });
            for (int i = 0; i < n; ++i) {
                envelope e;
                e.topic = t;
                e.type = "test.event";
                e.key = "k" + std::to_string(i % 16);
                e.payload = "p";
                (co_await pub.publish_async(std::move(e))).value();
            }
            co_return;
        });
        EXPECT_EQ(ok, n);
        const auto after = b->stats();
        const auto acks = after.acks - before.acks;
        const auto wakes = after.wakes - before.wakes;
        EXPECT_EQ(acks, static_cast<std::uint64_t>(n));
        EXPECT_LT(wakes, acks);
        std::printf("kafka acks=%llu wakes=%llu (%.1f wake-ups per 1000 acks)\n",
                    static_cast<unsigned long long>(acks), static_cast<unsigned long long>(wakes),
                    1000.0 * static_cast<double>(wakes) / static_cast<double>(acks));
        (co_await pub.close()).value();
    }());
}

TEST(kafka_backend, acks_complete_in_batches) {
    acks_complete_in_batches(kafka_ack_path::reactor_queue);
}

TEST(kafka_backend, acks_complete_in_batches_from_the_background_thread) {
    acks_complete_in_batches(kafka_ack_path::background_thread);
}

// The awaited publishes one pass of the drain task completes are resumed by it, on its
// worker, in order (completion_run), not woken onto the deques where the other worker steals
// them: on 2 workers nearly every awaited publish returns on the worker it was called on.
// Woken one by one, ~45% returned on the other worker (bench_bus kafka_awaited, 1,000 tasks),
// and this test counted 246-394 of every 1,000. Each task's messages (one key, one partition)
// are stored in the order it published them.
void awaited_publishes_return_on_their_worker(kafka_ack_path path) {
    kafka_backend_options o;
    o.brokers = kafka_brokers();
    o.linger = 1ms;
    o.ack_path = path;
    kafka_backend b{o};
    weft::bus::test::expect_awaited_publishes_stay_on_their_worker(
        b, "weft-test-awaited-" + message_id::generate().to_string(), "kafka");
}

TEST(kafka_backend, awaited_publishes_return_on_the_worker_that_drains_their_acks) {
    awaited_publishes_return_on_their_worker(kafka_ack_path::reactor_queue);
}

TEST(kafka_backend, awaited_publishes_return_on_the_worker_that_drains_their_acks_background) {
    awaited_publishes_return_on_their_worker(kafka_ack_path::background_thread);
}

// An awaited publish whose task is stopped while its ack is on its way returns
// operation_canceled at once; the drain task, when the ack comes, frees the slot (it resumes
// nobody). Then stops racing the acks: each publish is acked or canceled, none is lost, and
// the whole bound is free afterwards.
TEST(kafka_backend, stopped_awaited_publishes_are_canceled_and_their_late_acks_free_the_slots) {
    kafka_backend_options o;
    o.brokers = kafka_brokers();
    o.linger = 1ms;
    kafka_backend b{o};
    const std::string t = "weft-test-stop-" + message_id::generate().to_string();
    constexpr int tasks = 64;
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{b, {.max_pending = tasks}};
        auto make = [&] {
            envelope e;
            e.topic = t;
            e.type = "test.event";
            e.key = "k";
            e.payload = "p";
            return e;
        };
        (co_await pub.publish(make())).value();  // the topic made
        std::atomic<int> acked{0};
        std::atomic<int> canceled{0};
        std::atomic<int> failed{0};
        for (int round = 0; round < 20; ++round) {
            std::atomic<int> started{0};
            co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
                for (int k = 0; k < tasks; ++k) {
                    s.spawn([&]() -> weft::task<void> {
                        started.fetch_add(1);
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
                // Once every publish has started (round 0: most likely none acked yet), then
                // after a growing number of yields, while acks arrive.
                while (started.load() < tasks) {
                    co_await weft::yield();
                }
                for (int y = 0; y < round * 5; ++y) {
                    co_await weft::yield();
                }
                s.request_stop();
                co_return;
            });
            (co_await pub.flush()).value();
            EXPECT_EQ(pub.in_flight(), 0);
        }
        EXPECT_EQ(acked.load() + canceled.load(), 20 * tasks);
        EXPECT_EQ(failed.load(), 0);
        EXPECT_GT(canceled.load(), 0);
        for (int i = 0; i < tasks; ++i) {  // every unit and slot is back
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

// batch_messages' default (a quarter of max_pending): a batch leaves once it is full, so a
// window of max_pending messages is acknowledged without waiting out linger. The linger here
// (10 min) is far beyond the watchdog: were the batches held for it, the test would fail there.
TEST(kafka_backend, full_batches_leave_without_waiting_for_linger) {
    kafka_backend_options o;
    o.brokers = kafka_brokers();
    o.linger = 600s;
    o.publish_timeout = 900s;
    auto b = std::make_unique<kafka_backend>(std::move(o));
    const std::string t = "weft-test-full-batches-" + message_id::generate().to_string();
    constexpr int window = 64;  // 4 batches of 16
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{*b, {.max_pending = window}};
        int ok = 0;
        for (int round = 0; round < 2; ++round) {  // the first round also makes the topic
            for (int i = 0; i < window; ++i) {
                envelope e;
                e.topic = t;
                e.type = "test.event";
                e.key = "k" + std::to_string(i % 4);
                e.payload = "p";
                (co_await pub.publish_async(std::move(e))).value();
            }
            (co_await pub.flush()).value();
            for (int i = 0; i < window; ++i) {
                auto r = (co_await pub.results().recv()).value();
                ok += r.outcome ? 1 : 0;
            }
        }
        EXPECT_EQ(ok, 2 * window);
        (co_await pub.close()).value();
    }());
}

// The idempotent producer can fail fatally (librdkafka 2.0 has known cases after
// disconnects); rd_kafka_test_fatal_error raises the same error in a live producer. A linger
// of 2 s holds the batch in the producer's queue when it strikes, so librdkafka fails those
// messages: they are re-sent on a new producer, every publish reports success (those made
// after the error too), and a consumer reads every message.
void fatal_producer_error_recreates_it_and_resends(kafka_ack_path path) {
    kafka_backend_options o;
    o.brokers = kafka_brokers();
    o.linger = 2s;
    o.batch_messages = 1000;  // a batch leaves by its linger, not by being full
    o.ack_path = path;
    kafka_backend b{o};
    const std::string t = "weft-test-fatal-" + message_id::generate().to_string();
    constexpr int before = 20;
    constexpr int after = 10;
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{b, {.max_pending = 64}};
        envelope first;  // the topic and the producer's idempotence state made first
        first.topic = t;
        first.type = "test.event";
        first.key = "k";
        first.payload = "first";
        (co_await pub.publish(std::move(first))).value();
        std::set<message_id> sent;
        auto send = [&](int i) -> weft::task<void> {
            envelope e;
            e.topic = t;
            e.type = "test.event";
            e.key = "k" + std::to_string(i % 4);
            e.payload = std::to_string(i);
            sent.insert((co_await pub.publish_async(std::move(e))).value());
        };
        for (int i = 0; i < before; ++i) {
            co_await send(i);
        }
        b.raise_fatal_error_for_test("weft test");
        for (int i = before; i < before + after; ++i) {
            co_await send(i);
        }
        (co_await pub.flush()).value();
        std::set<message_id> stored;
        for (int i = 0; i < before + after; ++i) {
            auto r = (co_await pub.results().recv()).value();
            EXPECT_TRUE(sent.contains(r.id));
            EXPECT_TRUE(r.outcome) << r.outcome.error().message();
            if (r.outcome) {
                stored.insert(r.id);
            }
        }
        EXPECT_EQ(stored.size(), std::size_t{before + after});
        const auto stats = b.stats();
        EXPECT_GE(stats.producers_recreated, 1U);
        EXPECT_GE(stats.resent, 1U);
        std::printf("kafka fatal error: producers recreated=%llu resent=%llu\n",
                    static_cast<unsigned long long>(stats.producers_recreated),
                    static_cast<unsigned long long>(stats.resent));
        // Every message is in the topic (one stored before the error may be there twice).
        subscriber sub{b};
        auto s = (co_await sub.subscribe(t, "check")).value();
        std::set<message_id> got;
        while (got.size() < stored.size()) {
            auto d = (co_await s.next()).value();
            if (d.message().payload != "first") {
                if (stored.contains(d.message().id)) {
                    got.insert(d.message().id);
                }
            }
            EXPECT_TRUE(d.ack());
        }
        EXPECT_EQ(got, stored);
        (co_await pub.close()).value();
    }());
}

TEST(kafka_backend, fatal_producer_error_recreates_it_and_resends) {
    fatal_producer_error_recreates_it_and_resends(kafka_ack_path::reactor_queue);
}

TEST(kafka_backend, fatal_producer_error_on_the_background_thread_recreates_it_and_resends) {
    fatal_producer_error_recreates_it_and_resends(kafka_ack_path::background_thread);
}

// Order per key across a fatal error: what the broken producer had not had acknowledged is
// re-sent before any message published after the error. Publishes go on right after the
// error, on the same worker (one worker: the drain task cannot take the broken producer's
// reports in between), as an outbox relay keeping several events of a key unacknowledged
// does; each key's messages must be stored in the order they were published. With the
// re-send left to whenever the reports arrive, the later messages reach Kafka first.
void fatal_error_resends_before_any_later_publish(kafka_ack_path path) {
    kafka_backend_options o;
    o.brokers = kafka_brokers();
    o.linger = 500ms;
    o.batch_messages = 1000;  // a batch leaves by its linger: the first ones are still queued
    o.ack_path = path;
    kafka_backend b{o};
    const std::string t = "weft-test-fatal-order-" + message_id::generate().to_string();
    constexpr int before = 20;
    constexpr int after = 20;
    constexpr int keys = 4;
    weft::runtime rt{weft::io_runtime_options(1)};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{b, {.max_pending = 128}};
        envelope first;
        first.topic = t;
        first.type = "test.event";
        first.key = "k";
        first.payload = "first";
        (co_await pub.publish(std::move(first))).value();
        auto send = [&](int i) -> weft::task<void> {
            envelope e;
            e.topic = t;
            e.type = "test.event";
            e.key = "k" + std::to_string(i % keys);
            e.payload = std::to_string(i);
            (co_await pub.publish_async(std::move(e))).value();
        };
        for (int i = 0; i < before; ++i) {
            co_await send(i);
        }
        b.raise_fatal_error_for_test("weft test");
        for (int i = before; i < before + after; ++i) {
            co_await send(i);
        }
        (co_await pub.flush()).value();
        int ok = 0;
        for (int i = 0; i < before + after; ++i) {
            auto r = (co_await pub.results().recv()).value();
            EXPECT_TRUE(r.outcome) << r.outcome.error().message();
            ok += r.outcome ? 1 : 0;
        }
        EXPECT_EQ(ok, before + after);
        EXPECT_GE(b.stats().resent, 1U);
        // Each key's messages as stored (a message stored twice counts where it came first).
        subscriber sub{b};
        auto s = (co_await sub.subscribe(t, "check")).value();
        std::vector<std::vector<int>> order(keys);
        std::set<int> seen;
        while (seen.size() < std::size_t{before + after}) {
            auto d = (co_await s.next()).value();
            if (d.message().payload != "first") {
                const int i = std::stoi(d.message().payload);
                if (seen.insert(i).second) {
                    order[static_cast<std::size_t>(i % keys)].push_back(i);
                }
            }
            EXPECT_TRUE(d.ack());
        }
        for (int k = 0; k < keys; ++k) {
            const auto& got = order[static_cast<std::size_t>(k)];
            EXPECT_TRUE(std::is_sorted(got.begin(), got.end()))
                << "key k" << k << " stored out of order: " << ::testing::PrintToString(got);
        }
        (co_await pub.close()).value();
    }());
}

TEST(kafka_backend, fatal_error_resends_before_any_later_publish) {
    fatal_error_resends_before_any_later_publish(kafka_ack_path::reactor_queue);
}

TEST(kafka_backend, fatal_error_on_the_background_thread_resends_before_any_later_publish) {
    fatal_error_resends_before_any_later_publish(kafka_ack_path::background_thread);
}

// An envelope handed over already encoded (try_publish_encoded_async, as the outbox relay
// does) is produced as it is: stored once, as encoded, with its id, in publish order for its
// key.
TEST(kafka_backend, encoded_publishes_are_stored_as_encoded) {
    kafka_backend_options o;
    o.brokers = kafka_brokers();
    o.linger = 1ms;
    kafka_backend b{o};
    const std::string t = "weft-test-encoded-" + message_id::generate().to_string();
    constexpr int n = 50;
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{b, {.max_pending = 16}};
        std::vector<message_id> ids;
        for (int i = 0; i < n; ++i) {
            envelope e;
            e.id = message_id::generate();
            e.topic = t;
            e.type = "test.event";
            e.key = "k";
            e.payload = std::to_string(i);
            std::string bytes;
            encode(e, bytes);
            const encoded_envelope enc{e.id, e.topic, e.key, bytes};
            auto r = pub.try_publish_encoded_async(enc);
            while (!r && r.error() == std::errc::operation_would_block) {
                auto done = (co_await pub.results().recv()).value();
                EXPECT_TRUE(done.outcome);
                r = pub.try_publish_encoded_async(enc);
            }
            EXPECT_TRUE(r) << r.error().message();
            ids.push_back(e.id);
        }
        (co_await pub.flush()).value();
        for (auto done = pub.results().try_recv(); done; done = pub.results().try_recv()) {
            EXPECT_TRUE(done->outcome);
        }
        subscriber sub{b};
        auto s = (co_await sub.subscribe(t, "check")).value();
        for (int i = 0; i < n; ++i) {
            auto d = (co_await s.next()).value();
            EXPECT_EQ(d.message().payload, std::to_string(i));
            EXPECT_EQ(d.message().id, ids[static_cast<std::size_t>(i)]);
            EXPECT_TRUE(d.ack());
        }
        (co_await pub.close()).value();
    }());
}

// Publishes `n` envelopes to `topic`, payload "0", "1"..., every one acknowledged.
auto publish_numbered(kafka_backend& b, const std::string& topic, int n) -> weft::task<void> {
    publisher pub{b, {.max_pending = 4096}};
    int ok = 0;
    co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
        s.spawn([&]() -> weft::task<void> {
            for (int i = 0; i < n; ++i) {
                auto r = co_await pub.results().recv();
                ok += r && r->outcome ? 1 : 0;
            }
        });
        for (int i = 0; i < n; ++i) {
            envelope e;
            e.topic = topic;
            e.type = "test.event";
            e.key = "k" + std::to_string(i % 64);
            e.payload = std::to_string(i);
            (co_await pub.publish_async(std::move(e))).value();
        }
        co_return;
    });
    EXPECT_EQ(ok, n);
    (co_await pub.close()).value();
}

// The offset the group `group` has committed on partition 0 of `topic`, asked (with a plain
// client, which joins no group) every 50 ms until it reaches `at_least`, at most `polls`
// times; negative when there is none.
auto committed_offset(const std::string& topic,
                      const std::string& group,
                      std::int64_t at_least,
                      int polls) -> std::int64_t {
    char err[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", kafka_brokers().c_str(), err, sizeof(err));
    rd_kafka_conf_set(conf, "group.id", group.c_str(), err, sizeof(err));
    rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
    if (rk == nullptr) {
        ADD_FAILURE() << err;
        return -1;
    }
    std::int64_t offset = -1;
    for (int i = 0; i < polls && offset < at_least; ++i) {
        if (i > 0) {
            std::this_thread::sleep_for(50ms);
        }
        rd_kafka_topic_partition_list_t* parts = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(parts, topic.c_str(), 0);
        const auto e = rd_kafka_committed(rk, parts, 10'000);
        EXPECT_EQ(e, RD_KAFKA_RESP_ERR_NO_ERROR) << rd_kafka_err2str(e);
        offset = parts->elems[0].offset;
        rd_kafka_topic_partition_list_destroy(parts);
    }
    rd_kafka_destroy(rk);
    return offset;
}

// Waits (polling the backend's counter) until `n` consumers of `b` have closed their clients.
auto closed_consumers(kafka_backend& b, std::uint64_t n) -> weft::task<void> {
    while (b.stats().consumers_closed < n) {
        (co_await weft::sleep_for(10ms)).value();
    }
}

// One partition, a backlog of n messages, the first of which is nacked at every delivery
// (max_deliveries 0: no limit) while every other is acked. Due retries come before fresh
// messages: the nacked one is delivered again after at most a few others, not after the
// backlog. The member's bookkeeping stays bounded by what is unsettled, whatever the backlog
// (no entry kept for an acked message), and the group's committed offset passes the acked
// messages behind the nacked one. Closing the member leaves no entry and no delivery count in
// the backend, and the next member starts with the unsettled message.
TEST(kafka_backend, a_message_nacked_forever_neither_waits_for_the_backlog_nor_holds_the_commit) {
    auto b = make_kafka();
    const std::string t = "weft-test-backlog-" + message_id::generate().to_string();
    const int n = weft::test::scaled(100'000);
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        co_await publish_numbered(*b, t, n);
        subscriber sub{*b, {.ack_wait = 60s}};
        auto s = (co_await sub.subscribe(t, "g")).value();
        int acked = 0;
        int redeliveries = 0;
        int since = 0;  // deliveries since the nacked message's last one
        int most_between = 0;
        std::uint64_t most_entries = 0;
        while (acked < n - 1) {
            auto d = (co_await s.next()).value();
            if (d.message().payload == "0") {
                most_between = std::max(most_between, since);
                since = 0;
                ++redeliveries;
                EXPECT_TRUE(d.nack());
            } else {
                ++since;
                ++acked;
                EXPECT_TRUE(d.ack());
            }
            if (acked % 500 == 0) {
                most_entries = std::max(most_entries, b->stats().consumer_entries);
            }
        }
        most_between = std::max(most_between, since);  // and none since its last delivery
        std::printf(
            "backlog %d: nacked message delivered %d times, at most %d deliveries apart; "
            "at most %llu entries\n",
            n, redeliveries, most_between, static_cast<unsigned long long>(most_entries));
        EXPECT_LE(most_between, 16);
        EXPECT_LE(most_entries, 64U);
        std::int64_t committed = -1;
        (co_await weft::spawn_blocking([&] {
            committed = committed_offset(t, "g", n / 2, 600);
        })).value();
        std::printf("committed offset %lld of %d\n", static_cast<long long>(committed), n);
        EXPECT_GE(committed, n / 2);
        s.close();
        co_await closed_consumers(*b, 1);
        const auto after = b->stats();
        EXPECT_EQ(after.consumer_entries, 0U);
        EXPECT_EQ(after.delivery_counts, 0U);
        auto next = (co_await sub.subscribe(t, "g")).value();
        auto first = (co_await next.next()).value();
        EXPECT_EQ(first.message().payload, "0");
        EXPECT_GT(first.attempt(), 1U);  // counted on from the copy
        EXPECT_TRUE(first.ack());
        // Another group gets each message once: the copies are not its.
        auto other = (co_await sub.subscribe(t, "h")).value();
        std::set<std::string> payloads;
        for (int i = 0; i < n; ++i) {
            auto d = (co_await other.next()).value();
            payloads.insert(d.message().payload);
            EXPECT_TRUE(d.ack());
        }
        EXPECT_EQ(payloads.size(), std::size_t(n));
    }());
}

// Two partitions: a member holding unsettled deliveries on both loses one partition to a
// member of another backend (as another process would take it). The deliveries of the revoked
// partition are void, and the backend keeps neither their entries nor their delivery counts
// (no member of it can deliver them again); when the member closes, nothing is left.
TEST(kafka_backend, a_revoked_partition_leaves_no_entries_and_no_delivery_counts) {
    kafka_backend_options o;
    o.brokers = kafka_brokers();
    o.linger = 1ms;
    o.partitions = 2;
    kafka_backend a{o};
    kafka_backend other{o};
    const std::string t = "weft-test-revoke-" + message_id::generate().to_string();
    constexpr int n = 32;
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        co_await publish_numbered(a, t, n);
        subscriber sub_a{a, {.ack_wait = 60s}};
        auto m0 = (co_await sub_a.subscribe(t, "g")).value();
        std::vector<delivery> held;
        for (int i = 0; i < n; ++i) {
            held.push_back((co_await m0.next()).value());
        }
        EXPECT_EQ(a.stats().consumer_entries, std::uint64_t{n});
        subscriber sub_b{other, {.ack_wait = 60s}};
        auto m1 = (co_await sub_b.subscribe(t, "g")).value();
        auto taken = (co_await m1.next()).value();  // the partition is revoked from m0 by now
        std::uint64_t kept = 0;
        for (auto& d : held) {
            kept += d.in_progress() ? 1 : 0;
        }
        EXPECT_LT(kept, std::uint64_t{n});
        const auto s = a.stats();
        EXPECT_EQ(s.consumer_entries, kept);
        EXPECT_LE(s.delivery_counts, kept);
        std::printf("revoked %llu of %d held deliveries; entries %llu, delivery counts %llu\n",
                    static_cast<unsigned long long>(n - kept), n,
                    static_cast<unsigned long long>(s.consumer_entries),
                    static_cast<unsigned long long>(s.delivery_counts));
        EXPECT_TRUE(taken.ack());
        m1.close();
        m0.close();
        co_await closed_consumers(a, 1);
        EXPECT_EQ(a.stats().consumer_entries, 0U);
        EXPECT_EQ(a.stats().delivery_counts, 0U);
        co_await closed_consumers(other, 1);
    }());
}

// The last reference to a member that was never closed is a delivery, dropped on the one
// worker of a runtime: the member's client is closed (rd_kafka_consumer_close, which waits on
// the group) on the backend's closer thread, never on that worker. The closer is held while
// the delivery is dropped, so the close cannot be over when another task on the worker runs.
TEST(kafka_backend, dropping_the_last_delivery_leaves_the_close_to_the_closer_thread) {
    auto b = make_kafka();
    const std::string t = "weft-test-last-delivery-" + message_id::generate().to_string();
    weft::runtime rt{weft::io_runtime_options(1)};
    rt.block_on([&]() -> weft::task<void> {
        co_await publish_numbered(*b, t, 1);
        subscriber sub{*b};
        std::optional<delivery> d;
        {
            auto s = (co_await sub.subscribe(t, "g")).value();
            d.emplace((co_await s.next()).value());
        }  // the subscription is gone, unclosed: `d` holds the member
        std::promise<void> release;
        b->run_on_closer_for_test([held = release.get_future().share()] { held.wait(); });
        d.reset();
        std::uint64_t closed_meanwhile = 0;
        auto other = weft::spawn([&]() -> weft::task<void> {
            closed_meanwhile = b->stats().consumers_closed;
            release.set_value();
            co_return;
        });
        co_await std::move(other);
        EXPECT_EQ(closed_meanwhile, 0U);
        co_await closed_consumers(*b, 1);
    }());
}

// Members that close while their group is still forming: four subscribers of one group on a
// 4-partition topic, subscribed together and closed 0 to 40 ms later, five rounds, so that some
// close after their JoinGroup was answered and before their first assignment (librdkafka 2.0.2
// aborts there on the cooperative-sticky assignor's missing state, in rd_kafka_destroy, unless
// the member waits for that assignment first). Every member closes and nothing aborts.
TEST(kafka_backend, members_closed_while_their_group_forms_close_cleanly) {
    kafka_backend_options o;
    o.brokers = kafka_brokers();
    o.linger = 1ms;
    o.partitions = 4;
    auto b = std::make_unique<kafka_backend>(std::move(o));
    const std::string t = "weft-test-forming-" + message_id::generate().to_string();
    constexpr int rounds = 5;
    constexpr int members = 4;
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        co_await publish_numbered(*b, t, 4);  // makes the topic
        for (int round = 0; round < rounds; ++round) {
            std::vector<std::unique_ptr<subscriber>> subs;
            std::vector<subscription> held;
            for (int m = 0; m < members; ++m) {
                subs.push_back(std::make_unique<subscriber>(*b));
                held.push_back((co_await subs.back()->subscribe(t, "forming")).value());
            }
            (co_await weft::sleep_for(std::chrono::milliseconds(10 * round))).value();
            for (auto& sub : subs) {
                sub->close();
            }
            held.clear();
            subs.clear();
            co_await closed_consumers(*b, static_cast<std::uint64_t>((round + 1) * members));
        }
    }());
    EXPECT_EQ(b->stats().consumers_closed, static_cast<std::uint64_t>(rounds * members));
}

}  // namespace
