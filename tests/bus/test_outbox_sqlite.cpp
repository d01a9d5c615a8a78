#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_outbox_prefix_broker.hpp"
#include "weft/bus/errc.hpp"
#include "weft/bus/memory_broker.hpp"
#include "weft/bus/publisher.hpp"
#include "weft/bus/sqlite_inbox.hpp"
#include "weft/bus/sqlite_outbox.hpp"
#include "weft/bus/subscriber.hpp"
#include "weft/core/join_handle.hpp"
#include "weft/core/scope.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/runtime_clock.hpp"
#include "weft/sched/spawn_blocking.hpp"
#include "weft/sched/timer.hpp"
#include "weft/testing/test_clock.hpp"

namespace {

using namespace weft::bus;
using namespace std::chrono_literals;
using weft::bus::testing::prefix_broker;

/// A fresh directory per test, removed afterwards.
class temp_dir {
public:
    temp_dir() {
        path_ = std::filesystem::temp_directory_path() /
                ("weft-outbox-" + std::to_string(::getpid()) + "-" +
                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::remove_all(path_);
        std::filesystem::create_directories(path_);
    }
    temp_dir(const temp_dir&) = delete;
    auto operator=(const temp_dir&) -> temp_dir& = delete;
    ~temp_dir() { std::filesystem::remove_all(path_); }
    [[nodiscard]] auto file(const char* name) const -> std::string { return path_ / name; }

private:
    std::filesystem::path path_;
};

/// The application's own connection, with a business table.
class app_db {
public:
    explicit app_db(const std::string& path) {
        EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK);
        sqlite3_busy_timeout(db_, 5'000);
        exec("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, what TEXT)");
    }
    app_db(const app_db&) = delete;
    auto operator=(const app_db&) -> app_db& = delete;
    ~app_db() { sqlite3_close_v2(db_); }
    [[nodiscard]] auto get() const -> sqlite3* { return db_; }
    void exec(const std::string& sql) const {
        char* err = nullptr;
        EXPECT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK)
            << (err != nullptr ? err : "");
        sqlite3_free(err);
    }
    [[nodiscard]] auto count(const std::string& table) const -> int {
        sqlite3_stmt* st = nullptr;
        const std::string sql = "SELECT count(*) FROM " + table;
        EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr), SQLITE_OK);
        EXPECT_EQ(sqlite3_step(st), SQLITE_ROW);
        const int n = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
        return n;
    }

private:
    sqlite3* db_ = nullptr;
};

auto event_for(const std::string& key, int n) -> envelope {
    envelope e;
    e.topic = "orders";
    e.key = key;
    e.type = "order.changed";
    e.payload = std::to_string(n);
    return e;
}

/// Stages `per_key` events for each of `keys` keys, interleaved, `per_txn` to a transaction,
/// each with a business row. Returns the ids in staging order.
auto stage_many(app_db& app, sqlite_outbox& outbox, int keys, int per_key, int per_txn = 10)
    -> std::vector<message_id> {
    std::vector<message_id> ids;
    int in_txn = 0;
    auto txn = std::make_unique<sqlite_txn>(app.get());
    for (int n = 0; n < per_key; ++n) {
        for (int k = 0; k < keys; ++k) {
            app.exec("INSERT INTO orders (what) VALUES ('k" + std::to_string(k) + "')");
            ids.push_back(outbox.stage(*txn, event_for("k" + std::to_string(k), n)).value());
            if (++in_txn == per_txn) {
                txn->commit().value();
                txn = std::make_unique<sqlite_txn>(app.get());
                in_txn = 0;
            }
        }
    }
    txn->commit().value();
    return ids;
}

/// Reads everything the broker stored on `topic`, in its order: key -> payloads.
auto stored_by_key(memory_broker& b, const std::string& topic)
    -> weft::task<std::map<std::string, std::vector<int>>> {
    std::map<std::string, std::vector<int>> got;
    subscriber sub{b};
    auto s = (co_await sub.subscribe(topic, "check")).value();
    const auto n = b.stored(topic);
    for (std::uint64_t i = 0; i < n; ++i) {
        auto d = (co_await s.next()).value();
        got[d.message().key].push_back(std::stoi(d.message().payload));
        (void)d.ack();
    }
    co_return got;
}

auto wait_published(sqlite_outbox& outbox, std::uint64_t n) -> weft::task<void> {
    while (outbox.metrics().published < n) {
        (void)co_await weft::sleep_for(2ms);
    }
}

void expect_in_order(const std::map<std::string, std::vector<int>>& got, int keys, int per_key) {
    ASSERT_EQ(got.size(), static_cast<std::size_t>(keys));
    for (const auto& [key, seq] : got) {
        ASSERT_EQ(seq.size(), static_cast<std::size_t>(per_key)) << key;
        for (int i = 0; i < per_key; ++i) {
            ASSERT_EQ(seq[static_cast<std::size_t>(i)], i) << key;
        }
    }
}

TEST(sqlite_outbox, order_per_key_holds_under_a_failing_broker) {
    temp_dir dir;
    const auto path = dir.file("app.db");
    sqlite_outbox outbox{path,
                         {.relay = {.batch_size = 64, .min_backoff = 1ms, .max_backoff = 8ms}}};
    app_db app{path};
    constexpr int keys = 10;
    constexpr int per_key = 50;
    stage_many(app, outbox, keys, per_key);
    EXPECT_EQ(outbox.metrics().staged, static_cast<std::uint64_t>(keys * per_key));
    EXPECT_EQ(outbox.pending_rows().value(), static_cast<std::uint64_t>(keys * per_key));

    memory_broker broker;
    std::atomic<int> calls{0};
    broker.set_publish_fault([&](const envelope&) -> std::error_code {
        return calls.fetch_add(1) % 3 == 1 ? make_error_code(bus_errc::broker_unreachable)
                                           : std::error_code{};
    });
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{broker, {.max_pending = 256}};
        auto relay = weft::spawn(outbox.run_relay(pub));
        co_await wait_published(outbox, keys * per_key);
        outbox.stop_relay();
        (co_await std::move(relay)).value();
        (co_await pub.close()).value();
        const auto got = co_await stored_by_key(broker, "orders");
        expect_in_order(got, keys, per_key);
    }());
    EXPECT_EQ(broker.stored("orders"), static_cast<std::uint64_t>(keys * per_key));
    EXPECT_GT(outbox.metrics().retries, 0U);
    EXPECT_EQ(outbox.pending_rows().value(), 0U);
    EXPECT_EQ(app.count("orders"), keys * per_key);
}

// A key whose publish keeps failing must not hold up the batches after it (its own later
// events wait, in order). The broker refuses key "stuck" until the 20 other events staged after
// it are stored, or for its first 2,000 attempts at most: a relay that finishes a whole batch
// before reading the next retries "stuck" 2,000 times first, and the others come after it.
TEST(sqlite_outbox, a_retrying_key_does_not_hold_up_the_next_batch) {
    temp_dir dir;
    const auto path = dir.file("app.db");
    sqlite_outbox outbox{path,
                         {.relay = {.batch_size = 8, .min_backoff = 1ms, .max_backoff = 4ms}}};
    app_db app{path};
    constexpr int others = 20;
    memory_broker broker;
    std::atomic<int> others_stored{0};
    std::atomic<int> stuck_attempts{0};
    std::atomic<int> others_when_stuck_went_through{-1};
    broker.set_publish_fault([&](const envelope& e) -> std::error_code {
        if (e.key != "stuck") {
            others_stored.fetch_add(1);
            return {};
        }
        if (others_stored.load() < others && stuck_attempts.fetch_add(1) < 2'000) {
            return make_error_code(bus_errc::broker_unreachable);
        }
        int unset = -1;
        others_when_stuck_went_through.compare_exchange_strong(unset, others_stored.load());
        return {};
    });
    {
        sqlite_txn txn{app.get()};
        (void)outbox.stage(txn, event_for("stuck", 0)).value();
        txn.commit().value();
    }
    std::map<std::string, std::vector<int>> got;
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{broker, {.max_pending = 64}};
        auto relay = weft::spawn(outbox.run_relay(pub));
        while (outbox.metrics().retries == 0) {  // "stuck" was read, tried and refused
            (void)co_await weft::sleep_for(1ms);
        }
        (co_await weft::spawn_blocking([&] {
            sqlite_txn txn{app.get()};
            for (int k = 0; k < others; ++k) {
                (void)outbox.stage(txn, event_for("k" + std::to_string(k), 0)).value();
            }
            (void)outbox.stage(txn, event_for("stuck", 1)).value();
            txn.commit().value();
        })).value();
        co_await wait_published(outbox, others + 2);
        outbox.stop_relay();
        (co_await std::move(relay)).value();
        (co_await pub.close()).value();
        got = co_await stored_by_key(broker, "orders");
    }());
    EXPECT_EQ(got.size(), static_cast<std::size_t>(others + 1));
    EXPECT_EQ(got["stuck"], (std::vector<int>{0, 1}));
    EXPECT_EQ(others_when_stuck_went_through.load(), others)
        << "the other keys waited for the retrying one (" << stuck_attempts.load()
        << " attempts of \"stuck\")";
    EXPECT_EQ(outbox.pending_rows().value(), 0U);
}

// A window above one asked of a broker without keeps_partition_prefix (the memory broker, or
// no relay_options::broker at all) is clamped to one: never two events of a key unacknowledged.
TEST(sqlite_outbox, a_window_is_clamped_to_one_where_the_broker_keeps_no_prefix) {
    temp_dir dir;
    const auto path = dir.file("app.db");
    memory_broker broker;
    ASSERT_FALSE(broker.features().keeps_partition_prefix);
    sqlite_outbox outbox{path, {.relay = {.max_unacked_per_key = 8, .broker = &broker}}};
    app_db app{path};
    constexpr int keys = 4;
    constexpr int per_key = 50;
    stage_many(app, outbox, keys, per_key);
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{broker, {.max_pending = 256}};
        auto relay = weft::spawn(outbox.run_relay(pub));
        co_await wait_published(outbox, keys * per_key);
        outbox.stop_relay();
        (co_await std::move(relay)).value();
        (co_await pub.close()).value();
        const auto got = co_await stored_by_key(broker, "orders");
        expect_in_order(got, keys, per_key);
    }());
    EXPECT_EQ(outbox.metrics().unacked_per_key_limit, 1U);
    EXPECT_EQ(outbox.metrics().peak_unacked_per_key, 1U);
}

// Window 8 under a broker that fails every 7th publish, keeping a per-key prefix: the failed
// event and everything after it are sent again in order, so the broker holds each key's events
// once and in order, the relay reports more than one in flight per key, retries and no gap.
TEST(sqlite_outbox, a_window_resends_from_the_failed_event_in_order) {
    temp_dir dir;
    const auto path = dir.file("app.db");
    memory_broker broker;
    prefix_broker prefix{broker};
    std::mutex mu;
    std::map<std::string, message_id> cut;  // key -> the failed event it waits for
    std::uint64_t calls = 0;
    broker.set_publish_fault([&](const envelope& e) -> std::error_code {
        std::lock_guard lock(mu);
        auto c = cut.find(e.key);
        if (c != cut.end()) {
            if (c->second != e.id) {
                return make_error_code(bus_errc::broker_unreachable);  // behind the failed one
            }
            cut.erase(c);  // the failed one again: stored, the key goes on
            return {};
        }
        if (++calls % 7 == 3) {
            cut.emplace(e.key, e.id);
            return make_error_code(bus_errc::broker_unreachable);
        }
        return {};
    });
    sqlite_outbox outbox{path,
                         {.relay = {.batch_size = 256,
                                    .min_backoff = 1ms,
                                    .max_backoff = 8ms,
                                    .max_unacked_per_key = 8,
                                    .broker = &prefix}}};
    app_db app{path};
    constexpr int keys = 8;
    constexpr int per_key = 60;
    stage_many(app, outbox, keys, per_key);
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{prefix, {.max_pending = 256}};
        auto relay = weft::spawn(outbox.run_relay(pub));
        co_await wait_published(outbox, keys * per_key);
        outbox.stop_relay();
        (co_await std::move(relay)).value();
        (co_await pub.close()).value();
        const auto got = co_await stored_by_key(broker, "orders");
        expect_in_order(got, keys, per_key);
    }());
    const auto m = outbox.metrics();
    EXPECT_EQ(broker.stored("orders"), static_cast<std::uint64_t>(keys * per_key));
    EXPECT_EQ(m.unacked_per_key_limit, 8U);
    EXPECT_GT(m.peak_unacked_per_key, 1U);
    EXPECT_LE(m.peak_unacked_per_key, 8U);
    EXPECT_GT(m.retries, 0U);
    EXPECT_EQ(m.window_gaps, 0U);
    EXPECT_EQ(outbox.pending_rows().value(), 0U);
}

// A windowed relay reads its outcomes from the publisher's results(), so it must also read
// results that are not its own: here four publish_async outcomes the program never read fill
// the publisher's bound (max_pending 4) before the relay starts. Left unread, they would keep
// the relay at the bound forever; read (and dropped as not its own), they free it, and every
// staged event is published.
TEST(sqlite_outbox, a_windowed_relay_reads_results_it_did_not_send) {
    temp_dir dir;
    const auto path = dir.file("app.db");
    memory_broker broker;
    prefix_broker prefix{broker};
    sqlite_outbox outbox{
        path, {.relay = {.batch_size = 16, .max_unacked_per_key = 8, .broker = &prefix}}};
    app_db app{path};
    constexpr int keys = 3;
    constexpr int per_key = 10;
    stage_many(app, outbox, keys, per_key);
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{prefix, {.max_pending = 4}};
        for (int i = 0; i < 4; ++i) {
            (co_await pub.publish_async(event_for("other", i))).value();  // results left unread
        }
        auto relay = weft::spawn(outbox.run_relay(pub));
        for (int i = 0; i < 2'000 && outbox.metrics().published < keys * per_key; ++i) {
            (void)co_await weft::sleep_for(2ms);
        }
        outbox.stop_relay();
        (co_await std::move(relay)).value();
        (co_await pub.close()).value();
    }());
    EXPECT_EQ(outbox.metrics().published, static_cast<std::uint64_t>(keys * per_key));
    EXPECT_EQ(outbox.pending_rows().value(), 0U);
    EXPECT_EQ(broker.stored("orders"), static_cast<std::uint64_t>(keys * per_key + 4));
}

// The same window under a broker that keeps no prefix (it fails one event and stores the
// later ones of its key): the relay still re-sends from the failed event, so nothing is lost,
// but the broker holds later events ahead of it, and the relay counts those gaps.
TEST(sqlite_outbox, a_window_counts_the_gaps_of_a_broker_without_a_prefix) {
    temp_dir dir;
    const auto path = dir.file("app.db");
    memory_broker broker;
    prefix_broker prefix{broker};  // claims the prefix it does not keep
    std::atomic<std::uint64_t> calls{0};
    broker.set_publish_fault([&](const envelope&) -> std::error_code {
        return calls.fetch_add(1) % 7 == 3 ? make_error_code(bus_errc::broker_unreachable)
                                           : std::error_code{};
    });
    sqlite_outbox outbox{path,
                         {.relay = {.batch_size = 256,
                                    .min_backoff = 1ms,
                                    .max_backoff = 8ms,
                                    .max_unacked_per_key = 8,
                                    .broker = &prefix}}};
    app_db app{path};
    constexpr int keys = 8;
    constexpr int per_key = 60;
    stage_many(app, outbox, keys, per_key);
    int out_of_order = 0;
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{prefix, {.max_pending = 256}};
        auto relay = weft::spawn(outbox.run_relay(pub));
        co_await wait_published(outbox, keys * per_key);
        outbox.stop_relay();
        (co_await std::move(relay)).value();
        (co_await pub.close()).value();
        const auto got = co_await stored_by_key(broker, "orders");
        for (const auto& [key, seq] : got) {
            out_of_order += std::is_sorted(seq.begin(), seq.end()) ? 0 : 1;
        }
    }());
    EXPECT_GT(outbox.metrics().window_gaps, 0U);
    EXPECT_GT(out_of_order, 0);  // what the gaps mean at the broker
    // The memory broker drops a re-published id: each event once, some out of order.
    EXPECT_EQ(broker.stored("orders"), static_cast<std::uint64_t>(keys * per_key));
    EXPECT_EQ(outbox.pending_rows().value(), 0U);
}

TEST(sqlite_outbox, staging_rolled_back_with_the_business_change_leaves_nothing) {
    temp_dir dir;
    const auto path = dir.file("app.db");
    sqlite_outbox outbox{path};
    app_db app{path};
    {
        sqlite_txn txn{app.get()};
        app.exec("INSERT INTO orders (what) VALUES ('lost')");
        (void)outbox.stage(txn, event_for("k", 0)).value();
        // dropped without commit: rolled back
    }
    {
        sqlite_txn txn{app.get()};
        (void)outbox.stage(txn, event_for("k", 1)).value();
        txn.rollback();
        EXPECT_FALSE(txn.commit());
    }
    EXPECT_EQ(outbox.pending_rows().value(), 0U);
    EXPECT_EQ(app.count("orders"), 0);
    EXPECT_EQ(outbox.metrics().staged, 0U);

    memory_broker broker;
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{broker};
        auto relay = weft::spawn(outbox.run_relay(pub));
        (void)co_await weft::sleep_for(30ms);
        outbox.stop_relay();
        (co_await std::move(relay)).value();
        (co_await pub.close()).value();
    }());
    EXPECT_EQ(broker.stored("orders"), 0U);
}

// stage() keeps its INSERT prepared per connection (at most 8 connections): the same
// statement serves every later stage on that connection, release(db) finalizes it (then a plain
// sqlite3_close succeeds), and a connection closed with sqlite3_close_v2 while its statement is
// kept stays valid memory until the statement goes (evicted here), so staging goes on through
// new connections.
TEST(sqlite_outbox, stage_keeps_one_statement_per_connection) {
    temp_dir dir;
    const auto path = dir.file("app.db");
    sqlite_outbox outbox{path};
    auto open = [&] {
        sqlite3* db = nullptr;
        EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
        sqlite3_busy_timeout(db, 5'000);
        return db;
    };
    auto stage_one = [&](sqlite3* db, int n) {
        sqlite_txn txn{db};
        (void)outbox.stage(txn, event_for("k", n)).value();
        txn.commit().value();
    };
    sqlite3* a = open();
    stage_one(a, 0);
    sqlite3_stmt* kept = sqlite3_next_stmt(a, nullptr);
    ASSERT_NE(kept, nullptr);               // kept after the stage
    EXPECT_EQ(sqlite3_stmt_busy(kept), 0);  // reset: holds no read of the table
    stage_one(a, 1);
    EXPECT_EQ(sqlite3_next_stmt(a, nullptr), kept);  // the same one again
    EXPECT_EQ(sqlite3_next_stmt(a, kept), nullptr);  // and only one

    outbox.release(a);
    EXPECT_EQ(sqlite3_next_stmt(a, nullptr), nullptr);
    EXPECT_EQ(sqlite3_close(a), SQLITE_OK);

    // Ten connections, each closed with sqlite3_close_v2 right after its stage: at most eight
    // statements are kept, the oldest finalized first (freeing their zombie connections).
    int n = 2;
    std::vector<sqlite3*> open_ones;
    for (int i = 0; i < 10; ++i) {
        sqlite3* db = open();
        stage_one(db, n++);
        open_ones.push_back(db);
    }
    int with_statement = 0;
    for (sqlite3* db : open_ones) {
        with_statement += sqlite3_next_stmt(db, nullptr) != nullptr ? 1 : 0;
    }
    EXPECT_EQ(with_statement, 8);
    EXPECT_EQ(sqlite3_next_stmt(open_ones[0], nullptr), nullptr);  // the least recent: evicted
    EXPECT_EQ(sqlite3_next_stmt(open_ones[1], nullptr), nullptr);
    for (sqlite3* db : open_ones) {
        EXPECT_EQ(sqlite3_close_v2(db), SQLITE_OK);
    }
    for (int i = 0; i < 10; ++i) {  // new connections after the zombies: staged as before
        sqlite3* db = open();
        stage_one(db, n++);
        EXPECT_EQ(sqlite3_close_v2(db), SQLITE_OK);
    }
    EXPECT_EQ(outbox.pending_rows().value(), static_cast<std::uint64_t>(n));
    EXPECT_EQ(outbox.metrics().staged, static_cast<std::uint64_t>(n));
}

TEST(sqlite_outbox, a_commit_wakes_the_relay) {
    temp_dir dir;
    const auto path = dir.file("app.db");
    // A poll interval the test clock never reaches (it moves only by advance(), a second at
    // most here): only the notification can wake the relay, so the publish below happens only
    // if the commit notified it.
    sqlite_outbox outbox{path, {.relay = {.min_poll = 1h, .max_poll = 1h}}};
    app_db app{path};
    memory_broker broker;
    weft::runtime rt{weft::testing::test_clock_runtime({.auto_advance = false})};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{broker};
        auto relay = weft::spawn(outbox.run_relay(pub));
        while (outbox.metrics().idle_waits == 0) {  // until the relay found nothing and waits
            co_await weft::testing::advance(1ms);
        }
        (co_await weft::spawn_blocking([&] {
            sqlite_txn txn{app.get()};
            (void)outbox.stage(txn, event_for("k", 0)).value();
            txn.commit().value();
        })).value();
        for (int i = 0; i < 1000 && outbox.metrics().published == 0; ++i) {
            co_await weft::testing::advance(1ms);
        }
        EXPECT_EQ(outbox.metrics().published, 1U);
        outbox.stop_relay();
        (co_await std::move(relay)).value();
        (co_await pub.close()).value();
    }());
    EXPECT_EQ(broker.stored("orders"), 1U);
}

TEST(sqlite_outbox, a_new_relay_resumes_what_the_last_one_left) {
    temp_dir dir;
    const auto path = dir.file("app.db");
    constexpr int keys = 5;
    constexpr int per_key = 40;
    memory_broker broker;
    {
        sqlite_outbox first{path, {.relay = {.batch_size = 16, .min_backoff = 1ms}}};
        app_db app{path};
        stage_many(app, first, keys, per_key);
        // The broker goes away after 60 publishes: the first relay stops half way.
        std::atomic<int> calls{0};
        broker.set_publish_fault([&](const envelope&) -> std::error_code {
            return calls.fetch_add(1) >= 60 ? make_error_code(bus_errc::broker_unreachable)
                                            : std::error_code{};
        });
        weft::runtime rt{weft::testing::test_clock_runtime()};
        rt.block_on([&]() -> weft::task<void> {
            publisher pub{broker};
            auto relay = weft::spawn(first.run_relay(pub));
            co_await wait_published(first, 60);
            (void)co_await weft::sleep_for(20ms);
            first.stop_relay();
            (co_await std::move(relay)).value();
            (co_await pub.close()).value();
        }());
        EXPECT_EQ(broker.stored("orders"), 60U);
        EXPECT_GT(first.pending_rows().value(), 0U);
        broker.set_publish_fault({});
    }
    sqlite_outbox second{path};
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{broker};
        auto relay = weft::spawn(second.run_relay(pub));
        // What the first relay published and had not deleted is published again: the broker
        // de-duplicates it; everything else arrives for the first time.
        while (second.pending_rows().value() != 0) {
            (void)co_await weft::sleep_for(2ms);
        }
        second.stop_relay();
        (co_await std::move(relay)).value();
        (co_await pub.close()).value();
        const auto got = co_await stored_by_key(broker, "orders");
        expect_in_order(got, keys, per_key);
    }());
    EXPECT_EQ(broker.stored("orders"), static_cast<std::uint64_t>(keys * per_key));
}

// A relay spawned and stopped before it first runs (a scope's spawn queues it; the caller
// goes on to stop_relay()) must end: the stop belongs to the run it ends, not to the moment
// run_relay starts. A later run on the same outbox starts afresh and publishes.
TEST(sqlite_outbox, a_stop_asked_before_the_spawned_relay_runs_ends_it) {
    temp_dir dir;
    const auto path = dir.file("app.db");
    sqlite_outbox outbox{path};
    app_db app{path};
    memory_broker broker;
    weft::runtime rt{weft::testing::test_clock_runtime()};  // one worker: the spawn waits
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{broker};
        auto stopped_early = [&]() -> weft::task<weft::result<void>> {
            weft::result<void> out;
            co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
                s.spawn([&]() -> weft::task<void> { out = co_await outbox.run_relay(pub); });
                outbox.stop_relay();
                co_return;
            });
            co_return out;
        };
        const auto start = weft::runtime_clock::now();
        auto r = co_await weft::with_timeout(1h, stopped_early());
        // On the test clock: the relay ended by its stop, not by the hour's cancellation.
        EXPECT_LT(weft::runtime_clock::now() - start, 1h);
        EXPECT_TRUE(r && *r);

        stage_many(app, outbox, 1, 3);
        auto relay = weft::spawn(outbox.run_relay(pub));
        co_await wait_published(outbox, 3);
        outbox.stop_relay();
        (co_await std::move(relay)).value();
        (co_await pub.close()).value();
    }());
    EXPECT_EQ(broker.stored("orders"), 3U);
}

TEST(sqlite_outbox, a_republished_event_is_dropped_by_the_broker) {
    temp_dir dir;
    const auto path = dir.file("app.db");
    sqlite_outbox outbox{path};
    app_db app{path};
    const auto ids = stage_many(app, outbox, 4, 5);
    memory_broker broker;
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{broker};
        auto relay = weft::spawn(outbox.run_relay(pub));
        co_await wait_published(outbox, ids.size());
        // A crash between the ack and the delete leaves rows that are published again with
        // the same ids: staged again here, as the next relay would find them.
        (co_await weft::spawn_blocking([&] {
            sqlite_txn txn{app.get()};
            for (std::size_t i = 0; i < ids.size(); ++i) {
                envelope e = event_for("k" + std::to_string(i % 4), static_cast<int>(i / 4));
                e.id = ids[i];
                (void)outbox.stage(txn, std::move(e)).value();
            }
            txn.commit().value();
        })).value();
        co_await wait_published(outbox, 2 * ids.size());
        outbox.stop_relay();
        (co_await std::move(relay)).value();
        (co_await pub.close()).value();
    }());
    EXPECT_EQ(broker.stored("orders"), ids.size());
    EXPECT_EQ(outbox.pending_rows().value(), 0U);
}

TEST(sqlite_outbox, a_poison_event_goes_to_the_dead_letters_and_its_key_goes_on) {
    temp_dir dir;
    const auto path = dir.file("app.db");
    sqlite_outbox outbox{path};
    app_db app{path};
    stage_many(app, outbox, 2, 5);
    memory_broker broker;
    broker.set_publish_fault([](const envelope& e) -> std::error_code {
        return e.key == "k1" && e.payload == "2" ? make_error_code(bus_errc::message_too_large)
                                                 : std::error_code{};
    });
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{broker};
        auto relay = weft::spawn(outbox.run_relay(pub));
        co_await wait_published(outbox, 9);
        outbox.stop_relay();
        (co_await std::move(relay)).value();
        (co_await pub.close()).value();
        const auto got = co_await stored_by_key(broker, "orders");
        EXPECT_EQ(got.at("k0"), (std::vector<int>{0, 1, 2, 3, 4}));
        EXPECT_EQ(got.at("k1"), (std::vector<int>{0, 1, 3, 4}));
    }());
    EXPECT_EQ(outbox.metrics().dead_lettered, 1U);
    EXPECT_EQ(outbox.dead_letter_rows().value(), 1U);
    EXPECT_EQ(outbox.pending_rows().value(), 0U);
}

// A row whose stored envelope was edited into something that does not decode is dead-lettered
// with the reason (relay_row::load); its key goes on.
TEST(sqlite_outbox, an_edited_row_that_does_not_decode_goes_to_the_dead_letters) {
    temp_dir dir;
    const auto path = dir.file("app.db");
    sqlite_outbox outbox{path};
    app_db app{path};
    stage_many(app, outbox, 2, 3);
    app.exec(
        "UPDATE weft_outbox SET envelope = x'00' WHERE seq = "
        "(SELECT min(seq) FROM weft_outbox WHERE key = 'k1')");
    memory_broker broker;
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{broker};
        auto relay = weft::spawn(outbox.run_relay(pub));
        while (outbox.metrics().published < 5 || outbox.metrics().dead_lettered < 1) {
            (void)co_await weft::sleep_for(1ms);
        }
        outbox.stop_relay();
        (co_await std::move(relay)).value();
        (co_await pub.close()).value();
        const auto got = co_await stored_by_key(broker, "orders");
        EXPECT_EQ(got.at("k0"), (std::vector<int>{0, 1, 2}));
        EXPECT_EQ(got.at("k1"), (std::vector<int>{1, 2}));
    }());
    EXPECT_EQ(outbox.metrics().dead_lettered, 1U);
    EXPECT_EQ(app.count("weft_outbox_dead WHERE reason LIKE 'undecodable outbox row: %'"), 1);
    EXPECT_EQ(outbox.pending_rows().value(), 0U);
}

TEST(sqlite_outbox, a_second_relay_on_the_same_file_is_refused) {
    temp_dir dir;
    const auto path = dir.file("app.db");
    sqlite_outbox one{path};
    sqlite_outbox two{path};
    memory_broker broker;
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{broker};
        auto relay = weft::spawn(one.run_relay(pub));
        while (one.metrics().idle_waits == 0) {  // the first relay holds the file and waits
            (void)co_await weft::sleep_for(1ms);
        }
        auto second = co_await two.run_relay(pub);
        EXPECT_EQ(second.error(), bus_errc::relay_active);
        one.stop_relay();
        (co_await std::move(relay)).value();
        // Once the first is gone, the file is free again.
        auto again = weft::spawn(two.run_relay(pub));
        while (two.metrics().idle_waits == 0) {
            (void)co_await weft::sleep_for(1ms);
        }
        two.stop_relay();
        (co_await std::move(again)).value();
        (co_await pub.close()).value();
    }());
}

TEST(sqlite_outbox, metrics_report_the_oldest_pending_age) {
    temp_dir dir;
    const auto path = dir.file("app.db");
    sqlite_outbox outbox{path};
    app_db app{path};
    stage_many(app, outbox, 1, 3);
    // Staged a minute ago: staged_ms is the wall clock's (it outlives the process), so the
    // rows are aged where they are stored rather than by waiting.
    app.exec("UPDATE weft_outbox SET staged_ms = staged_ms - 60000");
    memory_broker broker;
    broker.pause();
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{broker};
        auto relay = weft::spawn(outbox.run_relay(pub));
        // The age is reported once the relay has read the rows: wait for that.
        while (outbox.metrics().oldest_pending_age.count() == 0) {
            (void)co_await weft::sleep_for(5ms);
        }
        EXPECT_GE(outbox.metrics().oldest_pending_age, 60s);
        EXPECT_LT(outbox.metrics().oldest_pending_age, 1h);
        EXPECT_EQ(outbox.metrics().published, 0U);
        broker.resume();
        co_await wait_published(outbox, 3);
        outbox.stop_relay();
        (co_await std::move(relay)).value();
        (co_await pub.close()).value();
    }());
    EXPECT_EQ(outbox.metrics().published, 3U);
}

/// A relay asked to stop while the broker holds every publish it sent unacknowledged (3 keys,
/// 4 events each, all in one claim): it sends nothing more, and returns only once the broker
/// answered, having deleted the rows it took. The next relay sends the rest and nothing twice:
/// every event is counted published once. A relay that returned at once, or read those late
/// outcomes without deleting the rows, leaves them to the next relay, which publishes them
/// again (15 counted with a window of 1).
void expect_stop_reads_what_is_in_flight(std::uint32_t window) {
    temp_dir dir;
    const auto path = dir.file("app.db");
    memory_broker broker;
    weft::bus::testing::prefix_broker prefix{broker};
    sqlite_outbox outbox{path, {.relay = {.max_unacked_per_key = window, .broker = &prefix}}};
    app_db app{path};
    stage_many(app, outbox, 3, 4);
    const std::uint64_t in_flight = 3 * window;
    broker.pause();
    weft::runtime rt{{.workers = 2}};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{prefix};
        auto relay = weft::spawn(outbox.run_relay(pub));
        // Every key's window is sent, and held by the paused broker.
        while (pub.in_flight() < static_cast<std::ptrdiff_t>(in_flight)) {
            (void)co_await weft::sleep_for(1ms);
        }
        outbox.stop_relay();
        // Time for a relay that does not wait to get past its last deletion (the broker's
        // answers come after it); one that waits passes whenever they come.
        (void)co_await weft::sleep_for(50ms);
        broker.resume();
        (co_await std::move(relay)).value();
        (co_await pub.close()).value();
    }());
    EXPECT_EQ(outbox.metrics().published, in_flight);
    EXPECT_EQ(outbox.pending_rows().value(), 12U - in_flight);
    EXPECT_EQ(broker.stored("orders"), in_flight);
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{prefix};
        auto relay = weft::spawn(outbox.run_relay(pub));
        co_await wait_published(outbox, 12);
        outbox.stop_relay();
        (co_await std::move(relay)).value();
        (co_await pub.close()).value();
    }());
    EXPECT_EQ(outbox.metrics().published, 12U);
    EXPECT_EQ(outbox.pending_rows().value(), 0U);
    EXPECT_EQ(broker.stored("orders"), 12U);
}

TEST(sqlite_outbox, a_stopped_relay_deletes_what_was_in_flight_before_it_returns) {
    expect_stop_reads_what_is_in_flight(1);
}

TEST(sqlite_outbox, a_stopped_windowed_relay_deletes_what_was_in_flight_before_it_returns) {
    expect_stop_reads_what_is_in_flight(4);
}

/// Runs `outbox`'s relay on a publisher closed before it starts, with one row staged, under a
/// timeout that only a relay that neither fails nor ends reaches.
void expect_closed_publisher_ends_the_relay(relay_options relay) {
    temp_dir dir;
    const auto path = dir.file("app.db");
    memory_broker broker;
    weft::bus::testing::prefix_broker prefix{broker};
    relay.broker = &prefix;
    sqlite_outbox outbox{path, {.relay = relay}};
    app_db app{path};
    stage_many(app, outbox, 1, 1);
    weft::runtime rt{{.workers = 2}};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{prefix};
        (co_await pub.close()).value();
        // timed_out: the relay went on (spinning) with nothing it could publish.
        auto r = co_await weft::with_timeout(3s, outbox.run_relay(pub));
        const std::error_code ec =
            !r ? r.error() : (r->has_value() ? std::error_code{} : r->error());
        EXPECT_EQ(ec, bus_errc::publisher_closed) << ec.message();
    }());
    EXPECT_EQ(outbox.pending_rows().value(), 1U);
    EXPECT_EQ(outbox.metrics().published, 0U);
    EXPECT_EQ(broker.stored("orders"), 0U);
}

TEST(sqlite_outbox, a_closed_publisher_ends_the_relay_with_publisher_closed) {
    expect_closed_publisher_ends_the_relay({.max_unacked_per_key = 1});
}

TEST(sqlite_outbox, a_closed_publisher_ends_a_windowed_relay_with_publisher_closed) {
    expect_closed_publisher_ends_the_relay({.max_unacked_per_key = 8});
}

TEST(sqlite_outbox, a_table_name_that_is_not_an_identifier_is_refused) {
    temp_dir dir;
    const auto path = dir.file("app.db");
    for (const char* bad : {"", "x; DROP TABLE orders", "a b", "1abc", "t\"", "weft-outbox"}) {
        EXPECT_THROW(sqlite_outbox(path, {.table = bad}), std::invalid_argument) << bad;
    }
    app_db app{path};
    EXPECT_THROW(sqlite_inbox(app.get(), {.table = "inbox; DROP TABLE orders"}),
                 std::invalid_argument);
    EXPECT_EQ(app.count("orders"), 0);  // still there
    sqlite_outbox ok{path, {.table = "Outbox_2"}};
    sqlite_inbox ok_inbox{app.get(), {.table = "_inbox"}};
}

TEST(sqlite_inbox, a_redelivered_duplicate_is_acked_and_skipped) {
    temp_dir dir;
    const auto path = dir.file("consumer.db");
    app_db app{path};
    sqlite_inbox inbox{app.get()};
    memory_broker broker;
    weft::runtime rt{weft::testing::test_clock_runtime()};  // ack_wait in no wall time
    int handled = 0;
    auto apply = [&](sqlite_txn& txn, const envelope& e) -> weft::result<void> {
        ++handled;
        const std::string sql = "INSERT INTO orders (what) VALUES ('" + e.payload + "')";
        if (sqlite3_exec(txn.db(), sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) {
            return std::errc::io_error;
        }
        return {};
    };
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{broker};
        subscriber sub{broker, {.ack_wait = 10min}};
        auto s = (co_await sub.subscribe("orders", "billing")).value();
        (co_await pub.publish(event_for("k", 1))).value();

        // First delivery: handled and committed, but the consumer dies before its ack (the
        // ack is not registered: record() alone, as a crash after COMMIT would leave it).
        auto d1 = (co_await s.next()).value();
        (co_await weft::spawn_blocking([&] {
            sqlite_txn txn{app.get()};
            EXPECT_TRUE(inbox.record(txn, d1.message().id).value());
            apply(txn, d1.message()).value();
            txn.commit().value();
        })).value();

        // Redelivered after ack_wait: recognised, acked, the handler not run.
        auto d2 = (co_await s.next()).value();
        EXPECT_EQ(d2.attempt(), 2U);
        auto outcome = (co_await weft::spawn_blocking([&] {
                           sqlite_txn txn{app.get()};
                           auto r = inbox.handle(txn, d2, apply);
                           txn.commit().value();
                           return r;
                       })).value();
        EXPECT_EQ(outcome.value(), inbox_outcome::duplicate);

        // A new message is handled, and acked on commit: no redelivery follows.
        (co_await pub.publish(event_for("k", 2))).value();
        auto d3 = (co_await s.next()).value();
        auto fresh = (co_await weft::spawn_blocking([&] {
                         sqlite_txn txn{app.get()};
                         auto r = inbox.handle(txn, d3, apply);
                         txn.commit().value();
                         return r;
                     })).value();
        EXPECT_EQ(fresh.value(), inbox_outcome::processed);
        auto none = co_await weft::with_timeout(300ms, s.next());
        EXPECT_EQ(none.error(), std::errc::timed_out);
        (co_await pub.close()).value();
    }());
    EXPECT_EQ(handled, 2);
    EXPECT_EQ(app.count("orders"), 2);
}

TEST(sqlite_inbox, a_failed_handler_rolls_back_and_records_nothing) {
    temp_dir dir;
    app_db app{dir.file("consumer.db")};
    sqlite_inbox inbox{app.get()};
    const auto id = message_id::generate();
    {
        sqlite_txn txn{app.get()};
        EXPECT_TRUE(inbox.record(txn, id).value());
        app.exec("INSERT INTO orders (what) VALUES ('x')");
        // the handler failed: the caller drops the transaction
    }
    EXPECT_EQ(app.count("weft_inbox"), 0);
    sqlite_txn txn{app.get()};
    EXPECT_TRUE(inbox.record(txn, id).value());
    EXPECT_FALSE(inbox.record(txn, id).value());
    txn.commit().value();
}

// A duplicate of an id recorded earlier in the same, still open, transaction is acked only
// when that transaction commits: rolled back, the message is delivered again.
TEST(sqlite_inbox, a_duplicate_in_the_open_transaction_is_acked_on_commit) {
    temp_dir dir;
    app_db app{dir.file("consumer.db")};
    sqlite_inbox inbox{app.get()};
    memory_broker broker;
    weft::runtime rt{weft::testing::test_clock_runtime()};  // ack_wait in no wall time
    auto apply = [&](sqlite_txn&, const envelope&) -> weft::result<void> { return {}; };
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{broker};
        subscriber sub{broker, {.ack_wait = 10min}};
        auto s = (co_await sub.subscribe("orders", "billing")).value();
        (co_await pub.publish(event_for("k", 1))).value();
        auto d1 = (co_await s.next()).value();
        auto d2 = (co_await s.next()).value();  // the redelivery, after ack_wait
        EXPECT_EQ(d2.attempt(), 2U);
        (co_await weft::spawn_blocking([&] {
            sqlite_txn txn{app.get()};
            EXPECT_EQ(inbox.handle(txn, d1, apply).value(), inbox_outcome::processed);
            EXPECT_EQ(inbox.handle(txn, d2, apply).value(), inbox_outcome::duplicate);
            // dropped: rolled back, the id is not recorded
        })).value();
        auto d3 = co_await weft::with_timeout(20min, s.next());  // not acked: delivered again
        EXPECT_TRUE(d3 && *d3);
        if (!d3 || !*d3) {
            co_return;
        }
        delivery& again = **d3;
        EXPECT_EQ(again.message().id, d1.message().id);
        auto outcome = (co_await weft::spawn_blocking([&] {
                           sqlite_txn txn{app.get()};
                           auto r = inbox.handle(txn, again, apply);
                           txn.commit().value();
                           return r;
                       })).value();
        EXPECT_EQ(outcome.value(), inbox_outcome::processed);
        (co_await pub.close()).value();
    }());
    EXPECT_EQ(app.count("weft_inbox"), 1);
}

// A handler that throws leaves nothing recorded: the caller's transaction is rolled back as the
// exception leaves its scope.
TEST(sqlite_inbox, a_throwing_handler_records_nothing) {
    temp_dir dir;
    app_db app{dir.file("consumer.db")};
    sqlite_inbox inbox{app.get()};
    memory_broker broker;
    weft::runtime rt{weft::testing::test_clock_runtime()};  // ack_wait in no wall time
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{broker};
        subscriber sub{broker, {.ack_wait = 10min}};
        auto s = (co_await sub.subscribe("orders", "billing")).value();
        (co_await pub.publish(event_for("k", 1))).value();
        auto d1 = (co_await s.next()).value();
        (co_await weft::spawn_blocking([&] {
            sqlite_txn txn{app.get()};
            EXPECT_THROW(
                (void)inbox.handle(txn, d1,
                                   [&](sqlite_txn&, const envelope&) -> weft::result<void> {
                                       app.exec("INSERT INTO orders (what) VALUES ('x')");
                                       throw std::runtime_error("handler");
                                   }),
                std::runtime_error);
        })).value();
        auto d2 = (co_await s.next()).value();
        EXPECT_EQ(d2.attempt(), 2U);
        (co_await pub.close()).value();
    }());
    EXPECT_EQ(app.count("weft_inbox"), 0);
    EXPECT_EQ(app.count("orders"), 0);
}

TEST(sqlite_inbox, ids_expire_after_the_window) {
    temp_dir dir;
    app_db app{dir.file("consumer.db")};
    sqlite_inbox inbox{app.get(), {.window = 1min, .expire_every = 0}};
    const auto id = message_id::generate();
    {
        sqlite_txn txn{app.get()};
        EXPECT_TRUE(inbox.record(txn, id).value());
        txn.commit().value();
    }
    EXPECT_EQ(inbox.expire(app.get()).value(), 0U);  // within the window: kept
    // Received two minutes ago: received_ms is the wall clock's (it outlives the process), so
    // the id is aged where it is stored rather than by waiting.
    app.exec("UPDATE weft_inbox SET received_ms = received_ms - 120000");
    EXPECT_EQ(inbox.expire(app.get()).value(), 1U);
    sqlite_txn txn{app.get()};
    EXPECT_TRUE(inbox.record(txn, id).value());  // forgotten: new again
    txn.commit().value();
}

}  // namespace
