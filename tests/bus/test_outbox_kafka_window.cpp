// The outbox relay with a window of several unacknowledged events per key, against a real
// Kafka broker (the fixture's: scripts/brokers.sh start kafka on a private port,
// WEFT_KAFKA_BROKERS). A broker that is not there fails these tests, never skips them.

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "weft/bus/kafka_backend.hpp"
#include "weft/bus/publisher.hpp"
#include "weft/bus/sqlite_outbox.hpp"
#include "weft/bus/subscriber.hpp"
#include "weft/core/join_handle.hpp"
#include "weft/io/reactor.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"

namespace {

using namespace weft::bus;
using namespace std::chrono_literals;

auto kafka_brokers() -> std::string {
    const char* b = std::getenv("WEFT_KAFKA_BROKERS");
    return b != nullptr ? b : "127.0.0.1:19092";
}

auto unique(const char* what) -> std::string {
    return std::string("weft-test-window-") + what + "-" + std::to_string(::getpid());
}

/// Stages `per_key` events for each of `keys` keys, interleaved, 50 to a transaction; the
/// payload is the event's number within its key.
void stage_many(const std::string& path,
                sqlite_outbox& outbox,
                const std::string& topic,
                int keys,
                int per_key) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5'000);
    int in_txn = 0;
    auto txn = std::make_unique<sqlite_txn>(db);
    for (int n = 0; n < per_key; ++n) {
        for (int k = 0; k < keys; ++k) {
            envelope e;
            e.topic = topic;
            e.key = "k" + std::to_string(k);
            e.type = "order.changed";
            e.payload = std::to_string(n);
            ASSERT_TRUE(outbox.stage(*txn, std::move(e)));
            if (++in_txn == 50) {
                ASSERT_TRUE(txn->commit());
                txn = std::make_unique<sqlite_txn>(db);
                in_txn = 0;
            }
        }
    }
    ASSERT_TRUE(txn->commit());
    txn.reset();
    sqlite3_close_v2(db);
}

/// What one relay run over keys x per_key staged events saw: the relay's metrics, what it
/// left in the table, and the topic as the consumer read it (key -> payloads in order).
struct window_run {
    outbox_metrics metrics;
    std::uint64_t left = 0;
    std::map<std::string, std::vector<int>> got;
};

auto run_window(const char* name, int keys, int per_key, std::uint32_t batch) -> window_run {
    const auto dir = std::filesystem::temp_directory_path() / unique(name);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    const std::string path = dir / "app.db";
    const std::string topic = unique(name);

    kafka_backend_options ko;
    ko.brokers = kafka_brokers();
    ko.partitions = 4;
    kafka_backend broker{std::move(ko)};
    sqlite_outbox outbox{
        path, {.relay = {.batch_size = batch, .max_unacked_per_key = 8, .broker = &broker}}};
    stage_many(path, outbox, topic, keys, per_key);

    weft::runtime rt{weft::io_runtime_options(2)};
    window_run run;
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{broker, {.max_pending = 1024}};
        auto relay = weft::spawn(outbox.run_relay(pub));
        for (int i = 0;
             i < 6'000 && outbox.metrics().published < static_cast<std::uint64_t>(keys * per_key);
             ++i) {
            (void)co_await weft::sleep_for(5ms);
        }
        outbox.stop_relay();
        (co_await std::move(relay)).value();
        (co_await pub.close()).value();

        subscriber sub{broker};
        auto s = (co_await sub.subscribe(topic, "check")).value();
        for (int i = 0; i < keys * per_key; ++i) {
            auto d = co_await s.next();
            if (!d) {
                ADD_FAILURE() << d.error().message();
                break;
            }
            run.got[d->message().key].push_back(std::stoi(d->message().payload));
            (void)d->ack();
        }
        s.close();
    }());
    run.metrics = outbox.metrics();
    run.left = outbox.pending_rows().value();
    std::filesystem::remove_all(dir);
    return run;
}

void expect_each_once_in_order(const window_run& run, int keys, int per_key) {
    ASSERT_EQ(run.got.size(), static_cast<std::size_t>(keys));
    for (const auto& [key, seq] : run.got) {
        ASSERT_EQ(seq.size(), static_cast<std::size_t>(per_key)) << key;
        for (int i = 0; i < per_key; ++i) {
            ASSERT_EQ(seq[static_cast<std::size_t>(i)], i) << key;
        }
    }
}

// 20 keys x 40 events over 4 partitions, window 8: the relay keeps up to 8 of a key
// unacknowledged (the peak it reports is above 1 and at most 8), and the consumer reads every
// key's events exactly once, in staging order.
TEST(kafka_outbox_window, several_per_key_in_flight_and_order_per_key_kept) {
    constexpr int keys = 20;
    constexpr int per_key = 40;
    const auto run = run_window("orders", keys, per_key, 512);
    const auto& m = run.metrics;
    EXPECT_EQ(m.published, static_cast<std::uint64_t>(keys * per_key));
    EXPECT_EQ(m.unacked_per_key_limit, 8U);
    EXPECT_GT(m.peak_unacked_per_key, 1U);
    EXPECT_LE(m.peak_unacked_per_key, 8U);
    EXPECT_EQ(m.window_gaps, 0U);
    RecordProperty("peak_unacked_per_key", std::to_string(m.peak_unacked_per_key));
    EXPECT_EQ(run.left, 0U);
    expect_each_once_in_order(run, keys, per_key);
}

// Batches of 40 over 20 keys hold 2 events of a key each. A relay that finished a batch before
// it claimed the next could never have more than those 2 of a key unacknowledged; the relay
// claims the next batches while a key's earlier events are still unacknowledged, so its window
// goes above one batch's share (up to 8), and order and exactly-once reading still hold.
TEST(kafka_outbox_window, a_keys_window_spans_batches) {
    constexpr int keys = 20;
    constexpr int per_key = 40;
    const auto run = run_window("spans", keys, per_key, 40);
    const auto& m = run.metrics;
    EXPECT_EQ(m.published, static_cast<std::uint64_t>(keys * per_key));
    EXPECT_GT(m.peak_unacked_per_key, 2U);
    EXPECT_LE(m.peak_unacked_per_key, 8U);
    EXPECT_EQ(m.window_gaps, 0U);
    RecordProperty("peak_unacked_per_key", std::to_string(m.peak_unacked_per_key));
    EXPECT_EQ(run.left, 0U);
    expect_each_once_in_order(run, keys, per_key);
}

// Outbox rows keep weft's binary encoding (what every earlier version wrote); the relay sends
// them in the backend's wire mode: as CloudEvents binary records (ce_ headers, the payload as
// the value) by default, read back by a plain librdkafka consumer and by a weft subscriber.
TEST(kafka_outbox_window, weft_encoded_rows_are_relayed_as_cloudevents) {
    const auto dir = std::filesystem::temp_directory_path() / unique("ce");
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    const std::string path = dir / "app.db";
    const std::string topic = unique("ce") + "-" + message_id::generate().to_string();
    kafka_backend_options ko;
    ko.brokers = kafka_brokers();
    ko.topics = {topic};
    kafka_backend broker{std::move(ko)};
    sqlite_outbox outbox{path, {.relay = {.broker = &broker}}};
    std::vector<message_id> ids;
    {
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
        {
            sqlite_txn txn{db};
            for (int i = 0; i < 3; ++i) {
                envelope e;
                e.topic = topic;
                e.key = "order-7";
                e.type = "order.changed";
                e.headers = {{"tenant", "acme"}};
                e.payload = std::string("{\"n\":") + std::to_string(i) + "}";
                ids.push_back(outbox.stage(txn, std::move(e)).value());
            }
            ASSERT_TRUE(txn.commit());
        }
        outbox.release(db);
        sqlite3_close_v2(db);
    }
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{broker};
        auto relay = weft::spawn(outbox.run_relay(pub));
        for (int i = 0; i < 2'000 && outbox.metrics().published < 3; ++i) {
            (void)co_await weft::sleep_for(5ms);
        }
        outbox.stop_relay();
        (co_await std::move(relay)).value();
        (co_await pub.close()).value();
        subscriber sub{broker};
        auto s = (co_await sub.subscribe(topic, "check")).value();
        for (int i = 0; i < 3; ++i) {
            auto d = (co_await s.next()).value();
            EXPECT_EQ(d.message().id, ids[static_cast<std::size_t>(i)]);
            EXPECT_EQ(d.message().payload, "{\"n\":" + std::to_string(i) + "}");
            const header* tenant = d.message().find_header("tenant");
            EXPECT_EQ(tenant != nullptr ? tenant->value : "", "acme");
            (void)d.ack();
        }
        s.close();
    }());
    // The records themselves, as a client that is not weft reads them.
    char err[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", kafka_brokers().c_str(), err, sizeof(err));
    rd_kafka_conf_set(conf, "group.id", "weft-test-raw", err, sizeof(err));
    rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
    ASSERT_NE(rk, nullptr) << err;
    rd_kafka_topic_partition_list_t* parts = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(parts, topic.c_str(), 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
    ASSERT_EQ(rd_kafka_assign(rk, parts), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_topic_partition_list_destroy(parts);
    std::size_t seen = 0;
    for (int i = 0; i < 100 && seen < 3; ++i) {
        rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, 100);
        if (m == nullptr) {
            continue;
        }
        if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
            rd_kafka_headers_t* hs = nullptr;
            const void* v = nullptr;
            std::size_t n = 0;
            ASSERT_EQ(rd_kafka_message_headers(m, &hs), RD_KAFKA_RESP_ERR_NO_ERROR);
            ASSERT_EQ(rd_kafka_header_get_last(hs, "ce_id", &v, &n), RD_KAFKA_RESP_ERR_NO_ERROR);
            EXPECT_EQ(std::string(static_cast<const char*>(v), n), ids[seen].to_string());
            ASSERT_EQ(rd_kafka_header_get_last(hs, "ce_tenant", &v, &n),
                      RD_KAFKA_RESP_ERR_NO_ERROR);
            EXPECT_EQ(std::string(static_cast<const char*>(v), n), "acme");
            EXPECT_EQ(std::string(static_cast<const char*>(m->payload), m->len),
                      "{\"n\":" + std::to_string(seen) + "}");
            EXPECT_EQ(std::string(static_cast<const char*>(m->key), m->key_len), "order-7");
            ++seen;
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    EXPECT_EQ(seen, 3U);
    std::filesystem::remove_all(dir);
}

}  // namespace
