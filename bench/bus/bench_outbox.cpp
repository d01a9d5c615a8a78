// weft-bench's `eventbus` program for the transactional outbox's relay (issue 18): how many
// staged events per second the relay publishes through weft::bus and marks done (deletes),
// on SQLite or PostgreSQL, with the memory broker, so the database side is what is measured.
//
//   bench_outbox SCENARIO events=N [keys=100] [per_txn=100] [payload=128] [batch=512]
//                [max_pending=1024] [workers=2] [pg_port=5432]
//
// SCENARIO: outbox_sqlite | outbox_pg.
// First (untimed) N events over `keys` keys are staged in business transactions of `per_txn`
// events each (SQLite: a file of its own in $TMPDIR, WAL; PostgreSQL: a table of its own,
// dropped at the end, user postgres on 127.0.0.1:pg_port). Then the relay starts and the clock
// runs until the relay has published all N and returned from stop_relay, and the table is
// checked empty. Per key the relay keeps one event unacknowledged at a time (the outbox's
// default order guarantee); the memory broker acknowledges inline.

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "../scenarios/scenario.hpp"
#include "weft/bus/memory_broker.hpp"
#include "weft/bus/publisher.hpp"
#include "weft/core/join_handle.hpp"
#include "weft/io/reactor.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"
#if WEFT_BENCH_OUTBOX_SQLITE
#include <sqlite3.h>

#include "weft/bus/sqlite_outbox.hpp"
#include "weft/bus/sqlite_txn.hpp"
#endif
#if WEFT_BENCH_OUTBOX_PG
#include "weft/bus/pg_connection.hpp"
#include "weft/bus/pg_outbox.hpp"
#endif

namespace {

using clock_type = std::chrono::steady_clock;
using weft::result;
using weft::task;
using namespace weft::bus;
using weft::bench::emit;
using weft::bench::fail;

struct options {
    std::string scenario;
    std::int64_t events = 20'000;
    std::int64_t keys = 100;
    std::int64_t per_txn = 100;
    std::int64_t payload = 128;
    std::int64_t batch = 512;
    std::int64_t max_pending = 1024;
    std::int64_t workers = 2;
    std::int64_t pg_port = 5432;
};

auto parse(int argc, char** argv) -> options {
    if (argc < 2) {
        fail("usage: bench_outbox outbox_sqlite|outbox_pg key=value...", 2);
    }
    options o;
    o.scenario = argv[1];
    if (o.scenario != "outbox_sqlite" && o.scenario != "outbox_pg") {
        fail("unknown scenario '" + o.scenario + "'", 2);
    }
    std::map<std::string, std::int64_t*> keys = {
        {"events", &o.events},   {"keys", &o.keys},      {"per_txn", &o.per_txn},
        {"payload", &o.payload}, {"batch", &o.batch},    {"max_pending", &o.max_pending},
        {"workers", &o.workers}, {"pg_port", &o.pg_port}};
    for (int i = 2; i < argc; ++i) {
        const std::string arg = argv[i];
        const auto eq = arg.find('=');
        auto k = keys.find(arg.substr(0, eq));
        if (eq == std::string::npos) {
            fail("bad parameter '" + arg + "'", 2);
        }
        if (k == keys.end()) {
            continue;  // the suite's parameters for other programs (ports, body size)
        }
        try {
            *k->second = std::stoll(arg.substr(eq + 1));
        } catch (const std::exception&) {
            fail("bad value in '" + arg + "' (want an integer)", 2);
        }
    }
    if (o.events < 1 || o.keys < 1 || o.per_txn < 1 || o.batch < 1 || o.max_pending < 1 ||
        o.workers < 1 || o.payload < 0) {
        fail("events, keys, per_txn, batch, max_pending, workers >= 1", 2);
    }
    return o;
}

auto event(const options& o, std::int64_t i) -> envelope {
    envelope e;
    e.topic = "orders";
    e.key = "k" + std::to_string(i % o.keys);
    e.type = "order_created";
    e.payload = std::string(static_cast<std::size_t>(o.payload), 'x');
    return e;
}

struct figures {
    double elapsed_s = 0;
    double cpu_s = 0;
    std::uint64_t published = 0;
    std::uint64_t left = 0;
    std::uint64_t stored = 0;
};

/// Starts the relay, waits until it published `n`, stops it: the timed part.
template <typename Outbox>
auto relay(Outbox& outbox, memory_broker& broker, const options& o, figures& f) -> task<void> {
    const auto n = static_cast<std::uint64_t>(o.events);
    publisher pub{broker, {.max_pending = static_cast<std::uint32_t>(o.max_pending)}};
    const auto t0 = clock_type::now();
    const double cpu0 = weft::bench::process_cpu_seconds();
    auto running = weft::spawn(outbox.run_relay(pub));
    while (outbox.metrics().published < n) {
        (void)co_await weft::sleep_for(std::chrono::milliseconds(1));
    }
    outbox.stop_relay();
    auto r = co_await std::move(running);
    f.elapsed_s = std::chrono::duration<double>(clock_type::now() - t0).count();
    f.cpu_s = weft::bench::process_cpu_seconds() - cpu0;
    if (!r) {
        fail("relay: " + r.error().message());
    }
    f.published = outbox.metrics().published;
    auto closed = co_await pub.close();
    if (!closed) {
        fail("close: " + closed.error().message());
    }
}

#if WEFT_BENCH_OUTBOX_SQLITE
void run_sqlite(const options& o, figures& f) {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("weft-bench-outbox-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "app.db").string();
    {
        sqlite_outbox outbox{path, {.relay = {.batch_size = static_cast<std::uint32_t>(o.batch)}}};
        sqlite3* db = nullptr;
        if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
            fail("open " + path);
        }
        sqlite3_busy_timeout(db, 5'000);
        for (std::int64_t i = 0; i < o.events;) {
            sqlite_txn txn{db};
            for (std::int64_t k = 0; k < o.per_txn && i < o.events; ++k, ++i) {
                if (auto id = outbox.stage(txn, event(o, i)); !id) {
                    fail("stage: " + id.error().message());
                }
            }
            if (auto c = txn.commit(); !c) {
                fail("commit: " + c.error().message());
            }
        }
        memory_broker broker;
        {
            weft::runtime rt{{.workers = static_cast<unsigned>(o.workers)}};
            rt.block_on(relay(outbox, broker, o, f));
        }
        auto left = outbox.pending_rows();
        f.left = left ? *left : ~0ULL;
        f.stored = broker.stored("orders");
        sqlite3_close_v2(db);
    }
    std::filesystem::remove_all(dir);
}
#endif

#if WEFT_BENCH_OUTBOX_PG
auto pg_session(const options& o, figures& f) -> task<void> {
    const std::string conninfo =
        "host=127.0.0.1 port=" + std::to_string(o.pg_port) + " user=postgres dbname=postgres";
    const std::string table = "bench_outbox_" + std::to_string(::getpid());
    auto c = co_await pg_connection::connect(conninfo);
    if (!c) {
        fail("connect " + conninfo + ": " + c.error().message());
    }
    pg_connection& conn = **c;
    {
        pg_outbox outbox{{.conninfo = conninfo,
                          .table = table,
                          .relay = {.batch_size = static_cast<std::uint32_t>(o.batch)}}};
        if (auto m = co_await outbox.migrate(conn); !m) {
            fail("migrate: " + m.error().message() + " " + conn.last_error());
        }
        for (std::int64_t i = 0; i < o.events;) {
            (void)(co_await conn.query("BEGIN")).value();
            for (std::int64_t k = 0; k < o.per_txn && i < o.events; ++k, ++i) {
                auto id = co_await outbox.stage(conn, event(o, i));
                if (!id) {
                    fail("stage: " + id.error().message() + " " + conn.last_error());
                }
            }
            (void)(co_await conn.query("COMMIT")).value();
        }
        memory_broker broker;
        co_await relay(outbox, broker, o, f);
        auto left = co_await conn.query("SELECT count(*) FROM " + table);
        f.left = left ? std::stoull(std::string(left->text(0, 0))) : ~0ULL;
        f.stored = broker.stored("orders");
    }
    (void)co_await conn.query("DROP TABLE IF EXISTS " + table + ", " + table + "_dead");
}
#endif

}  // namespace

auto main(int argc, char** argv) -> int {
    const options o = parse(argc, argv);
    figures f;
    try {
        if (o.scenario == "outbox_sqlite") {
#if WEFT_BENCH_OUTBOX_SQLITE
            run_sqlite(o, f);
#else
            fail("built without weft::bus_sqlite", 2);
#endif
        } else {
#if WEFT_BENCH_OUTBOX_PG
            weft::runtime rt{weft::io_runtime_options(static_cast<unsigned>(o.workers))};
            rt.block_on(pg_session(o, f));
#else
            fail("built without weft::bus_pg", 2);
#endif
        }
    } catch (const std::exception& e) {
        fail(e.what());
    }
    const auto n = static_cast<double>(o.events);
    emit("relay_events_per_s", "events/s", n / f.elapsed_s);
    emit("cpu_ns_per_event", "ns", f.cpu_s * 1e9 / n);
    emit("events_left", "", static_cast<double>(f.left));
    emit("ops", "", n);
    if (f.left != 0 || f.stored < static_cast<std::uint64_t>(o.events)) {
        std::fprintf(stderr, "invalid: %llu rows left, %llu of %lld stored at the broker\n",
                     static_cast<unsigned long long>(f.left),
                     static_cast<unsigned long long>(f.stored), static_cast<long long>(o.events));
        return 3;
    }
    return 0;
}
