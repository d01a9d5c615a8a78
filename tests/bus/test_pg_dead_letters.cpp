// weft::bus::pg_dead_letters over a real PostgreSQL outbox (the fixture's server): an event
// the broker refuses for good is listed with its reason, shown, dropped, or requeued into
// its partition and then published as it was staged; through the API and the weft-bus tool.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "pg_test_support.hpp"
#include "weft/bus/envelope_codec.hpp"
#include "weft/bus/errc.hpp"
#include "weft/bus/memory_broker.hpp"
#include "weft/bus/pg_dead_letters.hpp"
#include "weft/bus/pg_outbox.hpp"
#include "weft/bus/publisher.hpp"
#include "weft/bus/subscriber.hpp"
#include "weft/core/join_handle.hpp"
#include "weft/io/reactor.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"

namespace {

using namespace weft::bus;
using namespace std::chrono_literals;

using test::conninfo;

auto tool(const std::string& args, std::string& out) -> int {
    out.clear();
    FILE* p = ::popen((std::string(WEFT_BUS_TOOL) + " " + args + " 2>&1").c_str(), "r");
    EXPECT_NE(p, nullptr);
    if (p == nullptr) {
        return -1;
    }
    char buf[4096];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) {
        out.append(buf, n);
    }
    const int status = ::pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

auto poison(const std::string& payload, const std::string& key) -> envelope {
    envelope e;
    e.id = message_id::generate();
    e.topic = "orders";
    e.key = key;
    e.type = "order.placed";
    e.headers = {{"tenant", "acme"}};
    e.payload = payload;
    e.time = std::chrono::system_clock::time_point{std::chrono::seconds{1'700'000'000}};
    return e;
}

// Stages `events` in the outbox's table (made afresh), then dead-letters those whose payload
// starts "poison" with the statement the relay uses for a broker's refusal.
void stage_and_dead_letter(const pg_outbox_options& options, const std::vector<envelope>& events) {
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        auto c = co_await test::connect();
        pg_outbox outbox{options};
        const std::string& t = options.table;
        (co_await c->query("DROP TABLE IF EXISTS " + t + ", " + t + "_dead")).value();
        co_await test::reset_schema_version(*c, t);
        (co_await outbox.migrate(*c)).value();
        for (const auto& e : events) {
            (void)(co_await outbox.stage(*c, e)).value();
        }
        (co_await c->query("INSERT INTO " + t +
                           "_dead (seq, id, topic, key, envelope, staged_at, "
                           "reason) SELECT seq, id, topic, key, envelope, staged_at, 'message too "
                           "large for the broker' FROM " +
                           t + " WHERE key <> 'k3' ORDER BY seq"))
            .value();
        (co_await c->query("DELETE FROM " + t + " WHERE key <> 'k3'")).value();
    }());
}

// Runs a relay until it has published `published` events.
void relay(const pg_outbox_options& options, memory_broker& broker, std::uint64_t published) {
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        pg_outbox outbox{options};
        publisher pub{broker};
        auto r = weft::spawn(outbox.run_relay(pub));
        while (outbox.metrics().published < published) {
            (void)co_await weft::sleep_for(2ms);
        }
        outbox.stop_relay();
        (co_await std::move(r)).value();
        (co_await pub.close()).value();
    }());
}

TEST(pg_dead_letters, list_show_drop_and_requeue_by_api_and_tool) {
    const pg_outbox_options options{
        .conninfo = conninfo(), .table = "outbox_dead", .partitions = 4};
    const envelope first = poison("poison-1", "k1");
    const envelope second = poison("poison-2", "k2");
    envelope fine = poison("fine", "k3");
    memory_broker broker;
    stage_and_dead_letter(options, {first, fine, second});
    relay(options, broker, 1);  // "fine"

    pg_dead_letters dead{options};
    const auto all = dead.list(10).value();
    ASSERT_EQ(all.size(), 2U);
    EXPECT_EQ(all[0].message, first);
    EXPECT_EQ(all[1].message, second);
    EXPECT_EQ(all[0].topic, "orders");
    EXPECT_FALSE(all[0].reason.empty());
    EXPECT_EQ(dead.list(1).value().size(), 1U);
    EXPECT_EQ(dead.show(all[1].ref).value().message, second);

    const std::string store = " --pg '" + conninfo() + "' --table outbox_dead --partitions 4";
    std::string out;
    EXPECT_EQ(tool("dead list" + store, out), 0) << out;
    EXPECT_EQ(out.rfind(all[0].ref + "\torders\t" + first.id.to_string() + "\t", 0), 0U) << out;
    EXPECT_EQ(tool("dead show " + all[1].ref + store, out), 0) << out;
    EXPECT_NE(out.find("header tenant: acme\n"), std::string::npos) << out;
    EXPECT_NE(out.find("\npoison-2\n"), std::string::npos) << out;
    EXPECT_EQ(tool("dead drop " + all[1].ref + store, out), 0) << out;
    EXPECT_EQ(dead.show(all[1].ref).error(), std::errc::no_such_file_or_directory);
    EXPECT_EQ(tool("dead drop " + all[1].ref + store, out), 1) << out;

    ASSERT_TRUE(dead.requeue(all[0].ref));
    EXPECT_TRUE(dead.list(10).value().empty());
    EXPECT_EQ(dead.requeue(all[0].ref).error(), std::errc::no_such_file_or_directory);
    // Back in the outbox, in the partition its key hashes to: a relay publishes it as staged.
    relay(options, broker, 1);
    EXPECT_EQ(broker.stored("orders"), 2U);
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        subscriber sub{broker};
        auto s = (co_await sub.subscribe("orders", "check")).value();
        (void)(co_await s.next()).value().ack();  // "fine"
        auto d = (co_await s.next()).value();
        std::string got;
        std::string want;
        encode(d.message(), got);
        encode(first, want);
        EXPECT_EQ(got, want);  // byte for byte
        (void)d.ack();
    }());
}

// No server, no table, no such row: error values, and the tool's exit status 1.
TEST(pg_dead_letters, unreachable_server_and_missing_table_are_error_values) {
    pg_dead_letters down{{.conninfo = "host=127.0.0.1 port=1 connect_timeout=2 user=postgres"}};
    EXPECT_EQ(down.list(10).error(), pg_errc::connection_failed);
    EXPECT_EQ(down.show("1").error(), pg_errc::connection_failed);
    EXPECT_EQ(down.requeue("1").error(), pg_errc::connection_failed);
    EXPECT_EQ(down.drop("1").error(), pg_errc::connection_failed);
    pg_dead_letters none{{.conninfo = conninfo(), .table = "outbox_never_made"}};
    EXPECT_EQ(none.list(10).error(), pg_errc::query_failed);
    EXPECT_EQ(none.requeue("1").error(), pg_errc::query_failed);
    EXPECT_EQ(none.show("x").error(), std::errc::no_such_file_or_directory);
    std::string out;
    EXPECT_EQ(tool("dead list --pg 'host=127.0.0.1 port=1 user=postgres'", out), 1) << out;
    EXPECT_NE(out.find("could not connect to PostgreSQL"), std::string::npos) << out;
}

}  // namespace
