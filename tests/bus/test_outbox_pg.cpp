#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "pg_test_support.hpp"
#include "test_outbox_prefix_broker.hpp"
#include "test_util.hpp"
#include "weft/bus/errc.hpp"
#include "weft/bus/memory_broker.hpp"
#include "weft/bus/pg_inbox.hpp"
#include "weft/bus/pg_outbox.hpp"
#include "weft/bus/publisher.hpp"
#include "weft/bus/subscriber.hpp"
#include "weft/core/join_handle.hpp"
#include "weft/core/scope.hpp"
#include "weft/io/reactor.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"

namespace {

using namespace weft::bus;
using namespace std::chrono_literals;

using test::connect;
using test::conninfo;

/// A fresh table per test (its version row reset: the next migrate creates it again).
auto fresh_table(pg_connection& c, const std::string& t) -> weft::task<void> {
    (co_await c.query("DROP TABLE IF EXISTS " + t + ", " + t + "_dead")).value();
    co_await test::reset_schema_version(c, t);
}

auto event_for(const std::string& key, int n) -> envelope {
    envelope e;
    e.topic = "orders";
    e.key = key;
    e.payload = std::to_string(n);
    return e;
}

auto stage_many(pg_outbox& outbox, pg_connection& c, int keys, int per_key) -> weft::task<void> {
    for (int n = 0; n < per_key; ++n) {
        (co_await c.query("BEGIN")).value();
        for (int k = 0; k < keys; ++k) {
            (co_await outbox.stage(c, event_for("k" + std::to_string(k), n))).value();
        }
        (co_await c.query("COMMIT")).value();
    }
    outbox.notify();
}

auto rows_in(pg_connection& c, const std::string& t) -> weft::task<int> {
    auto r = (co_await c.query("SELECT count(*) FROM " + t)).value();
    co_return std::stoi(std::string(r.text(0, 0)));
}

auto stored_by_key(memory_broker& b) -> weft::task<std::map<std::string, std::vector<int>>> {
    std::map<std::string, std::vector<int>> got;
    subscriber sub{b};
    auto s = (co_await sub.subscribe("orders", "check")).value();
    const auto n = b.stored("orders");
    for (std::uint64_t i = 0; i < n; ++i) {
        auto d = (co_await s.next()).value();
        got[d.message().key].push_back(std::stoi(d.message().payload));
        (void)d.ack();
    }
    co_return got;
}

/// A memory_broker publish fault: of each `every` publishes in a row (counted across the
/// copies set_publish_fault makes), the one at `which` (from 0) is refused, broker_unreachable.
class refuse_every {
public:
    refuse_every(int every, int which)
        : calls_(std::make_shared<std::atomic<int>>(0)), every_(every), which_(which) {}
    auto operator()(const envelope&) const -> std::error_code {
        return calls_->fetch_add(1) % every_ == which_
                   ? make_error_code(bus_errc::broker_unreachable)
                   : std::error_code{};
    }

private:
    std::shared_ptr<std::atomic<int>> calls_;
    int every_;
    int which_;
};

/// The broker stored `keys * per_key` events of "orders": `keys` keys, each with its events
/// once and in staging order (payloads 0, 1, ..., per_key - 1).
auto expect_stored_once_in_order(memory_broker& broker, int keys, int per_key) -> weft::task<void> {
    EXPECT_EQ(broker.stored("orders"), static_cast<std::uint64_t>(keys * per_key));
    const auto got = co_await stored_by_key(broker);
    EXPECT_EQ(got.size(), static_cast<std::size_t>(keys));
    for (const auto& [key, seq] : got) {
        EXPECT_EQ(seq.size(), static_cast<std::size_t>(per_key)) << key;
        for (int i = 0; i < per_key && static_cast<std::size_t>(i) < seq.size(); ++i) {
            EXPECT_EQ(seq[static_cast<std::size_t>(i)], i) << key;
        }
    }
}

/// Until the relays have published and deleted every row of `t`.
auto wait_until_empty(pg_connection& c, const std::string& t) -> weft::task<void> {
    for (;;) {
        const int left = co_await rows_in(c, t);
        if (left == 0) {
            co_return;
        }
        (void)co_await weft::sleep_for(5ms);
    }
}

/// Polls `done` every 5 ms until it holds or `max_polls` polls have gone by (the caller's
/// EXPECT then says which state was not reached).
template <typename Pred>
auto poll_until(Pred done, int max_polls) -> weft::task<void> {
    for (int polls = 0; !done() && polls < max_polls; ++polls) {
        (void)co_await weft::sleep_for(5ms);
    }
}

/// Two relays of one table with the same options, `a` and `b`, each with a publisher of its own
/// on `target` (a relay reads its own publisher's results): the fixture of the tests
/// that run relays side by side. `b` leaves as a relay process does: stop_b closes its
/// publisher and the next start_b has a new one (no outcome of the last run is read by the
/// next). Lives in the runtime's task; stop() before it goes.
struct relay_pair {
    relay_pair(const pg_outbox_options& o, backend& target)
        : a{o}, b{o}, pa{target, {.max_pending = 256}}, target_{&target} {
        pb.emplace(target, publisher_options{.max_pending = 256});
    }

    /// A fresh table `t`, migrated by `a` and again by `b` (a no-op that must succeed).
    auto prepare(pg_connection& c, const std::string& t) -> weft::task<void> {
        co_await fresh_table(c, t);
        auto m = co_await a.migrate(c);
        EXPECT_TRUE(m) << c.last_error();
        (co_await b.migrate(c)).value();  // idempotent
    }

    void start_a() { ra.emplace(weft::spawn(a.run_relay(pa))); }
    void start_b() { rb.emplace(weft::spawn(b.run_relay(*pb))); }

    auto stop_b() -> weft::task<void> {
        b.stop_relay();
        (co_await std::move(*rb)).value();
        rb.reset();
        (co_await pb->close()).value();
        pb.emplace(*target_, publisher_options{.max_pending = 256});
    }

    /// Stops the relays that run and closes both publishers.
    auto stop() -> weft::task<void> {
        a.stop_relay();
        b.stop_relay();
        if (ra) {
            (co_await std::move(*ra)).value();
            ra.reset();
        }
        if (rb) {
            (co_await std::move(*rb)).value();
            rb.reset();
        }
        (co_await pa.close()).value();
        (co_await pb->close()).value();
    }

    /// The broker refused some publishes and the relays retried them; together they published
    /// each of the `events` staged events once, with no gap in a window.
    void expect_published_once_after_retries(int events) const {
        const auto ma = a.metrics();
        const auto mb = b.metrics();
        EXPECT_GT(ma.retries + mb.retries, 0U);
        EXPECT_EQ(ma.window_gaps + mb.window_gaps, 0U);
        EXPECT_EQ(ma.published + mb.published, static_cast<std::uint64_t>(events));
    }

    pg_outbox a;
    pg_outbox b;
    publisher pa;
    backend* target_;
    std::optional<publisher> pb;
    std::optional<weft::join_handle<weft::result<void>>> ra;
    std::optional<weft::join_handle<weft::result<void>>> rb;
};

TEST(pg_outbox, two_relays_share_partitions_and_keep_order_per_key) {
    memory_broker broker;
    broker.set_publish_fault(refuse_every{4, 1});
    constexpr int keys = 12;
    constexpr int per_key = 25;
    const std::string t = "outbox_two_relays";
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        auto c = co_await connect();
        pg_outbox_options o{.conninfo = conninfo(),
                            .table = t,
                            .partitions = 8,
                            .max_owned_partitions = 4,
                            .relay = {.batch_size = 32, .min_backoff = 1ms, .max_backoff = 4ms}};
        relay_pair r{o, broker};
        co_await r.prepare(*c, t);
        r.start_a();
        r.start_b();
        co_await stage_many(r.a, *c, keys, per_key);
        r.b.notify();
        co_await wait_until_empty(*c, t);
        EXPECT_EQ(r.a.owned_partitions(), 4U);
        EXPECT_EQ(r.b.owned_partitions(), 4U);
        EXPECT_GT(r.a.metrics().published, 0U);
        EXPECT_GT(r.b.metrics().published, 0U);
        co_await r.stop();
        r.expect_published_once_after_retries(keys * per_key);
        co_await expect_stored_once_in_order(broker, keys, per_key);
    }());
}

// Two relays with a window of 8 (each with a publisher of its own: a windowed relay reads its
// publisher's results) under a broker that fails every 7th publish and keeps a per-key prefix:
// batches of 32 over 12 keys (a key's window may span batches), failed keys parked while
// the others go on. All staged before the relays start: a claim then holds several events of a
// key whatever the machine's speed (claims that kept up with the staging's commits held one
// event of each key, and the peak stayed at 1 in an ASan run). Every key is stored once and in
// order, the windows held more than one event of a key, retries happened, no gap, and the
// table is empty.
TEST(pg_outbox, a_windowed_relay_keeps_order_per_key_under_failures) {
    memory_broker broker;
    weft::bus::testing::prefix_broker prefix{broker};
    broker.set_publish_fault(weft::bus::testing::prefix_fault{7});
    constexpr int keys = 12;
    constexpr int per_key = 40;
    const std::string t = "outbox_window";
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        auto c = co_await connect();
        pg_outbox_options o{.conninfo = conninfo(),
                            .table = t,
                            .partitions = 8,
                            .max_owned_partitions = 4,
                            .relay = {.batch_size = 32,
                                      .min_backoff = 1ms,
                                      .max_backoff = 8ms,
                                      .max_unacked_per_key = 8,
                                      .broker = &prefix}};
        relay_pair r{o, prefix};
        co_await r.prepare(*c, t);
        co_await stage_many(r.a, *c, keys, per_key);
        r.start_a();
        r.start_b();
        co_await wait_until_empty(*c, t);
        co_await r.stop();
        const auto ma = r.a.metrics();
        const auto mb = r.b.metrics();
        EXPECT_EQ(ma.unacked_per_key_limit, 8U);
        EXPECT_GT(std::max(ma.peak_unacked_per_key, mb.peak_unacked_per_key), 1U);
        EXPECT_LE(std::max(ma.peak_unacked_per_key, mb.peak_unacked_per_key), 8U);
        r.expect_published_once_after_retries(keys * per_key);
        co_await expect_stored_once_in_order(broker, keys, per_key);
    }());
}

TEST(pg_outbox, staging_rolled_back_leaves_nothing) {
    const std::string t = "outbox_rollback";
    memory_broker broker;
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        auto c = co_await connect();
        pg_outbox outbox{{.conninfo = conninfo(), .table = t}};
        co_await fresh_table(*c, t);
        (co_await outbox.migrate(*c)).value();
        (co_await c->query("BEGIN")).value();
        (co_await outbox.stage(*c, event_for("k", 0))).value();
        (co_await c->query("ROLLBACK")).value();
        const int left = co_await rows_in(*c, t);
        EXPECT_EQ(left, 0);
        publisher pub{broker};
        auto relay = weft::spawn(outbox.run_relay(pub));
        (void)co_await weft::sleep_for(50ms);
        outbox.stop_relay();
        (co_await std::move(relay)).value();
        (co_await pub.close()).value();
    }());
    EXPECT_EQ(broker.stored("orders"), 0U);
}

/// Runs a relay on a publisher closed before it starts, with one row staged, under a timeout
/// that only a relay that neither fails nor ends reaches.
void expect_closed_publisher_ends_the_relay(const std::string& t, std::uint32_t window) {
    memory_broker broker;
    weft::bus::testing::prefix_broker prefix{broker};
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        auto c = co_await connect();
        pg_outbox outbox{{.conninfo = conninfo(),
                          .table = t,
                          .relay = {.max_unacked_per_key = window, .broker = &prefix}}};
        co_await fresh_table(*c, t);
        (co_await outbox.migrate(*c)).value();
        co_await stage_many(outbox, *c, 1, 1);
        publisher pub{prefix};
        (co_await pub.close()).value();
        // timed_out: the relay went on (spinning) with nothing it could publish.
        auto r = co_await weft::with_timeout(3s, outbox.run_relay(pub));
        const std::error_code ec =
            !r ? r.error() : (r->has_value() ? std::error_code{} : r->error());
        EXPECT_EQ(ec, bus_errc::publisher_closed) << ec.message();
        EXPECT_EQ(co_await rows_in(*c, t), 1);
        EXPECT_EQ(outbox.metrics().published, 0U);
    }());
    EXPECT_EQ(broker.stored("orders"), 0U);
}

TEST(pg_outbox, a_closed_publisher_ends_the_relay_with_publisher_closed) {
    expect_closed_publisher_ends_the_relay("outbox_closed_pub", 1);
}

TEST(pg_outbox, a_closed_publisher_ends_a_windowed_relay_with_publisher_closed) {
    expect_closed_publisher_ends_the_relay("outbox_closed_pub_window", 8);
}

// `staged` counts the events of transactions that committed: nothing while the transaction is
// open, nothing for one rolled back.
TEST(pg_outbox, staged_counts_on_commit) {
    const std::string t = "outbox_staged_count";
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        auto c = co_await connect();
        pg_outbox outbox{{.conninfo = conninfo(), .table = t}};
        co_await fresh_table(*c, t);
        (co_await outbox.migrate(*c)).value();
        (co_await c->query("BEGIN")).value();
        (co_await outbox.stage(*c, event_for("k", 0))).value();
        EXPECT_EQ(outbox.metrics().staged, 0U);
        (co_await c->query("ROLLBACK")).value();
        EXPECT_EQ(outbox.metrics().staged, 0U);
        (co_await c->query("BEGIN")).value();
        (co_await outbox.stage(*c, event_for("k", 1))).value();
        (co_await outbox.stage(*c, event_for("k", 2))).value();
        EXPECT_EQ(outbox.metrics().staged, 0U);
        (co_await c->query("COMMIT")).value();
        EXPECT_EQ(outbox.metrics().staged, 2U);
        // A transaction that failed: its COMMIT rolls back.
        (co_await c->query("BEGIN")).value();
        (co_await outbox.stage(*c, event_for("k", 3))).value();
        EXPECT_FALSE(co_await c->query("SELECT 1/0"));
        (void)co_await c->query("COMMIT");
        EXPECT_EQ(outbox.metrics().staged, 2U);
        // Outside a transaction the INSERT commits on its own.
        (co_await outbox.stage(*c, event_for("k", 4))).value();
        EXPECT_EQ(outbox.metrics().staged, 3U);
        EXPECT_EQ(co_await rows_in(*c, t), 3);
    }());
}

TEST(pg_outbox, a_table_name_that_is_not_an_identifier_is_refused) {
    for (const char* bad : {"", "x; DROP TABLE orders", "a b", "1abc", "t\"", "weft-outbox"}) {
        EXPECT_THROW(pg_outbox({.conninfo = conninfo(), .table = bad}), std::invalid_argument)
            << bad;
        EXPECT_THROW(pg_inbox({.table = bad}), std::invalid_argument) << bad;
    }
    EXPECT_NO_THROW(pg_outbox({.conninfo = conninfo(), .table = "outbox_2"}));
    EXPECT_NO_THROW(pg_inbox({.table = "_inbox"}));
}

TEST(pg_outbox, a_stopped_relays_partitions_go_to_the_next) {
    const std::string t = "outbox_takeover";
    memory_broker broker;
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        auto c = co_await connect();
        pg_outbox_options o{.conninfo = conninfo(), .table = t, .partitions = 4};
        // The first never recounts the relays (so it keeps all four while it runs, as a relay
        // does between two counts); the second counts and tries often.
        pg_outbox first{[&] {
            auto f = o;
            f.rebalance_interval = 3600s;
            return f;
        }()};
        o.rebalance_interval = 5ms;
        pg_outbox second{o};
        co_await fresh_table(*c, t);
        (co_await first.migrate(*c)).value();
        publisher pub{broker};
        auto r1 = weft::spawn(first.run_relay(pub));
        while (first.owned_partitions() != 4) {
            (void)co_await weft::sleep_for(2ms);
        }
        auto r2 = weft::spawn(second.run_relay(pub));
        (void)co_await weft::sleep_for(30ms);
        EXPECT_EQ(second.owned_partitions(), 0U);
        first.stop_relay();
        (co_await std::move(r1)).value();  // its connection closes: the locks are free
        co_await stage_many(second, *c, 3, 10);
        co_await wait_until_empty(*c, t);
        EXPECT_EQ(second.owned_partitions(), 4U);
        second.stop_relay();
        (co_await std::move(r2)).value();
        (co_await pub.close()).value();
    }());
    EXPECT_EQ(broker.stored("orders"), 30U);
}

// Rebalancing. A first relay owns all 16 partitions; a second starts: within a bounded number
// of polls each owns 8 (the first gave up 8, each only once it held no row of it, and the
// second took them). The second stops: the first gets back to 16. Five times, each after a
// backlog. A producer stages events of 24 keys all along (one transaction per round, every key
// once; a backlog of 150 rounds before the first relay starts), and the broker refuses some
// publishes (so keys are blocked and retried while partitions change hands). Every event is
// stored exactly once and in staging order per key, and the table ends empty. `windowed`: the
// same with a window of 8 per key (each relay with a publisher of its own, a broker keeping a
// per-key prefix, its faults per publisher and transient as a real broker's: a key refused to
// one publisher stays refused to it until the refused event is stored, by either relay:
// producer_prefix_broker): events a relay re-sends after a refusal (the window's later ones,
// which the broker had taken) are counted published twice and stored once (the broker drops a
// repeated id). Without a window every event is counted published once: a leaving relay
// deletes what it was told was published before it lets its partitions go (stop_relay reads
// the outcomes of what it has in flight), so the other never sends it again.
void rebalance_case(bool windowed) {
    memory_broker broker;
    weft::bus::testing::producer_prefix_broker prefix{broker, windowed ? 7U : 0U};
    if (!windowed) {
        broker.set_publish_fault(refuse_every{5, 2});
    }
    constexpr int keys = 24;
    constexpr std::uint32_t partitions = 16;
    // Sized down by WEFT_STRESS_SCALE in the sanitizer runs (ASan at -O0 takes minutes here).
    const int backlog = weft::test::scaled(150);  // rounds staged before the first relay starts
    const int cycles = weft::test::scaled(5);     // the second relay joins and leaves this often
    constexpr int max_polls = 4000;  // 5 ms apart: a rebalance takes a few 20 ms counts
    constexpr int unbounded = std::numeric_limits<int>::max();  // the watchdog bounds these
    const std::string t = windowed ? "outbox_rebalance_window" : "outbox_rebalance";
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        auto c = co_await connect();
        relay_options ro{.batch_size = 32, .min_backoff = 1ms, .max_backoff = 4ms};
        if (windowed) {
            ro.max_unacked_per_key = 8;
            ro.broker = &prefix;
        }
        pg_outbox_options o{.conninfo = conninfo(),
                            .table = t,
                            .partitions = partitions,
                            .rebalance_interval = 1ms,
                            .relay = ro};
        relay_pair r{o, prefix};
        co_await r.prepare(*c, t);

        std::atomic<bool> enough{false};
        std::atomic<int> rounds{0};
        std::atomic<int> burst_until{backlog};  // the producer does not pause before
        auto producer = weft::spawn([&]() -> weft::task<void> {
            auto pc = co_await connect();
            while (!enough.load() || rounds.load() < 40) {
                const int n = rounds.load();
                (co_await pc->query("BEGIN")).value();
                for (int k = 0; k < keys; ++k) {
                    (co_await r.a.stage(*pc, event_for("k" + std::to_string(k), n))).value();
                }
                (co_await pc->query("COMMIT")).value();
                rounds.store(n + 1);
                r.a.notify();
                r.b.notify();
                if (n >= burst_until.load()) {
                    (void)co_await weft::sleep_for(2ms);
                }
            }
        });

        // A backlog first, so that the first relay has rows of every partition in flight when
        // it gives some up.
        co_await poll_until([&] { return rounds.load() >= backlog; }, unbounded);
        r.start_a();
        auto a_owns_all = [&] { return r.a.owned_partitions() == partitions; };
        co_await poll_until(a_owns_all, max_polls);
        EXPECT_EQ(r.a.owned_partitions(), partitions);
        for (int cycle = 0; cycle < cycles; ++cycle) {
            if (cycle != 0) {
                // A backlog again, so that rows of every partition are in flight at the join.
                burst_until.store(rounds.load() + backlog);
                co_await poll_until([&] { return rounds.load() >= burst_until.load(); }, unbounded);
            }
            r.start_b();
            co_await poll_until(
                [&] { return r.a.owned_partitions() == 8 && r.b.owned_partitions() == 8; },
                max_polls);
            EXPECT_EQ(r.a.owned_partitions(), 8U) << "cycle " << cycle;
            EXPECT_EQ(r.b.owned_partitions(), 8U) << "cycle " << cycle;
            const int rounds_at_join = rounds.load();
            // Both relay a while (the second publishes what is staged in its partitions).
            co_await poll_until([&] { return rounds.load() >= rounds_at_join + 20; }, max_polls);
            co_await r.stop_b();
            co_await poll_until(a_owns_all, max_polls);
            EXPECT_EQ(r.a.owned_partitions(), partitions) << "cycle " << cycle;
        }
        enough.store(true);
        co_await std::move(producer);
        co_await wait_until_empty(*c, t);
        co_await r.stop();
        const int per_key = rounds.load();
        EXPECT_GT(r.b.metrics().published, 0U);
        if (windowed) {
            // Events of a window re-sent after a refusal were counted published twice.
            const auto ma = r.a.metrics();
            const auto mb = r.b.metrics();
            EXPECT_GT(ma.retries + mb.retries, 0U);
            EXPECT_EQ(ma.window_gaps + mb.window_gaps, 0U);
            EXPECT_GE(ma.published + mb.published, static_cast<std::uint64_t>(keys * per_key));
            EXPECT_GT(prefix.refused(), 0U);
            std::printf(
                "windowed: published %llu + %llu for %d events, refused %llu, cuts lifted "
                "by the other relay %llu\n",
                static_cast<unsigned long long>(ma.published),
                static_cast<unsigned long long>(mb.published), keys * per_key,
                static_cast<unsigned long long>(prefix.refused()),
                static_cast<unsigned long long>(prefix.lifted_by_others()));
        } else {
            r.expect_published_once_after_retries(keys * per_key);
        }
        co_await expect_stored_once_in_order(broker, keys, per_key);
    }());
}

TEST(pg_outbox, a_joining_relay_gets_its_share_and_a_leaving_ones_come_back) {
    rebalance_case(/*windowed=*/false);
}

TEST(pg_outbox, a_joining_windowed_relay_gets_its_share_in_order) {
    rebalance_case(/*windowed=*/true);
}

// A windowed relay gives up a partition one of whose keys the broker refuses, again and again
// (the key parked, in back-off between its re-sends): the partition must still go to the
// relay that joins, within a bounded number of polls, rather than wait for the key to succeed
// (claims no longer read a partition being given up). All staged first (24 keys, 20 events
// each, 16 partitions); the refused key is one of a partition above the first eight, which the
// first relay gives up when the second joins; both relays windowed (8 per key). Once both own
// 8, the broker stops refusing: every event is stored once and in order, and the table drains.
TEST(pg_outbox, a_windowed_relay_gives_up_a_partition_whose_key_keeps_failing) {
    const std::string t = "outbox_release_parked";
    memory_broker broker;
    weft::bus::testing::prefix_broker prefix{broker};
    constexpr int keys = 24;
    constexpr int per_key = 20;
    constexpr std::uint32_t partitions = 16;
    constexpr int max_polls = 2000;  // 5 ms apart: a rebalance takes a few 1 ms counts
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        auto c = co_await connect();
        pg_outbox_options o{.conninfo = conninfo(),
                            .table = t,
                            .partitions = partitions,
                            .rebalance_interval = 1ms,
                            .relay = {.batch_size = 32,
                                      .min_backoff = 1ms,
                                      .max_backoff = 4ms,
                                      .max_unacked_per_key = 8,
                                      .broker = &prefix}};
        relay_pair r{o, prefix};
        co_await r.prepare(*c, t);
        co_await stage_many(r.a, *c, keys, per_key);
        auto q = (co_await c->query("SELECT key, part FROM " + t +
                                    " WHERE part >= 8 ORDER BY seq LIMIT 1"))
                     .value();
        EXPECT_EQ(q.size(), 1);
        const std::string refused{q.text(0, 0)};
        const std::string refused_part{q.text(0, 1)};
        auto refusals = std::make_shared<std::atomic<int>>(0);
        broker.set_publish_fault([refused, refusals](const envelope& e) -> std::error_code {
            if (e.key != refused) {
                return {};
            }
            refusals->fetch_add(1);
            return make_error_code(bus_errc::broker_unreachable);
        });
        r.start_a();
        // The first relay owns every partition and has tried the refused key a few times.
        co_await poll_until(
            [&] { return r.a.owned_partitions() == partitions && refusals->load() >= 3; },
            max_polls);
        EXPECT_EQ(r.a.owned_partitions(), partitions);
        EXPECT_GE(refusals->load(), 3);
        r.start_b();
        co_await poll_until(
            [&] { return r.a.owned_partitions() == 8 && r.b.owned_partitions() == 8; }, max_polls);
        EXPECT_EQ(r.a.owned_partitions(), 8U)
            << "refused key " << refused << " of partition " << refused_part;
        EXPECT_EQ(r.b.owned_partitions(), 8U)
            << "refused key " << refused << " of partition " << refused_part;
        broker.set_publish_fault({});
        co_await wait_until_empty(*c, t);
        co_await r.stop();
        EXPECT_GT(r.a.metrics().retries + r.b.metrics().retries, 0U);
        co_await expect_stored_once_in_order(broker, keys, per_key);
    }());
}

// The batch-at-a-time relay claims batch k+1 while batch k is published, so k+1 may hold later
// rows of a key whose row in k then fails: those must wait (the key is blocked while the
// relay holds a pending row of it) even when its back-off is over by the time k+1 is
// published, and come back in order. All staged before the relay starts, small batches over
// few keys (a key's rows in every batch), a broker that refuses every third publish: each key
// stored exactly in staging order, each event once.
TEST(pg_outbox, overlapped_batches_keep_order_when_a_key_fails) {
    memory_broker broker;
    broker.set_publish_fault(refuse_every{3, 2});
    constexpr int keys = 4;
    constexpr int per_key = 60;
    const std::string t = "outbox_overlapped";
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        auto c = co_await connect();
        pg_outbox_options o{.conninfo = conninfo(),
                            .table = t,
                            .partitions = 2,
                            .relay = {.batch_size = 6, .min_backoff = 1ms, .max_backoff = 1ms}};
        pg_outbox outbox{o};
        co_await fresh_table(*c, t);
        (co_await outbox.migrate(*c)).value();
        co_await stage_many(outbox, *c, keys, per_key);
        publisher pub{broker};
        auto relay = weft::spawn(outbox.run_relay(pub));
        while (outbox.metrics().published < static_cast<std::uint64_t>(keys * per_key)) {
            (void)co_await weft::sleep_for(1ms);
        }
        outbox.stop_relay();
        (co_await std::move(relay)).value();
        (co_await pub.close()).value();
        EXPECT_EQ(co_await rows_in(*c, t), 0);
        EXPECT_GT(outbox.metrics().retries, 0U);
        co_await expect_stored_once_in_order(broker, keys, per_key);
    }());
}

// A key whose publish keeps failing does not hold up the others: its rows are left out of the
// claim while it waits (the broker refuses "stuck" until the 20 other events staged after it
// are stored, or for its first 2,000 attempts at most, after which a relay that retried in
// place would have stored "stuck" before them).
TEST(pg_outbox, a_retrying_key_does_not_hold_up_the_others) {
    memory_broker broker;
    constexpr int others = 20;
    std::atomic<int> others_stored{0};
    std::atomic<int> stuck_attempts{0};
    std::atomic<int> others_when_stuck_went_through{-1};
    std::vector<std::string> stuck_order;  // payloads of "stuck", in the order stored
    std::mutex mu;
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
        std::lock_guard lock(mu);
        stuck_order.push_back(e.payload);
        return {};
    });
    weft::runtime rt{weft::io_runtime_options(2)};
    const std::string t = "weft_test_outbox_stuck";
    rt.block_on([&]() -> weft::task<void> {
        auto c = co_await connect();
        pg_outbox_options o;
        o.conninfo = conninfo();
        o.table = t;
        o.partitions = 4;
        o.relay.min_backoff = 1ms;
        o.relay.max_backoff = 4ms;
        pg_outbox outbox{o};
        co_await fresh_table(*c, t);
        (co_await outbox.migrate(*c)).value();
        (co_await c->query("BEGIN")).value();
        (co_await outbox.stage(*c, event_for("stuck", 0))).value();
        (co_await c->query("COMMIT")).value();
        publisher pub{broker};
        auto relay = weft::spawn(outbox.run_relay(pub));
        while (outbox.metrics().retries == 0) {  // "stuck" was claimed, tried and refused
            (void)co_await weft::sleep_for(1ms);
        }
        (co_await c->query("BEGIN")).value();
        for (int k = 0; k < others; ++k) {
            (co_await outbox.stage(*c, event_for("k" + std::to_string(k), 0))).value();
        }
        (co_await outbox.stage(*c, event_for("stuck", 1))).value();
        (co_await c->query("COMMIT")).value();
        outbox.notify();
        while (outbox.metrics().published < others + 2) {
            (void)co_await weft::sleep_for(1ms);
        }
        outbox.stop_relay();
        (co_await std::move(relay)).value();
        (co_await pub.close()).value();
        EXPECT_EQ(co_await rows_in(*c, t), 0);
    }());
    EXPECT_EQ(others_when_stuck_went_through.load(), others)
        << "the other keys waited for the retrying one (" << stuck_attempts.load()
        << " attempts of \"stuck\")";
    EXPECT_EQ(stuck_order, (std::vector<std::string>{"0", "1"}));
}

// listen_notify: a commit made through another pg_outbox object (as another process would,
// so this relay's in-process notification is never set) wakes the idle relay through NOTIFY.
// The relay polls once an hour: without the NOTIFY the event would wait for the watchdog.
TEST(pg_outbox, listen_notify_wakes_the_relay_on_another_process_commit) {
    memory_broker broker;
    weft::runtime rt{weft::io_runtime_options(2)};
    const std::string t = "weft_test_outbox_listen";
    rt.block_on([&]() -> weft::task<void> {
        auto c = co_await connect();
        pg_outbox_options o;
        o.conninfo = conninfo();
        o.table = t;
        o.partitions = 4;
        o.listen_notify = true;
        o.relay.min_poll = std::chrono::hours{1};
        o.relay.max_poll = std::chrono::hours{1};
        pg_outbox relay_side{o};
        pg_outbox producer_side{o};
        co_await fresh_table(*c, t);
        (co_await producer_side.migrate(*c)).value();
        publisher pub{broker};
        auto relay = weft::spawn(relay_side.run_relay(pub));
        while (relay_side.metrics().idle_waits == 0) {  // listening, found nothing, waiting
            (void)co_await weft::sleep_for(1ms);
        }
        co_await stage_many(producer_side, *c, 3, 2);
        while (relay_side.metrics().published < 6) {
            (void)co_await weft::sleep_for(1ms);
        }
        relay_side.stop_relay();
        (co_await std::move(relay)).value();
        (co_await pub.close()).value();
    }());
    EXPECT_EQ(broker.stored("orders"), 6U);
}

// ---- pg_inbox: the sqlite_inbox contract on PostgreSQL ----

/// A fresh inbox table and a business table `<t>_orders` (id serial, what text).
auto fresh_inbox(pg_connection& c, const std::string& t) -> weft::task<void> {
    (co_await c.query("DROP TABLE IF EXISTS " + t + ", " + t + "_orders")).value();
    (co_await c.query("CREATE TABLE " + t + "_orders (id serial PRIMARY KEY, what text)")).value();
}

auto count_rows(pg_connection& c, const std::string& t) -> weft::task<int> {
    auto r = (co_await c.query("SELECT count(*) FROM " + t)).value();
    co_return std::stoi(std::string(r.text(0, 0)));
}

TEST(pg_inbox, a_redelivered_duplicate_is_acked_and_skipped) {
    memory_broker broker;
    weft::runtime rt{weft::io_runtime_options(2)};
    const std::string t = "weft_test_inbox_dup";
    int handled = 0;
    rt.block_on([&]() -> weft::task<void> {
        auto c = co_await connect();
        co_await fresh_inbox(*c, t);
        pg_inbox inbox{{.table = t}};
        (co_await inbox.migrate(*c)).value();
        auto apply = [&](pg_connection& conn, const envelope& e) -> weft::task<weft::result<void>> {
            ++handled;
            std::vector<pg_param> p;
            p.push_back(pg_param{e.payload, false});
            auto r = co_await conn.query("INSERT INTO " + t + "_orders (what) VALUES ($1)",
                                         std::move(p));
            if (!r) {
                co_return r.error();
            }
            co_return weft::result<void>{};
        };
        publisher pub{broker};
        subscriber sub{broker, {.ack_wait = 100ms}};
        auto s = (co_await sub.subscribe("orders", "billing")).value();
        (co_await pub.publish(event_for("k", 1))).value();

        // First delivery: handled and committed, but the consumer dies before its ack (record()
        // and the handler in a transaction of our own, no ack, as a crash after COMMIT leaves it).
        auto d1 = (co_await s.next()).value();
        (co_await c->query("BEGIN")).value();
        EXPECT_TRUE((co_await inbox.record(*c, d1.message().id)).value());
        (co_await apply(*c, d1.message())).value();
        (co_await c->query("COMMIT")).value();

        // Redelivered after ack_wait: recognised, acked, the handler not run.
        auto d2 = (co_await s.next()).value();
        EXPECT_EQ(d2.attempt(), 2U);
        auto outcome = co_await inbox.handle(*c, d2, apply);
        EXPECT_EQ(outcome.value(), inbox_outcome::duplicate);

        // A new message is handled, and acked after the commit: no redelivery follows.
        (co_await pub.publish(event_for("k", 2))).value();
        auto d3 = (co_await s.next()).value();
        auto fresh = co_await inbox.handle(*c, d3, apply);
        EXPECT_EQ(fresh.value(), inbox_outcome::processed);
        auto none = co_await weft::with_timeout(300ms, s.next());
        EXPECT_EQ(none.error(), std::errc::timed_out);
        EXPECT_EQ(co_await count_rows(*c, t + "_orders"), 2);
        EXPECT_EQ(co_await count_rows(*c, t), 2);
        (co_await pub.close()).value();
    }());
    EXPECT_EQ(handled, 2);
}

TEST(pg_inbox, a_failed_handler_rolls_back_records_nothing_and_does_not_ack) {
    memory_broker broker;
    weft::runtime rt{weft::io_runtime_options(2)};
    const std::string t = "weft_test_inbox_fail";
    rt.block_on([&]() -> weft::task<void> {
        auto c = co_await connect();
        co_await fresh_inbox(*c, t);
        pg_inbox inbox{{.table = t}};
        (co_await inbox.migrate(*c)).value();
        publisher pub{broker};
        subscriber sub{broker, {.ack_wait = 100ms}};
        auto s = (co_await sub.subscribe("orders", "billing")).value();
        (co_await pub.publish(event_for("k", 1))).value();
        auto d1 = (co_await s.next()).value();
        auto failed = co_await inbox.handle(
            *c, d1, [&](pg_connection& conn, const envelope&) -> weft::task<weft::result<void>> {
                (void)co_await conn.query("INSERT INTO " + t + "_orders (what) VALUES ('x')");
                co_return std::make_error_code(std::errc::io_error);
            });
        EXPECT_EQ(failed.error(), std::errc::io_error);
        EXPECT_EQ(co_await count_rows(*c, t + "_orders"), 0);
        EXPECT_EQ(co_await count_rows(*c, t), 0);
        // Not acked: delivered again after ack_wait, and handled then.
        auto d2 = (co_await s.next()).value();
        EXPECT_EQ(d2.attempt(), 2U);
        auto ok = co_await inbox.handle(
            *c, d2, [&](pg_connection& conn, const envelope&) -> weft::task<weft::result<void>> {
                auto r = co_await conn.query("INSERT INTO " + t + "_orders (what) VALUES ('y')");
                if (!r) {
                    co_return r.error();
                }
                co_return weft::result<void>{};
            });
        EXPECT_EQ(ok.value(), inbox_outcome::processed);
        EXPECT_EQ(co_await count_rows(*c, t + "_orders"), 1);
        (co_await pub.close()).value();
    }());
}

/// Whether `c` is inside a transaction, or unusable: a query there fails, or runs inside an
/// older transaction (now() is when the transaction began).
auto in_transaction(pg_connection& c) -> weft::task<bool> {
    auto r = co_await c.query("SELECT now() = statement_timestamp()");
    co_return !r || r->text(0, 0) != "t";
}

auto insert_order(pg_connection& conn, const std::string& t, const char* what)
    -> weft::task<weft::result<void>> {
    auto r = co_await conn.query("INSERT INTO " + t + "_orders (what) VALUES ('" + what + "')");
    if (!r) {
        co_return r.error();
    }
    co_return weft::result<void>{};
}

// A handler that throws: its writes and its id are rolled back before the exception leaves
// handle(), so the next handle() (the redelivery) runs the handler and commits only its own.
TEST(pg_inbox, a_throwing_handler_rolls_back_before_the_exception_propagates) {
    memory_broker broker;
    weft::runtime rt{weft::io_runtime_options(2)};
    const std::string t = "weft_test_inbox_throw";
    rt.block_on([&]() -> weft::task<void> {
        auto c = co_await connect();
        co_await fresh_inbox(*c, t);
        pg_inbox inbox{{.table = t}};
        (co_await inbox.migrate(*c)).value();
        publisher pub{broker};
        subscriber sub{broker, {.ack_wait = 100ms}};
        auto s = (co_await sub.subscribe("orders", "billing")).value();
        (co_await pub.publish(event_for("k", 1))).value();
        auto d1 = (co_await s.next()).value();
        bool threw = false;
        try {
            (void)co_await inbox.handle(
                *c, d1,
                [&](pg_connection& conn, const envelope&) -> weft::task<weft::result<void>> {
                    (co_await insert_order(conn, t, "x")).value();
                    throw std::runtime_error("handler");
                });
        } catch (const std::runtime_error&) {
            threw = true;
        }
        EXPECT_TRUE(threw);
        EXPECT_FALSE(co_await in_transaction(*c));
        EXPECT_EQ(co_await count_rows(*c, t + "_orders"), 0);
        EXPECT_EQ(co_await count_rows(*c, t), 0);
        auto d2 = (co_await s.next()).value();
        EXPECT_EQ(d2.attempt(), 2U);
        auto ok = co_await inbox.handle(
            *c, d2, [&](pg_connection& conn, const envelope&) -> weft::task<weft::result<void>> {
                co_return co_await insert_order(conn, t, "y");
            });
        EXPECT_EQ(ok.value(), inbox_outcome::processed);
        EXPECT_EQ(co_await count_rows(*c, t + "_orders"), 1);
        EXPECT_EQ(co_await count_rows(*c, t), 1);
        (co_await pub.close()).value();
    }());
}

// A handle() cancelled while its handler waits (with_timeout): rolled back before it returns,
// and the connection is usable; the redelivery is handled.
TEST(pg_inbox, a_cancelled_handle_rolls_back_before_it_returns) {
    memory_broker broker;
    weft::runtime rt{weft::io_runtime_options(2)};
    const std::string t = "weft_test_inbox_cancel";
    rt.block_on([&]() -> weft::task<void> {
        auto c = co_await connect();
        co_await fresh_inbox(*c, t);
        pg_inbox inbox{{.table = t}};
        (co_await inbox.migrate(*c)).value();
        publisher pub{broker};
        subscriber sub{broker, {.ack_wait = 100ms}};
        auto s = (co_await sub.subscribe("orders", "billing")).value();
        (co_await pub.publish(event_for("k", 1))).value();
        auto d1 = (co_await s.next()).value();
        auto slow = [&](pg_connection& conn, const envelope&) -> weft::task<weft::result<void>> {
            (co_await insert_order(conn, t, "x")).value();
            // The server sleeps: the cancellation finds the query in flight.
            auto r = co_await conn.query("SELECT pg_sleep(30)");
            if (!r) {
                co_return r.error();
            }
            co_return weft::result<void>{};
        };
        auto r = co_await weft::with_timeout(200ms, inbox.handle(*c, d1, slow));
        EXPECT_EQ(r.error(), std::errc::timed_out);
        // Rolled back, or the connection discarded: either way nothing was committed.
        auto c2 = co_await connect();
        EXPECT_EQ(co_await count_rows(*c2, t + "_orders"), 0);
        EXPECT_EQ(co_await count_rows(*c2, t), 0);
        EXPECT_FALSE(co_await in_transaction(*c));
        auto d2 = (co_await s.next()).value();
        auto ok = co_await inbox.handle(
            *c2, d2, [&](pg_connection& conn, const envelope&) -> weft::task<weft::result<void>> {
                co_return co_await insert_order(conn, t, "y");
            });
        EXPECT_EQ(ok.value(), inbox_outcome::processed);
        EXPECT_EQ(co_await count_rows(*c2, t + "_orders"), 1);
        (co_await pub.close()).value();
    }());
}

// handle() on a connection with a transaction already open (where the id may have been
// recorded, uncommitted) is refused without touching that transaction or acking: a duplicate
// is acked only once its record is committed.
TEST(pg_inbox, handle_refuses_a_connection_with_an_open_transaction) {
    memory_broker broker;
    weft::runtime rt{weft::io_runtime_options(2)};
    const std::string t = "weft_test_inbox_open";
    rt.block_on([&]() -> weft::task<void> {
        auto c = co_await connect();
        co_await fresh_inbox(*c, t);
        pg_inbox inbox{{.table = t}};
        (co_await inbox.migrate(*c)).value();
        publisher pub{broker};
        subscriber sub{broker, {.ack_wait = 100ms}};
        auto s = (co_await sub.subscribe("orders", "billing")).value();
        (co_await pub.publish(event_for("k", 1))).value();
        auto d1 = (co_await s.next()).value();
        (co_await c->query("BEGIN")).value();
        EXPECT_TRUE((co_await inbox.record(*c, d1.message().id)).value());
        auto r = co_await inbox.handle(
            *c, d1, [&](pg_connection& conn, const envelope&) -> weft::task<weft::result<void>> {
                co_return co_await insert_order(conn, t, "x");
            });
        EXPECT_EQ(r.error(), std::errc::invalid_argument);
        EXPECT_TRUE(co_await in_transaction(*c));
        (co_await c->query("ROLLBACK")).value();
        // Not acked: delivered again.
        auto d2 = co_await weft::with_timeout(2s, s.next());
        EXPECT_TRUE(d2 && *d2);
        if (d2 && *d2) {
            EXPECT_EQ((*d2)->message().id, d1.message().id);
        }
        EXPECT_EQ(co_await count_rows(*c, t), 0);
        (co_await pub.close()).value();
    }());
}

TEST(pg_inbox, ids_expire_after_the_window) {
    weft::runtime rt{weft::io_runtime_options(1)};
    const std::string t = "weft_test_inbox_expiry";
    rt.block_on([&]() -> weft::task<void> {
        auto c = co_await connect();
        co_await fresh_inbox(*c, t);
        pg_inbox inbox{{.table = t, .window = 1ms, .expire_every = 0}};
        (co_await inbox.migrate(*c)).value();
        const auto id = message_id::generate();
        (co_await c->query("BEGIN")).value();
        EXPECT_TRUE((co_await inbox.record(*c, id)).value());
        EXPECT_FALSE((co_await inbox.record(*c, id)).value());
        (co_await c->query("COMMIT")).value();
        (void)co_await weft::sleep_for(20ms);
        EXPECT_EQ((co_await inbox.expire(*c)).value(), 1U);
        (co_await c->query("BEGIN")).value();
        EXPECT_TRUE((co_await inbox.record(*c, id)).value());  // forgotten: new again
        (co_await c->query("COMMIT")).value();
    }());
}

// Consumers started together on a database without the inbox table each migrate it: every one
// succeeds (two `CREATE TABLE IF NOT EXISTS` of one name at once make one of them fail with a
// unique violation in pg_type unless something serialises them).
TEST(pg_inbox, consumers_migrating_a_new_inbox_at_once_all_succeed) {
    weft::runtime rt{weft::io_runtime_options(2)};
    const std::string t = "weft_test_inbox_race";
    constexpr int consumers = 8;
    constexpr int rounds = 5;
    std::atomic<int> failed{0};
    rt.block_on([&]() -> weft::task<void> {
        auto admin = co_await connect();
        std::vector<std::unique_ptr<pg_connection>> conns;
        for (int i = 0; i < consumers; ++i) {
            conns.push_back(co_await connect());
        }
        for (int round = 0; round < rounds; ++round) {
            (co_await admin->query("DROP TABLE IF EXISTS " + t)).value();
            co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
                for (auto& c : conns) {
                    s.spawn([&]() -> weft::task<void> {
                        pg_inbox inbox{{.table = t}};
                        auto r = co_await inbox.migrate(*c);
                        if (!r) {
                            failed.fetch_add(1, std::memory_order_relaxed);
                            ADD_FAILURE() << r.error().message();
                        }
                    });
                }
                co_return;
            });
            EXPECT_EQ(co_await count_rows(*admin, t), 0);
        }
    }());
    EXPECT_EQ(failed.load(), 0);
}

}  // namespace
