// The PostgreSQL relay's claim, explained by the real server: under the relay's session
// settings it walks the seq index and stops after a batch; under the server's defaults, on the
// same table never analyzed, it reads and sorts every row of the owned partitions (the control
// that shows the settings are what keeps the sort away). Plan shapes and row counts only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "pg_outbox_claim.hpp"
#include "pg_test_support.hpp"
#include "weft/bus/memory_broker.hpp"
#include "weft/bus/pg_outbox.hpp"
#include "weft/bus/publisher.hpp"
#include "weft/core/join_handle.hpp"
#include "weft/io/reactor.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"

namespace {

using namespace weft::bus;
using namespace std::string_view_literals;
using namespace std::chrono_literals;

constexpr int keys = 100;
constexpr int per_key = 100;  // 10,000 rows: the size at which relay18c saw the sort plan

using test::connect;
using test::conninfo;

/// A fresh outbox table with the schema pg_outbox creates, autovacuum off on it (so it stays
/// never analyzed for the test's life, as a new outbox is until autovacuum reaches it), and
/// keys x per_key staged rows (one business transaction per round of keys).
auto staged_outbox(pg_connection& c, pg_outbox& outbox, const std::string& t) -> weft::task<void> {
    (co_await c.query("DROP TABLE IF EXISTS " + t + ", " + t + "_dead")).value();
    co_await test::reset_schema_version(c, t);
    auto m = co_await outbox.migrate(c);
    EXPECT_TRUE(m) << c.last_error();
    (co_await c.query("ALTER TABLE " + t + " SET (autovacuum_enabled = off)")).value();
    for (int n = 0; n < per_key; ++n) {
        (co_await c.query("BEGIN")).value();
        for (int k = 0; k < keys; ++k) {
            envelope e;
            e.topic = "orders";
            e.key = "k" + std::to_string(k);
            e.payload = std::to_string(n);
            (co_await outbox.stage(c, std::move(e))).value();
        }
        (co_await c.query("COMMIT")).value();
    }
}

/// The server's JSON plan of `claim`, sent as the relay sends it (its SQL, its parameters as
/// it binds them, text). `analyze`: executed too (inside a transaction rolled back, so its row
/// locks go), with row counts and without timings.
auto explain(pg_connection& c, pg_statement claim, bool analyze) -> weft::task<std::string> {
    const std::string head = analyze ? "EXPLAIN (ANALYZE, TIMING OFF, SUMMARY OFF, FORMAT JSON) "
                                     : "EXPLAIN (FORMAT JSON) ";
    (co_await c.query("BEGIN")).value();
    auto r = co_await c.query(head + claim.sql, std::move(claim.params));
    EXPECT_TRUE(r) << c.last_error();
    std::string plan;
    if (r && r->size() == 1) {
        plan = std::string(r->text(0, 0));
    }
    (co_await c.query("ROLLBACK")).value();
    co_return plan;
}

/// The values of `"field": value` in `json` in order (a string value without its quotes).
auto values_of(std::string_view json, std::string_view field) -> std::vector<std::string> {
    std::vector<std::string> out;
    const std::string needle = "\"" + std::string(field) + "\": ";
    for (auto at = json.find(needle); at != std::string_view::npos;
         at = json.find(needle, at + 1)) {
        auto v = json.substr(at + needle.size());
        if (!v.empty() && v.front() == '"') {
            out.emplace_back(v.substr(1, v.find('"', 1) - 1));
        } else {
            out.emplace_back(v.substr(0, v.find_first_of(",\n}")));
        }
    }
    return out;
}

/// The first plan node of `type`: its own properties, up to the next node's "Node Type".
auto node_of(std::string_view json, std::string_view type) -> std::string_view {
    const std::string needle = "\"Node Type\": \"" + std::string(type) + "\"";
    const auto at = json.find(needle);
    if (at == std::string_view::npos) {
        return {};
    }
    const auto next = json.find("\"Node Type\"", at + needle.size());
    return json.substr(at, next == std::string_view::npos ? std::string_view::npos : next - at);
}

auto count_of(std::string_view node, std::string_view field) -> long {
    const auto v = values_of(node, field);
    return v.empty() ? -1 : std::strtol(v.front().c_str(), nullptr, 10);
}

auto has_node(std::string_view json, std::string_view type) -> bool {
    for (const auto& t : values_of(json, "Node Type")) {
        if (t == type) {
            return true;
        }
    }
    return false;
}

auto partitions_upto(std::int64_t n) -> std::vector<std::int64_t> {
    std::vector<std::int64_t> v;
    for (std::int64_t p = 0; p < n; ++p) {
        v.push_back(p);
    }
    return v;
}

/// The claim of a relay owning `owned` of the table's 16 partitions, explained under the relay's
/// settings and under the server's defaults, on the staged outbox never analyzed.
void check_claim(const std::string& t, const std::vector<std::int64_t>& owned) {
    const std::uint32_t batch = relay_options{}.batch_size;
    weft::runtime rt{weft::io_runtime_options(1)};
    rt.block_on([&]() -> weft::task<void> {
        auto c = co_await connect();
        pg_outbox outbox{pg_outbox_options{.conninfo = conninfo(), .table = t}};
        co_await staged_outbox(*c, outbox, t);
        long in_owned = 0;
        for (int k = 0; k < keys; ++k) {
            const auto p = outbox.partition_of("k" + std::to_string(k));
            if (std::find(owned.begin(), owned.end(), p) != owned.end()) {
                in_owned += per_key;
            }
        }
        EXPECT_GT(in_owned, 3L * batch);  // more than a batch's worth for the index to skip
        // Never analyzed nor vacuumed: the planner knows the table only by its size on disk.
        auto never =
            (co_await c->query("SELECT reltuples FROM pg_class WHERE oid = '" + t + "'::regclass"))
                .value();
        EXPECT_EQ(never.text(0, 0), "-1"sv);

        auto relay = co_await connect();
        (co_await relay->query(std::string(detail::pg_relay_planner_settings))).value();
        const auto claim = [&] { return detail::pg_claim(t, owned, batch, {}, nullptr); };

        // The relay's session: the seq index (the primary key) in order, stopped by the LIMIT.
        const std::string planned = co_await explain(*relay, claim(), false);
        EXPECT_FALSE(has_node(planned, "Sort")) << planned;
        EXPECT_FALSE(has_node(planned, "Incremental Sort")) << planned;
        EXPECT_FALSE(has_node(planned, "Bitmap Heap Scan")) << planned;
        const auto scan = node_of(planned, "Index Scan");
        if (scan.empty()) {
            ADD_FAILURE() << "no index scan: " << planned;
            co_return;
        }
        EXPECT_EQ(values_of(scan, "Index Name"), std::vector<std::string>{t + "_pkey"}) << planned;
        EXPECT_EQ(values_of(scan, "Scan Direction"), std::vector<std::string>{"Forward"});
        // Executed: the rows the scan read for one batch claimed (returned to the row lock and
        // the limit, or filtered out: rows of partitions not owned among the oldest), at most 3
        // per row claimed.
        const std::string ran = co_await explain(*relay, claim(), true);
        const auto scanned = node_of(ran, "Index Scan");
        if (scanned.empty()) {
            ADD_FAILURE() << "no index scan executed: " << ran;
            co_return;
        }
        const long returned = count_of(scanned, "Actual Rows");
        const long filtered = std::max(0L, count_of(scanned, "Rows Removed by Filter"));
        EXPECT_EQ(returned, static_cast<long>(batch)) << ran;
        EXPECT_LE(returned + filtered, 3L * batch) << ran;
        EXPECT_EQ(count_of(node_of(ran, "Limit"), "Actual Rows"), static_cast<long>(batch));

        // The control: the same claim on a session with the server's defaults reads and sorts
        // every row of the owned partitions for one batch. If the planner stops choosing this
        // (another version, another cost model) the checks above no longer prove anything.
        const std::string defaults = co_await explain(*c, claim(), false);
        EXPECT_TRUE(has_node(defaults, "Sort")) << defaults;
        EXPECT_TRUE(has_node(defaults, "Bitmap Heap Scan")) << defaults;
        const std::string sorted = co_await explain(*c, claim(), true);
        EXPECT_EQ(count_of(node_of(sorted, "Bitmap Heap Scan"), "Actual Rows"), in_owned) << sorted;
        EXPECT_EQ(count_of(node_of(sorted, "Limit"), "Actual Rows"), static_cast<long>(batch));

        (co_await c->query("DROP TABLE " + t + ", " + t + "_dead")).value();
        (co_await c->query("DELETE FROM weft_schema_versions WHERE name = '" + t + "'")).value();
    }());
}

TEST(pg_outbox_plan, one_relays_claim_walks_the_seq_index_on_a_table_never_analyzed) {
    check_claim("outbox_plan_one_relay", partitions_upto(16));
}

TEST(pg_outbox_plan, a_claim_of_half_the_partitions_walks_the_seq_index_too) {
    check_claim("outbox_plan_half", partitions_upto(8));
}

/// The table's counters in pg_stat_user_tables as flushed so far (a fresh snapshot each call):
/// rows read by sequential scans, rows fetched through an index or a bitmap (idx_tup_fetch
/// counts both), rows deleted.
struct table_reads {
    long sequential = 0;
    long fetched = 0;
    long deleted = 0;
};

auto reads_of(pg_connection& c, const std::string& t) -> weft::task<table_reads> {
    (co_await c.query("SELECT pg_stat_clear_snapshot()")).value();
    auto r = (co_await c.query("SELECT coalesce(seq_tup_read, 0), coalesce(idx_tup_fetch, 0), "
                               "n_tup_del FROM pg_stat_user_tables WHERE relid = '" +
                               t + "'::regclass"))
                 .value();
    co_return table_reads{std::stol(std::string(r.text(0, 0))),
                          std::stol(std::string(r.text(0, 1))),
                          std::stol(std::string(r.text(0, 2)))};
}

// Black box: a real relay (memory broker) drains the never-analyzed outbox; the server's own
// counters say how many rows its statements read per row published. A claim that sorted again
// would fetch every remaining row of its partitions per batch (a bitmap scan's rows count in
// idx_tup_fetch too): about 10 per row here; a batch delete (`seq = ANY($1)`) planned as a
// sequential scan (the server's choice on this table with seqscans on) reads the remaining rows
// once per batch, about 10 per row too (seq_tup_read). With the relay's settings: 2 fetched
// through the index per row claimed (each claim walks past the batch still in flight) and 1 per
// row deleted, none read sequentially.
TEST(pg_outbox_plan, a_relay_draining_a_never_analyzed_outbox_fetches_few_rows_per_row) {
    const std::string t = "outbox_plan_drain";
    constexpr long total = static_cast<long>(keys) * per_key;
    memory_broker broker;
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        auto c = co_await connect();
        pg_outbox outbox{pg_outbox_options{.conninfo = conninfo(), .table = t}};
        co_await staged_outbox(*c, outbox, t);
        (co_await c->query("SELECT pg_stat_force_next_flush()")).value();
        const auto before = co_await reads_of(*c, t);
        publisher pub{broker};
        auto relay = weft::spawn(outbox.run_relay(pub));
        outbox.notify();
        // Each poll reads at most one row by a sequential scan (stopped at the first row).
        long polls = 0;
        for (;;) {
            ++polls;
            auto left = (co_await c->query("SELECT EXISTS (SELECT 1 FROM " + t + ")")).value();
            if (left.text(0, 0) == "f"sv) {
                break;
            }
            (void)co_await weft::sleep_for(5ms);
        }
        outbox.stop_relay();
        (co_await std::move(relay)).value();
        (co_await pub.close()).value();
        EXPECT_EQ(outbox.metrics().published, static_cast<std::uint64_t>(total));
        // The relay's backend flushes its counters when its connection ends; poll until its
        // deletions show (the watchdog bounds a server that never flushes).
        table_reads after = co_await reads_of(*c, t);
        while (after.deleted < total) {
            (void)co_await weft::sleep_for(20ms);
            after = co_await reads_of(*c, t);
        }
        EXPECT_EQ(after.deleted, total);
        const long fetched = after.fetched - before.fetched;
        EXPECT_GE(fetched, total);  // every row claimed once through the seq index
        EXPECT_LE(fetched, 4 * total) << "rows fetched for " << total << " published";
        const long sequential = after.sequential - before.sequential - polls;
        EXPECT_LE(sequential, total / 10) << "rows read sequentially for " << total << " published";
        RecordProperty("rows_fetched", static_cast<int>(fetched));
        RecordProperty("rows_read_sequentially", static_cast<int>(sequential));
        (co_await c->query("DROP TABLE " + t + ", " + t + "_dead")).value();
        (co_await c->query("DELETE FROM weft_schema_versions WHERE name = '" + t + "'")).value();
    }());
}

}  // namespace
