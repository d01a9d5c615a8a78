// The outbox relay with a window of several unacknowledged events per key, against a real
// Kafka broker (the fixture's: scripts/brokers.sh start kafka on a private port,
// WEFT_KAFKA_BROKERS). A broker that is not there fails these tests, never skips them.

#include <gtest/gtest.h>
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

}  // namespace
