// weft-bench's `eventbus` program for the transactional outbox's relay: how many
// staged events per second the relay publishes through weft::bus and marks done (deletes),
// on SQLite or PostgreSQL, to the memory broker (so the database side is what is measured) or
// to a real broker (NATS JetStream with file storage, Kafka), beside the bus's own
// publish_async throughput on the same broker in the same run.
//
//   bench_outbox SCENARIO events=N [keys=100] [per_txn=100] [payload=128] [batch=512]
//                [max_pending=1024] [workers=2] [pg_port=5432] [nats_port=4222]
//                [kafka_port=9092] [window=1] [broker_pid=PID]
//
// SCENARIO: outbox_<db>[_<broker>], db = sqlite | pg, broker = nats_file | kafka (none: the
// memory broker).
// First (untimed) N events over `keys` keys are staged in business transactions of `per_txn`
// events each (SQLite: a file of its own in $TMPDIR, WAL; PostgreSQL: a table of its own,
// dropped at the end, user postgres on 127.0.0.1:pg_port). Then, on a broker topic of its own,
// the bus's own rate: N envelopes of the same shape (same keys, same payload) published with
// publish_async by one task while another reads results() (max_pending in flight), timed from
// the first publish to the last outcome: `publish_msgs_per_s`. Then the relay starts (on
// another topic of its own, after one untimed publish there: connection, metadata) and the
// clock runs until the relay has published all N and returned from stop_relay, and the table
// is checked empty: `relay_events_per_s`, and `relay_vs_publish` = the two rates' quotient;
// on PostgreSQL also `server_cpu_ns_per_event`: the server's CPU (postmaster and children,
// from /proc, when on this machine) during the drain, per event.
// Per key the relay keeps `window` events unacknowledged at most (relay_options::
// max_unacked_per_key; above 1 honoured on Kafka only, else 1), so with 100 keys at most
// 100 x window are in flight (and at most max_pending; with a window the relay holds up to 4
// batches, claiming the next while earlier acks arrive), against max_pending for the publisher;
// `relay_window` reports the window used and `relay_peak_unacked_per_key` the most seen;
// `relay_first_ack_ms` / `relay_all_acked_ms`: the relay's clock when its first / last event was
// seen acknowledged (polled every ms; the rest of relay_events_per_s's time is stop_relay's
// return: the last deletes). The memory
// broker acknowledges inline. `publish_cpu_ns_per_msg`: this process's CPU during the
// publish_async run, per message (as cpu_ns_per_event is the relay's). With broker_pid (the
// broker's process on this machine, e.g. Kafka's JVM), its CPU (all threads, /proc) per message
// during each run: `broker_cpu_ns_per_msg` (publish_async) and `broker_cpu_ns_per_event` (relay).
// NATS streams made here are deleted at the end (Kafka topics stay).

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "../scenarios/scenario.hpp"
#include "bench_common.hpp"
#include "weft/bus/memory_broker.hpp"
#include "weft/bus/publisher.hpp"
#include "weft/core/join_handle.hpp"
#include "weft/core/scope.hpp"
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
#if WEFT_BENCH_OUTBOX_NATS
#include "weft/bus/nats_backend.hpp"
#endif
#if WEFT_BENCH_OUTBOX_KAFKA
#include "weft/bus/kafka_backend.hpp"
#endif

namespace {

using weft::result;
using weft::task;
using namespace weft::bus;
using weft::bench::emit;
using weft::bench::fail;
using weft::bench::bus::expect_ok;
using weft::bench::bus::stopwatch;

struct options {
    std::string scenario;
    std::string db;      // sqlite | pg
    std::string broker;  // memory | nats_file | kafka
    std::int64_t events = 20'000;
    std::int64_t keys = 100;
    std::int64_t per_txn = 100;
    std::int64_t payload = 128;
    std::int64_t batch = 512;
    std::int64_t max_pending = 1024;
    std::int64_t workers = 2;
    std::int64_t pg_port = 5432;
    std::int64_t nats_port = 4222;
    std::int64_t kafka_port = 9092;
    std::int64_t window = 1;      // relay_options::max_unacked_per_key (honoured on Kafka only)
    std::int64_t broker_pid = 0;  // 0: the broker's CPU is not read
    std::string relay_topic;      // the relay publishes here
    std::string publish_topic;    // the bus's own rate is measured here
};

auto parse(int argc, char** argv) -> options {
    if (argc < 2) {
        fail("usage: bench_outbox outbox_<sqlite|pg>[_nats_file|_kafka] key=value...", 2);
    }
    options o;
    o.scenario = argv[1];
    static const std::map<std::string, std::pair<const char*, const char*>> scenarios = {
        {"outbox_sqlite", {"sqlite", "memory"}},
        {"outbox_pg", {"pg", "memory"}},
        {"outbox_sqlite_nats_file", {"sqlite", "nats_file"}},
        {"outbox_pg_nats_file", {"pg", "nats_file"}},
        {"outbox_sqlite_kafka", {"sqlite", "kafka"}},
        {"outbox_pg_kafka", {"pg", "kafka"}},
    };
    const auto& row = weft::bench::bus::scenario_row(scenarios, o.scenario);
    o.db = row.first;
    o.broker = row.second;
    std::map<std::string, std::int64_t*> keys = {
        {"events", &o.events},         {"keys", &o.keys},       {"per_txn", &o.per_txn},
        {"payload", &o.payload},       {"batch", &o.batch},     {"max_pending", &o.max_pending},
        {"workers", &o.workers},       {"pg_port", &o.pg_port}, {"nats_port", &o.nats_port},
        {"kafka_port", &o.kafka_port}, {"window", &o.window},   {"broker_pid", &o.broker_pid}};
    // The suite's parameters for other programs (body size) are skipped.
    weft::bench::bus::read_options(argc, argv, keys, weft::bench::bus::unknown_key::skip);
    if (o.events < 1 || o.keys < 1 || o.per_txn < 1 || o.batch < 1 || o.max_pending < 1 ||
        o.workers < 1 || o.window < 1 || o.payload < 0) {
        fail("events, keys, per_txn, batch, max_pending, workers, window >= 1", 2);
    }
    const std::string base = weft::bench::bus::run_topic(o.scenario);
    o.relay_topic = o.broker == "memory" ? "orders" : base + "-relay";
    o.publish_topic = base + "-publish";
    return o;
}

auto event(const options& o, const std::string& topic, std::int64_t i) -> envelope {
    envelope e;
    e.topic = topic;
    e.key = "k" + std::to_string(i % o.keys);
    e.type = "order_created";
    e.payload = std::string(static_cast<std::size_t>(o.payload), 'x');
    return e;
}

auto make_backend(const options& o) -> std::unique_ptr<backend> {
    if (o.broker == "memory") {
        return std::make_unique<memory_broker>();
    }
    if (o.broker == "nats_file") {
#if WEFT_BENCH_OUTBOX_NATS
        nats_backend_options no;
        no.url = weft::bench::bus::nats_url(o.nats_port);
        no.topics = {o.relay_topic, o.publish_topic};
        no.storage = nats_storage::file;
        return std::make_unique<nats_backend>(std::move(no));
#else
        fail("built without weft::bus_nats (cnats missing)", 2);
#endif
    }
#if WEFT_BENCH_OUTBOX_KAFKA
    kafka_backend_options ko;
    ko.brokers = weft::bench::bus::kafka_brokers(o.kafka_port);
    ko.topics = {o.relay_topic, o.publish_topic};
    ko.create_topics_on_use = false;
    return std::make_unique<kafka_backend>(std::move(ko));
#else
    fail("built without weft::bus_kafka (librdkafka missing)", 2);
#endif
}

/// Fields 4 (ppid), 14 and 15 (utime, stime) of /proc/<pid>/stat; with `reaped`, 16 and 17
/// (cutime, cstime: the children it has waited for) added.
auto proc_stat(long pid, long& ppid, double& cpu_s, bool reaped = false) -> bool {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(in, line)) {
        return false;
    }
    const auto close = line.rfind(')');
    if (close == std::string::npos) {
        return false;
    }
    std::istringstream rest(line.substr(close + 2));
    std::string state;
    long long skip = 0;
    long long utime = 0;
    long long stime = 0;
    long long cutime = 0;
    long long cstime = 0;
    rest >> state >> ppid;
    for (int i = 0; i < 9; ++i) {
        rest >> skip;
    }
    rest >> utime >> stime >> cutime >> cstime;
    if (!reaped) {
        cutime = cstime = 0;
    }
    cpu_s = static_cast<double>(utime + stime + cutime + cstime) /
            static_cast<double>(::sysconf(_SC_CLK_TCK));
    return static_cast<bool>(rest);
}

/// CPU seconds of process `pid` (all its threads); -1 when unreadable or pid is 0.
auto process_cpu(long pid) -> double {
    long ppid = -1;
    double cpu = 0;
    return pid > 0 && proc_stat(pid, ppid, cpu) ? cpu : -1;
}

struct figures {
    double elapsed_s = 0;
    double cpu_s = 0;
    double first_ack_s = -1;   // the relay's start to its first acknowledged event (1 ms polls)
    double all_acked_s = 0;    // ... to its last (then stop_relay, until it returned: elapsed_s)
    std::uint32_t window = 0;  // the relay's window as it used it
    std::uint64_t peak_unacked = 0;  // the most of one key unacknowledged at once
    double server_cpu_s = -1;        // PostgreSQL's, during the relay's drain (pg only)
    double publish_s = 0;
    double publish_cpu_s = 0;
    double broker_publish_s = -1;  // the broker's CPU during publish_async's run (broker_pid)
    double broker_relay_s = -1;    // ... and during the relay's
    std::uint64_t published = 0;
    std::uint64_t left = 0;
    std::uint64_t stored = 0;
};

/// The bus's own rate on the same backend: N envelopes of the relay's shape on a topic of
/// their own, publish_async by this task, outcomes read by another (max_pending in flight).
auto publish_rate(backend& b, const options& o, figures& f) -> task<void> {
    publisher pub{b, {.max_pending = static_cast<std::uint32_t>(o.max_pending)}};
    auto warm = co_await pub.publish(event(o, o.publish_topic, 0));
    expect_ok(warm, "warm-up publish");
    const auto n = o.events;
    const double broker0 = process_cpu(o.broker_pid);
    const stopwatch run_clock;
    co_await weft::with_scope([&](weft::scope& s) -> task<void> {
        s.spawn([&]() -> task<void> {
            for (std::int64_t got = 0; got < n; ++got) {
                auto r = co_await pub.results().recv();
                if (!r || !r->outcome) {
                    fail("publish_async outcome failed");
                }
            }
        });
        for (std::int64_t i = 0; i < n; ++i) {
            auto r = co_await pub.publish_async(event(o, o.publish_topic, i));
            expect_ok(r, "publish_async");
        }
        co_return;
    });
    f.publish_s = run_clock.elapsed_s();
    f.publish_cpu_s = run_clock.cpu_s();
    if (broker0 >= 0) {
        f.broker_publish_s = process_cpu(o.broker_pid) - broker0;
    }
    auto closed = co_await pub.close();
    expect_ok(closed, "close");
}

auto relay_opts(const options& o, const backend& b) -> relay_options {
    return {.batch_size = static_cast<std::uint32_t>(o.batch),
            .max_unacked_per_key = static_cast<std::uint32_t>(o.window),
            .broker = &b};
}

/// Starts the relay, waits until it published `n`, stops it: the timed part.
template <typename Outbox>
auto relay(Outbox& outbox, backend& b, const options& o, figures& f) -> task<void> {
    const auto n = static_cast<std::uint64_t>(o.events);
    publisher pub{b, {.max_pending = static_cast<std::uint32_t>(o.max_pending)}};
    envelope warm_env = event(o, o.relay_topic, 0);
    warm_env.key = "warm-up";
    auto warm = co_await pub.publish(std::move(warm_env));
    expect_ok(warm, "warm-up publish");
    const double broker0 = process_cpu(o.broker_pid);
    const stopwatch run_clock;
    auto running = weft::spawn(outbox.run_relay(pub));
    std::uint64_t seen = 0;
    while (seen < n) {
        (void)co_await weft::sleep_for(std::chrono::milliseconds(1));
        seen = outbox.metrics().published;
        if (seen != 0 && f.first_ack_s < 0) {
            f.first_ack_s = run_clock.elapsed_s();
        }
    }
    f.all_acked_s = run_clock.elapsed_s();
    outbox.stop_relay();
    auto r = co_await std::move(running);
    f.elapsed_s = run_clock.elapsed_s();
    f.cpu_s = run_clock.cpu_s();
    if (broker0 >= 0) {
        f.broker_relay_s = process_cpu(o.broker_pid) - broker0;
    }
    expect_ok(r, "relay");
    f.published = outbox.metrics().published;
    f.window = outbox.metrics().unacked_per_key_limit;
    f.peak_unacked = outbox.metrics().peak_unacked_per_key;
    auto closed = co_await pub.close();
    expect_ok(closed, "close");
}

auto stored(backend& b, const options& o, const figures& f) -> std::uint64_t {
    if (o.broker == "memory") {
        return static_cast<memory_broker&>(b).stored(o.relay_topic) - 1;  // less the warm-up
    }
    return f.published;  // acknowledged by the broker, counted by the relay
}

#if WEFT_BENCH_OUTBOX_SQLITE
void run_sqlite(const options& o, figures& f) {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("weft-bench-outbox-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "app.db").string();
    {
        auto b = make_backend(o);
        sqlite_outbox outbox{path, {.relay = relay_opts(o, *b)}};
        sqlite3* db = nullptr;
        if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
            fail("open " + path);
        }
        sqlite3_busy_timeout(db, 5'000);
        for (std::int64_t i = 0; i < o.events;) {
            sqlite_txn txn{db};
            for (std::int64_t k = 0; k < o.per_txn && i < o.events; ++k, ++i) {
                if (auto id = outbox.stage(txn, event(o, o.relay_topic, i)); !id) {
                    fail("stage: " + id.error().message());
                }
            }
            if (auto c = txn.commit(); !c) {
                fail("commit: " + c.error().message());
            }
        }
        {
            weft::runtime rt{weft::io_runtime_options(static_cast<unsigned>(o.workers))};
            rt.block_on([&]() -> task<void> {
                co_await publish_rate(*b, o, f);
                co_await relay(outbox, *b, o, f);
            }());
        }
        auto left = outbox.pending_rows();
        f.left = left ? *left : ~0ULL;
        f.stored = stored(*b, o, f);
        sqlite3_close_v2(db);
    }
    std::filesystem::remove_all(dir);
}
#endif

#if WEFT_BENCH_OUTBOX_PG
auto parent_pid(long pid) -> long {
    long ppid = -1;
    double cpu = 0;
    return proc_stat(pid, ppid, cpu) ? ppid : -1;
}

/// CPU time of a PostgreSQL server: its postmaster and every child (backends, WAL writer,
/// checkpointer...), living or ended (the postmaster's reaped children: the relay's backend
/// ends with its connection, before the second reading); -1 when /proc does not show them
/// (another machine, other user).
auto server_cpu_seconds(long postmaster) -> double {
    if (postmaster <= 0) {
        return -1;
    }
    double total = 0;
    for (const auto& e : std::filesystem::directory_iterator("/proc")) {
        const std::string name = e.path().filename().string();
        if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) {
            continue;
        }
        const long pid = std::stol(name);
        long ppid = -1;
        double cpu = 0;
        if (proc_stat(pid, ppid, cpu, pid == postmaster) &&
            (pid == postmaster || ppid == postmaster)) {
            total += cpu;
        }
    }
    return total;
}

auto pg_session(const options& o, backend& b, figures& f) -> task<void> {
    const std::string conninfo =
        "host=127.0.0.1 port=" + std::to_string(o.pg_port) + " user=postgres dbname=postgres";
    const std::string table = "bench_outbox_" + std::to_string(::getpid());
    auto c = co_await pg_connection::connect(conninfo);
    if (!c) {
        fail("connect " + conninfo + ": " + c.error().message());
    }
    pg_connection& conn = **c;
    {
        pg_outbox outbox{{.conninfo = conninfo, .table = table, .relay = relay_opts(o, b)}};
        if (auto m = co_await outbox.migrate(conn); !m) {
            fail("migrate: " + m.error().message() + " " + conn.last_error());
        }
        for (std::int64_t i = 0; i < o.events;) {
            (void)(co_await conn.query("BEGIN")).value();
            for (std::int64_t k = 0; k < o.per_txn && i < o.events; ++k, ++i) {
                auto id = co_await outbox.stage(conn, event(o, o.relay_topic, i));
                if (!id) {
                    fail("stage: " + id.error().message() + " " + conn.last_error());
                }
            }
            (void)(co_await conn.query("COMMIT")).value();
        }
        co_await publish_rate(b, o, f);
        auto backend = co_await conn.query("SELECT pg_backend_pid()");
        const long postmaster =
            backend ? parent_pid(std::stol(std::string(backend->text(0, 0)))) : -1;
        const double server0 = server_cpu_seconds(postmaster);
        co_await relay(outbox, b, o, f);
        // The relay's backend ends with its connection: let the postmaster reap it, so that its
        // CPU is read in the postmaster's cutime and not missed between the two (a backend read
        // neither alive nor reaped).
        (void)co_await weft::sleep_for(std::chrono::milliseconds(50));
        f.server_cpu_s = server_cpu_seconds(postmaster) - server0;
        auto left = co_await conn.query("SELECT count(*) FROM " + table);
        f.left = left ? std::stoull(std::string(left->text(0, 0))) : ~0ULL;
        f.stored = stored(b, o, f);
    }
    (void)co_await conn.query("DROP TABLE IF EXISTS " + table + ", " + table + "_dead");
}
#endif

}  // namespace

auto main(int argc, char** argv) -> int {
    const options o = parse(argc, argv);
    figures f;
    try {
        if (o.db == "sqlite") {
#if WEFT_BENCH_OUTBOX_SQLITE
            run_sqlite(o, f);
#else
            fail("built without weft::bus_sqlite", 2);
#endif
        } else {
#if WEFT_BENCH_OUTBOX_PG
            auto b = make_backend(o);
            {
                weft::runtime rt{weft::io_runtime_options(static_cast<unsigned>(o.workers))};
                rt.block_on(pg_session(o, *b, f));
            }
#else
            fail("built without weft::bus_pg", 2);
#endif
        }
    } catch (const std::exception& e) {
        fail(e.what());
    }
#if WEFT_BENCH_OUTBOX_NATS
    if (o.broker == "nats_file") {
        weft::bench::bus::delete_streams(o.nats_port, {o.relay_topic, o.publish_topic});
    }
#endif
    const auto n = static_cast<double>(o.events);
    emit("relay_events_per_s", "events/s", n / f.elapsed_s);
    emit("publish_msgs_per_s", "msg/s", n / f.publish_s);
    emit("relay_vs_publish", "x", f.publish_s / f.elapsed_s);
    emit("cpu_ns_per_event", "ns", f.cpu_s * 1e9 / n);
    emit("publish_cpu_ns_per_msg", "ns", f.publish_cpu_s * 1e9 / n);
    if (f.broker_publish_s >= 0 && f.broker_relay_s >= 0) {
        emit("broker_cpu_ns_per_msg", "ns", f.broker_publish_s * 1e9 / n);
        emit("broker_cpu_ns_per_event", "ns", f.broker_relay_s * 1e9 / n);
    }
    emit("relay_first_ack_ms", "ms", f.first_ack_s * 1e3);
    emit("relay_all_acked_ms", "ms", f.all_acked_s * 1e3);
    emit("relay_window", "events", static_cast<double>(f.window));
    emit("relay_peak_unacked_per_key", "events", static_cast<double>(f.peak_unacked));
    if (f.server_cpu_s >= 0) {
        emit("server_cpu_ns_per_event", "ns", f.server_cpu_s * 1e9 / n);
    }
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
