// One process of the outbox chaos test (tests/bus/chaos/chaos.py starts, kills and restarts
// them by PID): the producer that stages events in business transactions, the relay that
// publishes them to the broker, and the consumer that handles them through the inbox.
//
//   chaos_node produce <app.db> <events> <keys> <topic> <pause_ms>
//   chaos_node relay   <app.db> <broker_url> <topic> file|memory [--fresh-ids]
//   chaos_node consume <consumer.db> <broker_url> <topic> file|memory [--no-inbox]
//                      [--log <file>]
//   chaos_node produce-pg <conninfo> <prefix> <events> <keys> <topic> <pause_ms>
//   chaos_node relay-pg   <conninfo> <prefix> <broker_url> <topic> file|memory [--fresh-ids]
//
// The broker: nats://host:port is NATS JetStream (stream storage file or memory);
// kafka://host:port is Kafka (where built with it: the topic made with 4 partitions, the
// relay's producer idempotent with acks=all, the consumer a group member whose offsets are
// committed after acks; file|memory is ignored). A Kafka producer's idempotence lasts as long as
// the producer: a relay killed and restarted publishes again under a new producer id, which the
// broker cannot match with the old one, so there the inbox alone absorbs the repeats.
// The -pg forms do the same on PostgreSQL: the business table `<prefix>_orders` and the outbox
// `<prefix>_outbox` (weft::bus::pg_outbox, one partition-owning relay); the consumer stays on
// SQLite (its own database).
//
// The producer writes each event's business row (`orders`: id, key, seq; seq counts 1, 2, ...
// per key) and stages its envelope (payload "id:key:seq") in one transaction, 1 to 4 events per
// transaction. The relay runs sqlite_outbox::run_relay until it is killed; the outbox's crash
// points (WEFT_OUTBOX_CRASH_POINT, src/bus/relay_faults.hpp) end it by themselves, and this
// process adds "after_publish": _exit shortly after a message was handed to the broker's client
// (5 ms for NATS; 30 ms for Kafka, whose client holds it for linger.ms first), before its ack
// is processed. --fresh-ids gives every publish a new envelope id (the positive control that
// switches the broker's de-duplication and the inbox off).
// WEFT_CHAOS_TRACE=1 makes the relay write a line per message handed to the broker's client and
// per outcome (trace_sink, below); WEFT_CHAOS_HOLD=<file> makes the producer wait while that file
// exists; WEFT_CHAOS_SEED=<n> seeds the producer's keys and transaction sizes; on PostgreSQL a
// trigger records every outbox row deleted (`<prefix>_deleted`). With them a lost event can be
// followed: was it acknowledged (and at which partition and offset) before its row was deleted, and
// does the broker's log hold it there. The consumer records every event it handles in `received`
// (in handling order) in the same transaction as the inbox's id; per key it handles seq n only
// after n - 1 (a delivery that arrives early is nacked and logged in `early`), and logs duplicates
// the inbox absorbed in `dups`. --no-inbox handles every delivery as it comes (the positive control
// for duplicates). --log <file> appends a line per delivery to <file> before anything decides about
// it (the order guard included), and a line per outcome after its transaction committed:
//   D <id> <key> <seq> <envelope id> <attempt> .   delivered
//   P|U|R <id> <key> <seq> <envelope id> <attempt> .   processed, duplicate (the inbox), refused
//                                                      as early (nacked)
// one write(2) per line on an O_APPEND descriptor, so a SIGKILL leaves at most a torn last
// line (no trailing " ."); a consumer started on a torn file ends that line first. chaos.py
// checks loss, duplicates and per-key order from this log: the order guard cannot hide a
// delivery the broker handed over ahead of its predecessor.

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "weft/bus/backend.hpp"
#if defined(WEFT_CHAOS_KAFKA)
#include "weft/bus/kafka_backend.hpp"
#endif
#include "weft/bus/nats_backend.hpp"
#if defined(WEFT_CHAOS_PG)
#include "weft/bus/pg_connection.hpp"
#include "weft/bus/pg_outbox.hpp"
#endif
#include "weft/bus/publisher.hpp"
#include "weft/bus/sqlite_inbox.hpp"
#include "weft/bus/sqlite_outbox.hpp"
#include "weft/bus/sqlite_txn.hpp"
#include "weft/bus/subscriber.hpp"
#include "weft/io/reactor.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/spawn_blocking.hpp"
#include "weft/sched/timer.hpp"

namespace {

using namespace weft::bus;
using namespace std::chrono_literals;

void exec(sqlite3* db, const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
        std::string m = err != nullptr ? err : "?";
        sqlite3_free(err);
        throw std::runtime_error("sqlite: " + m + " in: " + sql);
    }
}

auto open_db(const std::string& path) -> sqlite3* {
    sqlite3* db = nullptr;
    if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
        throw std::runtime_error("cannot open " + path);
    }
    sqlite3_busy_timeout(db, 10'000);
    // The journal-mode switch may be answered BUSY at once, without the busy handler, while
    // another process opens the new file (see detail::sqlite_enable_wal): retry it.
    for (int attempt = 0;; ++attempt) {
        const int rc = sqlite3_exec(db, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);
        if (rc == SQLITE_OK) {
            break;
        }
        if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED) || attempt == 5'000) {
            throw std::runtime_error(std::string("cannot switch to WAL: ") + sqlite3_errmsg(db));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds{2});
    }
    return db;
}

/// A prepared statement, finalized on scope exit.
struct stmt {
    sqlite3_stmt* s = nullptr;
    stmt(sqlite3* db, const char* sql) {
        if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK) {
            throw std::runtime_error(std::string("prepare: ") + sqlite3_errmsg(db));
        }
    }
    stmt(const stmt&) = delete;
    auto operator=(const stmt&) -> stmt& = delete;
    ~stmt() { sqlite3_finalize(s); }
    auto step() -> int { return sqlite3_step(s); }
};

// ---- producer ------------------------------------------------------------------------------

/// The producer's hold (WEFT_CHAOS_HOLD=<path>, set by chaos.py): while that file exists, no
/// new transaction starts. chaos.py creates it while a broker restart outlasts the time the
/// producer's pacing counted for it, so that staging still outlasts the actions however slowly
/// the broker comes back (the crash points need events to relay).
auto held() -> bool {
    static const char* const path = std::getenv("WEFT_CHAOS_HOLD");
    return path != nullptr && ::access(path, F_OK) == 0;
}

/// The producer's choice of keys and transaction sizes: from WEFT_CHAOS_SEED (chaos.py passes
/// its --seed), so that a run replays from its seed.
auto producer_seed() -> unsigned {
    const char* s = std::getenv("WEFT_CHAOS_SEED");
    return s != nullptr ? static_cast<unsigned>(std::strtoull(s, nullptr, 10))
                        : static_cast<unsigned>(::getpid());
}

auto produce(const std::string& path, int events, int keys, const std::string& topic, int pause_ms)
    -> int {
    sqlite_outbox outbox{path};  // creates the outbox schema; the relay runs elsewhere
    sqlite3* db = open_db(path);
    exec(db,
         "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, key TEXT NOT NULL, "
         "seq INTEGER NOT NULL)");
    std::vector<int> next_seq(static_cast<std::size_t>(keys), 1);
    std::mt19937 rng(producer_seed());
    int staged = 0;
    while (staged < events) {
        const int in_txn = std::min(events - staged, static_cast<int>(rng() % 4) + 1);
        sqlite_txn txn{db};
        for (int i = 0; i < in_txn; ++i) {
            const auto k = static_cast<std::size_t>(rng() % static_cast<unsigned>(keys));
            const int id = staged + i + 1;
            const std::string key = "key-" + std::to_string(k);
            const int seq = next_seq[k]++;
            stmt ins(db, "INSERT INTO orders (id, key, seq) VALUES (?, ?, ?)");
            sqlite3_bind_int(ins.s, 1, id);
            sqlite3_bind_text(ins.s, 2, key.c_str(), -1, SQLITE_TRANSIENT);
            sqlite3_bind_int(ins.s, 3, seq);
            if (ins.step() != SQLITE_DONE) {
                throw std::runtime_error(std::string("insert: ") + sqlite3_errmsg(db));
            }
            envelope env;
            env.topic = topic;
            env.key = key;
            env.type = "order_created";
            env.payload = std::to_string(id) + ":" + key + ":" + std::to_string(seq);
            outbox.stage(txn, std::move(env)).value();
        }
        txn.commit().value();
        staged += in_txn;
        if (pause_ms > 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds{pause_ms});
        }
        while (held()) {
            std::this_thread::sleep_for(20ms);
        }
    }
    sqlite3_close_v2(db);  // stage() keeps a statement on db (sqlite_outbox::release)
    std::printf("produced %d\n", staged);
    return 0;
}

// ---- relay ---------------------------------------------------------------------------------

/// Milliseconds since the epoch, for the trace lines (comparable with librdkafka's own logs).
auto trace_ms() -> long long {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

/// The relay's trace (WEFT_CHAOS_TRACE=1, which chaos.py sets): a line on stderr per message
/// handed to the broker's client and per outcome it reported, so that a lost event can be
/// followed to the partition and offset the broker acknowledged it at:
///   S <ms> <slot> <payload>                      handed to the client
///   A <ms> <slot> <payload> <partition> <offset> acknowledged
///   E <ms> <slot> <payload> <error>              failed
/// The outcome's payload is the one started on that slot (a slot is reused only after its
/// outcome). Between the sink of the publisher and the backend's producer: what the relay
/// learns is exactly what is written here.
class trace_sink final : public publish_sink {
public:
    explicit trace_sink(publish_sink& inner, std::uint32_t max_pending)
        : inner_(inner), payloads_(max_pending) {}
    void started(std::uint32_t slot, const std::string& payload) {
        {
            std::lock_guard lock(mu_);
            payloads_[slot] = payload;
        }
        std::fprintf(stderr, "S %lld %u %s\n", trace_ms(), slot, payload.c_str());
    }
    void complete(std::uint32_t slot, weft::result<ack> outcome) noexcept override {
        std::string payload;
        {
            std::lock_guard lock(mu_);
            payload = payloads_[slot];
        }
        if (outcome) {
            std::fprintf(stderr, "A %lld %u %s %d %llu\n", trace_ms(), slot, payload.c_str(),
                         outcome->partition, static_cast<unsigned long long>(outcome->sequence));
        } else {
            std::fprintf(stderr, "E %lld %u %s %s\n", trace_ms(), slot, payload.c_str(),
                         outcome.error().message().c_str());
        }
        inner_.complete(slot, std::move(outcome));
    }

private:
    publish_sink& inner_;
    std::mutex mu_;
    std::vector<std::string> payloads_;  // guarded by mu_: by slot
};

/// Wraps the relay's producer: the "after_publish" crash point and the fresh-ids control.
/// `send_delay`: how long the broker's client takes to send a message handed to it.
class chaos_producer final : public backend_producer {
public:
    chaos_producer(std::unique_ptr<backend_producer> inner,
                   std::unique_ptr<trace_sink> trace,
                   bool fresh_ids,
                   std::chrono::milliseconds send_delay)
        : trace_(std::move(trace)),
          inner_(std::move(inner)),
          fresh_ids_(fresh_ids),
          send_delay_(send_delay) {
        const char* p = std::getenv("WEFT_OUTBOX_CRASH_POINT");
        const char* n = std::getenv("WEFT_OUTBOX_CRASH_AFTER");
        armed_ = p != nullptr && std::string_view{p} == "after_publish";
        left_ = n != nullptr ? std::atol(n) : 1;
    }
    void start(envelope env, std::uint32_t slot) override {
        if (fresh_ids_) {
            env.id = message_id::generate();
        }
        if (trace_) {
            trace_->started(slot, env.payload);
        }
        inner_->start(std::move(env), slot);
        if (armed_ && left_.fetch_sub(1) <= 1) {
            std::this_thread::sleep_for(send_delay_);  // sent; its ack is not seen
            std::_Exit(86);
        }
    }
    void close() noexcept override { inner_->close(); }

private:
    std::unique_ptr<trace_sink> trace_;  // destroyed after inner_, as the publisher is
    std::unique_ptr<backend_producer> inner_;
    bool fresh_ids_;
    std::chrono::milliseconds send_delay_;
    bool armed_ = false;
    std::atomic<long> left_{1};
};

class chaos_backend final : public backend {
public:
    chaos_backend(backend& inner, bool fresh_ids) : inner_(inner), fresh_ids_(fresh_ids) {}
    [[nodiscard]] auto name() const noexcept -> std::string_view override { return "chaos"; }
    [[nodiscard]] auto features() const noexcept -> backend_features override {
        return inner_.features();
    }
    auto make_producer(publish_sink& sink, std::uint32_t max_pending)
        -> weft::result<std::unique_ptr<backend_producer>> override {
        std::unique_ptr<trace_sink> trace;
        if (const char* t = std::getenv("WEFT_CHAOS_TRACE"); t != nullptr && *t == '1') {
            trace = std::make_unique<trace_sink>(sink, max_pending);
        }
        auto p = inner_.make_producer(trace ? *trace : sink, max_pending);
        if (!p) {
            return p.error();
        }
        const auto send_delay = inner_.name() == "kafka" ? 30ms : 5ms;
        return std::unique_ptr<backend_producer>(std::make_unique<chaos_producer>(
            std::move(*p), std::move(trace), fresh_ids_, send_delay));
    }
    auto make_consumer(consumer_config config)
        -> weft::task<weft::result<std::shared_ptr<backend_consumer>>> override {
        return inner_.make_consumer(std::move(config));
    }

private:
    backend& inner_;
    bool fresh_ids_;
};

/// The broker `url` names (see the top of this file); retried while it restarts.
auto connect(const std::string& url, const std::string& topic, const std::string& storage)
    -> std::unique_ptr<backend> {
    constexpr std::string_view kafka_scheme = "kafka://";
    for (int attempt = 0;; ++attempt) {  // the broker may be restarting
        try {
            if (url.starts_with(kafka_scheme)) {
#if defined(WEFT_CHAOS_KAFKA)
                kafka_backend_options o;
                o.brokers = url.substr(kafka_scheme.size());
                o.topics = {topic};
                o.partitions = 4;
                // Far longer than a broker restart (the JVM's start and its log recovery,
                // which a loaded machine stretches past 20 s): a publish waits it out in the
                // client rather than failing and being retried by the relay. With a per-key
                // window above 1 this is what keeps each key's order at the broker: librdkafka
                // drops a message at its timeout and goes on with the later ones of its
                // partition, so one timed out while a later one of its key waits is stored
                // after it (the relay counts such a gap in window_gaps, see the outbox guide).
                o.publish_timeout = 120'000ms;
                return std::make_unique<kafka_backend>(o);
#else
                throw std::runtime_error("chaos_node was built without Kafka");
#endif
            }
            nats_backend_options o;
            o.url = url;
            o.topics = {topic};
            o.storage = storage == "memory" ? nats_storage::memory : nats_storage::file;
            o.publish_timeout = 2'000ms;
            return std::make_unique<nats_backend>(o);
        } catch (const std::system_error& e) {
            if (attempt == 100) {
                throw;
            }
            std::this_thread::sleep_for(200ms);
        }
    }
}

/// The relay's per-key window: WEFT_CHAOS_WINDOW (chaos.py --window), default 1.
auto relay_window() -> std::uint32_t {
    const char* w = std::getenv("WEFT_CHAOS_WINDOW");
    return w != nullptr ? static_cast<std::uint32_t>(std::max(1L, std::atol(w))) : 1U;
}

auto relay(const std::string& path,
           const std::string& url,
           const std::string& topic,
           const std::string& storage,
           bool fresh_ids) -> int {
    sqlite_outbox_options oo;
    oo.relay.batch_size = 64;
    oo.relay.max_poll = 20ms;  // the producer is another process: its commits do not wake us
    oo.relay.max_backoff = 500ms;
    auto broker = connect(url, topic, storage);
    chaos_backend b{*broker, fresh_ids};
    oo.relay.max_unacked_per_key = relay_window();
    oo.relay.broker = &b;
    sqlite_outbox outbox{path, oo};
    weft::runtime rt{weft::io_runtime_options(2)};
    auto r = rt.block_on([&]() -> weft::task<weft::result<void>> {
        publisher pub{b, {.max_pending = 256}};
        auto done = co_await outbox.run_relay(pub);
        (void)co_await pub.close();
        co_return done;
    }());
    if (!r) {
        std::fprintf(stderr, "relay: %s\n", r.error().message().c_str());
        return 1;
    }
    return 0;
}

// ---- PostgreSQL ----------------------------------------------------------------------------
#if defined(WEFT_CHAOS_PG)

auto pg_text(std::string v) -> pg_param { return pg_param{std::move(v), false}; }

auto produce_pg(const std::string& conninfo,
                const std::string& prefix,
                int events,
                int keys,
                const std::string& topic,
                int pause_ms) -> int {
    pg_outbox outbox{{.conninfo = conninfo, .table = prefix + "_outbox"}};
    weft::runtime rt{weft::io_runtime_options(1)};
    return rt.block_on([&]() -> weft::task<int> {
        auto c = std::move(co_await pg_connection::connect(conninfo)).value();
        (co_await outbox.migrate(*c)).value();
        (co_await c->query("CREATE TABLE IF NOT EXISTS " + prefix +
                           "_orders (id bigint PRIMARY KEY, key text NOT NULL, seq int NOT NULL)"))
            .value();
        // Every row the relays delete from the outbox, with when and by which session: a lost
        // event's deletion can then be set beside the relay's trace (was it acknowledged
        // before?). The outbox's seq is the business id here (one producer, one row per event,
        // in id order, on a table made for this run).
        const std::string deleted = prefix + "_deleted";
        (co_await c->query("CREATE TABLE IF NOT EXISTS " + deleted +
                           " (seq bigint NOT NULL, key text NOT NULL, at timestamptz NOT NULL "
                           "DEFAULT clock_timestamp(), backend int NOT NULL DEFAULT "
                           "pg_backend_pid())"))
            .value();
        (co_await c->query("CREATE OR REPLACE FUNCTION " + deleted +
                           "_log() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO " +
                           deleted + " (seq, key) VALUES (OLD.seq, OLD.key); RETURN OLD; END $$"))
            .value();
        (co_await c->query("CREATE OR REPLACE TRIGGER " + deleted + "_log AFTER DELETE ON " +
                           prefix + "_outbox FOR EACH ROW EXECUTE FUNCTION " + deleted + "_log()"))
            .value();
        std::vector<int> next_seq(static_cast<std::size_t>(keys), 1);
        std::mt19937 rng(producer_seed());
        int staged = 0;
        const std::string insert =
            "INSERT INTO " + prefix + "_orders (id, key, seq) VALUES ($1, $2, $3)";
        while (staged < events) {
            const int in_txn = std::min(events - staged, static_cast<int>(rng() % 4) + 1);
            (co_await c->query("BEGIN")).value();
            for (int i = 0; i < in_txn; ++i) {
                const auto k = static_cast<std::size_t>(rng() % static_cast<unsigned>(keys));
                const int id = staged + i + 1;
                const std::string key = "key-" + std::to_string(k);
                const int seq = next_seq[k]++;
                std::vector<pg_param> args;
                args.push_back(pg_text(std::to_string(id)));
                args.push_back(pg_text(key));
                args.push_back(pg_text(std::to_string(seq)));
                (co_await c->query(insert, std::move(args))).value();
                envelope env;
                env.topic = topic;
                env.key = key;
                env.type = "order_created";
                env.payload = std::to_string(id) + ":" + key + ":" + std::to_string(seq);
                (co_await outbox.stage(*c, std::move(env))).value();
            }
            (co_await c->query("COMMIT")).value();
            staged += in_txn;
            if (pause_ms > 0) {
                (void)co_await weft::sleep_for(std::chrono::milliseconds{pause_ms});
            }
            while (held()) {
                (void)co_await weft::sleep_for(20ms);
            }
        }
        std::printf("produced %d\n", staged);
        co_return 0;
    }());
}

auto relay_pg(const std::string& conninfo,
              const std::string& prefix,
              const std::string& url,
              const std::string& topic,
              const std::string& storage,
              bool fresh_ids) -> int {
    pg_outbox_options oo;
    // application_name lets the chaos script find (and pg_terminate_backend) this session.
    oo.conninfo = conninfo + " application_name=weft_chaos_relay";
    oo.table = prefix + "_outbox";
    oo.relay.batch_size = 64;
    oo.relay.max_poll = 20ms;
    oo.relay.max_backoff = 500ms;
    auto broker = connect(url, topic, storage);
    chaos_backend b{*broker, fresh_ids};
    oo.relay.max_unacked_per_key = relay_window();
    oo.relay.broker = &b;
    pg_outbox outbox{oo};
    weft::runtime rt{weft::io_runtime_options(2)};
    auto r = rt.block_on([&]() -> weft::task<weft::result<void>> {
        publisher pub{b, {.max_pending = 256}};
        auto done = co_await outbox.run_relay(pub);
        (void)co_await pub.close();
        co_return done;
    }());
    if (!r) {
        std::fprintf(stderr, "relay-pg: %s\n", r.error().message().c_str());
        return 1;
    }
    return 0;
}

#endif

// ---- consumer ------------------------------------------------------------------------------

struct parsed {
    std::int64_t id = 0;
    std::string key;
    std::int64_t seq = 0;
};

auto parse(const std::string& payload) -> parsed {
    const auto a = payload.find(':');
    const auto b = payload.rfind(':');
    return {std::stoll(payload.substr(0, a)), payload.substr(a + 1, b - a - 1),
            std::stoll(payload.substr(b + 1))};
}

void log_row(sqlite3* db, const char* table, const parsed& p, std::uint32_t attempt) {
    const std::string sql =
        std::string("INSERT INTO ") + table + " (biz, key, seq, attempt) VALUES (?, ?, ?, ?)";
    stmt ins(db, sql.c_str());
    sqlite3_bind_int64(ins.s, 1, p.id);
    sqlite3_bind_text(ins.s, 2, p.key.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(ins.s, 3, p.seq);
    sqlite3_bind_int64(ins.s, 4, attempt);
    if (ins.step() != SQLITE_DONE) {
        throw std::runtime_error(std::string("log: ") + sqlite3_errmsg(db));
    }
}

enum class handled { processed, duplicate, early };

/// The consumer's delivery log (--log): see the top of this file. Without a path, a no-op.
class delivery_log {
public:
    explicit delivery_log(const std::string& path) {
        if (path.empty()) {
            return;
        }
        fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd_ < 0) {
            throw std::runtime_error("cannot open " + path);
        }
        // A line torn by the previous consumer's SIGKILL is ended, so that ours start clean.
        const int rd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        const off_t size = rd >= 0 ? ::lseek(rd, 0, SEEK_END) : 0;
        char last = '\n';
        if (size > 0 && ::pread(rd, &last, 1, size - 1) == 1 && last != '\n') {
            write_all("\n");
        }
        if (rd >= 0) {
            ::close(rd);
        }
    }
    delivery_log(const delivery_log&) = delete;
    auto operator=(const delivery_log&) -> delivery_log& = delete;
    ~delivery_log() {
        if (fd_ >= 0) {
            ::close(fd_);
        }
    }
    void record(char kind, const parsed& p, const std::string& id, std::uint32_t attempt) {
        if (fd_ < 0) {
            return;
        }
        write_all(std::string(1, kind) + " " + std::to_string(p.id) + " " + p.key + " " +
                  std::to_string(p.seq) + " " + id + " " + std::to_string(attempt) + " .\n");
    }

private:
    void write_all(const std::string& line) {
        // One write(2): on an O_APPEND file a line lands whole or, killed, torn at its end.
        if (::write(fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
            throw std::runtime_error("delivery log: short write");
        }
    }
    int fd_ = -1;
};

/// One delivery, blocking (run on the blocking pool).
auto handle_one(sqlite3* db, sqlite_inbox* inbox, delivery_log& dlog, delivery d) -> handled {
    const parsed p = parse(d.message().payload);
    const std::uint32_t attempt = d.attempt();
    const std::string id = d.message().id.to_string();
    dlog.record('D', p, id, attempt);
    sqlite_txn txn{db};
    if (inbox == nullptr) {  // the control: every delivery handled, acked after commit
        log_row(db, "received", p, attempt);
        txn.on_commit([d]() mutable { (void)d.ack(); });
        txn.commit().value();
        dlog.record('P', p, id, attempt);
        return handled::processed;
    }
    bool early = false;
    auto r = inbox->handle(txn, d, [&](sqlite_txn& t, const envelope&) -> weft::result<void> {
        stmt q(t.db(), "SELECT last FROM progress WHERE key = ?");
        sqlite3_bind_text(q.s, 1, p.key.c_str(), -1, SQLITE_TRANSIENT);
        const std::int64_t last = q.step() == SQLITE_ROW ? sqlite3_column_int64(q.s, 0) : 0;
        if (p.seq > last + 1) {
            early = true;
            return std::make_error_code(std::errc::resource_unavailable_try_again);
        }
        log_row(t.db(), "received", p, attempt);
        stmt up(t.db(), "INSERT OR REPLACE INTO progress (key, last) VALUES (?, ?)");
        sqlite3_bind_text(up.s, 1, p.key.c_str(), -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(up.s, 2, std::max(last, p.seq));
        if (up.step() != SQLITE_DONE) {
            return std::make_error_code(std::errc::io_error);
        }
        return {};
    });
    if (!r) {
        txn.rollback();
        if (early) {
            log_row(db, "early", p, attempt);
            dlog.record('R', p, id, attempt);
            (void)d.nack(100ms);  // its predecessor is still on its way (a redelivery)
            return handled::early;
        }
        throw std::runtime_error("handle: " + r.error().message());
    }
    txn.commit().value();
    if (*r == inbox_outcome::duplicate) {
        log_row(db, "dups", p, attempt);
        dlog.record('U', p, id, attempt);
        return handled::duplicate;
    }
    dlog.record('P', p, id, attempt);
    return handled::processed;
}

auto consume(const std::string& path,
             const std::string& url,
             const std::string& topic,
             const std::string& storage,
             bool use_inbox,
             const std::string& log_path) -> int {
    delivery_log dlog{log_path};
    sqlite3* db = open_db(path);
    for (const char* t : {"received", "early", "dups"}) {
        exec(db, std::string("CREATE TABLE IF NOT EXISTS ") + t +
                     " (n INTEGER PRIMARY KEY AUTOINCREMENT, biz INTEGER NOT NULL, key TEXT NOT "
                     "NULL, seq INTEGER NOT NULL, attempt INTEGER NOT NULL)");
    }
    exec(db, "CREATE TABLE IF NOT EXISTS progress (key TEXT PRIMARY KEY, last INTEGER NOT NULL)");
    sqlite_inbox inbox{db};
    auto broker = connect(url, topic, storage);
    weft::runtime rt{weft::io_runtime_options(2)};
    return rt.block_on([&]() -> weft::task<int> {
        subscriber sub{*broker, {.ack_wait = 1'000ms}};
        auto s = co_await sub.subscribe(topic, "chaos");
        // The broker may be restarting, or slow to answer on a loaded machine (a JetStream
        // consumer's creation once timed out 3 s into a CI-sized run): retried, as connect() is.
        for (int attempt = 1; !s && attempt < 50; ++attempt) {
            std::fprintf(stderr, "consume: subscribe: %s (retrying)\n",
                         s.error().message().c_str());
            (void)co_await weft::sleep_for(200ms);
            s = co_await sub.subscribe(topic, "chaos");
        }
        if (!s) {
            std::fprintf(stderr, "consume: subscribe: %s\n", s.error().message().c_str());
            co_return 3;
        }
        for (;;) {
            auto d = co_await s->next();
            if (!d) {
                std::fprintf(stderr, "consume: next: %s\n", d.error().message().c_str());
                co_return 3;
            }
            sqlite_inbox* ib = use_inbox ? &inbox : nullptr;
            // Named first: with the capturing lambda written inside the co_await expression,
            // the g++ 12 build dropped the subscription's last reference to its consumer after
            // the first delivery (the next next() said subscription_closed); named, it does not.
            auto job = [db, ib, &dlog, dv = std::move(*d)]() mutable {
                return handle_one(db, ib, dlog, std::move(dv));
            };
            auto h = co_await weft::spawn_blocking(std::move(job));
            (void)h;
        }
    }());
}

}  // namespace

int main(int argc, char** argv) {
    const std::vector<std::string> a(argv + 1, argv + argc);
    auto has = [&](std::string_view flag) {
        for (const auto& s : a) {
            if (s == flag) {
                return true;
            }
        }
        return false;
    };
    try {
        if (a.size() >= 6 && a[0] == "produce") {
            return produce(a[1], std::stoi(a[2]), std::stoi(a[3]), a[4], std::stoi(a[5]));
        }
        if (a.size() >= 5 && a[0] == "relay") {
            return relay(a[1], a[2], a[3], a[4], has("--fresh-ids"));
        }
#if defined(WEFT_CHAOS_PG)
        if (a.size() >= 7 && a[0] == "produce-pg") {
            return produce_pg(a[1], a[2], std::stoi(a[3]), std::stoi(a[4]), a[5], std::stoi(a[6]));
        }
        if (a.size() >= 6 && a[0] == "relay-pg") {
            return relay_pg(a[1], a[2], a[3], a[4], a[5], has("--fresh-ids"));
        }
#endif
        if (a.size() >= 5 && a[0] == "consume") {
            std::string log_path;
            for (std::size_t i = 5; i + 1 < a.size(); ++i) {
                if (a[i] == "--log") {
                    log_path = a[i + 1];
                }
            }
            return consume(a[1], a[2], a[3], a[4], !has("--no-inbox"), log_path);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "chaos_node %s: %s\n", a.empty() ? "" : a[0].c_str(), e.what());
        return 2;
    }
    std::fprintf(stderr,
                 "usage: chaos_node produce <db> <events> <keys> <topic> <pause_ms>\n"
                 "       chaos_node relay <db> <broker_url> <topic> file|memory [--fresh-ids]\n"
                 "       chaos_node consume <db> <broker_url> <topic> file|memory [--no-inbox] "
                 "[--log <file>]\n"
                 "       chaos_node produce-pg <conninfo> <prefix> <events> <keys> <topic> "
                 "<pause_ms>\n"
                 "       chaos_node relay-pg <conninfo> <prefix> <broker_url> <topic> file|memory "
                 "[--fresh-ids]\n");
    return 64;
}
