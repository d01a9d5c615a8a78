#include "weft/bus/sqlite_outbox.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "relay_counters.hpp"
#include "relay_driver.hpp"
#include "relay_faults.hpp"
#include "relay_row.hpp"
#include "relay_stop.hpp"
#include "sql_identifier.hpp"
#include "sqlite_statement.hpp"
#include "weft/bus/envelope_codec.hpp"
#include "weft/bus/errc.hpp"
#include "weft/core/stop.hpp"
#include "weft/sched/spawn_blocking.hpp"

namespace weft::bus {

// Why the blocking pool: SQLite has no non-blocking API. Any call may wait for the disk (fsync
// at commit) or for another connection's lock (busy_timeout sleeps inside the library), so the
// relay makes every SQLite call through spawn_blocking on its own connection, never on a
// runtime worker. One call at a time (the relay is one sequence of awaits), so the connection
// is never used by two threads at once.

struct sqlite_outbox::state {
    std::string path;
    sqlite_outbox_options options;
    sqlite3* db = nullptr;  // the relay's connection; used by one blocking call at a time
    std::string insert_sql;
    std::string read_sql;
    std::string delete_sql;
    std::string dead_sql;
    std::string count_sql;
    std::string count_dead_sql;
    detail::relay_counters counters;
    event notified{event::reset_mode::automatic};
    detail::relay_stop stop;
    // The relay's statements on `db`, prepared at first use and kept (SQLite's parser and code
    // generator run on every prepare); used by one blocking call at a time, as `db` is.
    std::unique_ptr<detail::sqlite_statement> read_q;
    std::unique_ptr<detail::sqlite_statement> delete_q;
    std::unique_ptr<detail::sqlite_statement> dead_q;

    // stage()'s INSERT, prepared once per caller connection (preparing it was about two thirds
    // of a staged event's instructions): the most recently used last, at most
    // max_stage_statements. A statement is taken out while a stage() uses it (a connection is
    // used by one transaction at a time, so no two stage() calls want the same one) and put
    // back after. Keeping a statement keeps its connection from closing: sqlite3_close_v2
    // leaves the connection a zombie until the statement is finalized (evicted, released or
    // at destruction), so no cached statement ever outlives its connection's memory and no new
    // connection can take a cached one's address; sqlite3_close (v1) fails with SQLITE_BUSY
    // unless release(db) came first. The bound limits what such zombies hold.
    static constexpr std::size_t max_stage_statements = 8;
    struct stage_statement {
        sqlite3* db = nullptr;
        std::unique_ptr<detail::sqlite_statement> q;
    };
    std::mutex stage_mu;
    std::vector<stage_statement> stage_statements;  // guarded by stage_mu

    ~state() {
        stage_statements.clear();
        read_q.reset();
        delete_q.reset();
        dead_q.reset();
        sqlite3_close_v2(db);
    }
};

namespace {

void check(int rc, sqlite3* db, const char* what) {
    if (rc != 0) {
        throw std::system_error(detail::sqlite_error(rc),
                                std::string("weft::bus::sqlite_outbox: ") + what + ": " +
                                    (db != nullptr ? sqlite3_errmsg(db) : ""));
    }
}

// Migrations, applied in order inside one transaction; the version reached is recorded in
// weft_schema_versions under the table's name. Append; never edit a released step.
auto migrations(const std::string& name) -> std::vector<std::string> {
    const std::string t = detail::quoted(name);
    const std::string dead = detail::quoted(name + "_dead");
    return {
        // 1: the outbox and its dead letters. The relay reads `WHERE seq > ? ORDER BY seq`:
        // `seq` is the rowid, so the table's own B-tree is the index for it (a separate index
        // would duplicate it). AUTOINCREMENT: a seq is never reused after the rows above it
        // were deleted, so the relay's cursor never skips a new row.
        "CREATE TABLE " + t +
            " (seq INTEGER PRIMARY KEY AUTOINCREMENT, id BLOB NOT NULL, topic TEXT NOT NULL, "
            "key TEXT NOT NULL, envelope BLOB NOT NULL, staged_ms INTEGER NOT NULL);"
            "CREATE TABLE " +
            dead +
            " (seq INTEGER PRIMARY KEY, id BLOB NOT NULL, topic TEXT NOT NULL, "
            "key TEXT NOT NULL, envelope BLOB NOT NULL, staged_ms INTEGER NOT NULL, "
            "failed_ms INTEGER NOT NULL, reason TEXT NOT NULL);",
    };
}

void migrate(sqlite3* db, const std::string& table) {
    check(detail::sqlite_exec(db,
                              "CREATE TABLE IF NOT EXISTS weft_schema_versions "
                              "(name TEXT PRIMARY KEY, version INTEGER NOT NULL)"),
          db, "schema versions");
    check(detail::sqlite_exec(db, "BEGIN IMMEDIATE"), db, "BEGIN");
    try {
        std::int64_t version = 0;
        {
            detail::sqlite_statement q(db,
                                       "SELECT version FROM weft_schema_versions WHERE name = ?");
            check(q.error().value(), db, "schema version");
            q.bind_text(1, table);
            if (q.step() == SQLITE_ROW) {
                version = q.column_int(0);
            }
        }
        const auto steps = migrations(table);
        for (auto v = static_cast<std::size_t>(version); v < steps.size(); ++v) {
            check(detail::sqlite_exec(db, steps[v].c_str()), db, "migration");
        }
        detail::sqlite_statement up(
            db, "INSERT OR REPLACE INTO weft_schema_versions (name, version) VALUES (?, ?)");
        up.bind_text(1, table);
        up.bind(2, static_cast<std::int64_t>(steps.size()));
        const int rc = up.step();
        check(rc == SQLITE_DONE ? 0 : rc, db, "schema version");
        check(detail::sqlite_exec(db, "COMMIT"), db, "COMMIT");
    } catch (...) {
        (void)detail::sqlite_exec(db, "ROLLBACK");
        throw;
    }
}

/// The exclusive relay lock: an flock on `<path>-relay.lock`, held while the fd is open.
class relay_lock {
public:
    static auto take(const std::string& path) -> result<relay_lock> {
        const std::string name = path + "-relay.lock";
        const int fd = ::open(name.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
            return std::error_code(errno, std::system_category());
        }
        if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
            const int e = errno;
            ::close(fd);
            if (e == EWOULDBLOCK) {
                return make_error_code(bus_errc::relay_active);
            }
            return std::error_code(e, std::system_category());
        }
        return relay_lock{fd};
    }
    relay_lock(relay_lock&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    relay_lock(const relay_lock&) = delete;
    auto operator=(const relay_lock&) -> relay_lock& = delete;
    auto operator=(relay_lock&&) -> relay_lock& = delete;
    ~relay_lock() {
        if (fd_ >= 0) {
            ::close(fd_);  // releases the flock
        }
    }

private:
    explicit relay_lock(int fd) noexcept : fd_(fd) {}
    int fd_;
};

/// Lends `slot`'s statement (prepared on the relay's connection at its first use) for one
/// blocking call and resets it, bindings cleared, when the call is done. `q` is nullptr and
/// `error` set when it cannot be prepared (then it is prepared again next time).
struct kept_statement {
    kept_statement(std::unique_ptr<detail::sqlite_statement>& slot,
                   sqlite3* db,
                   const std::string& sql) {
        if (!slot) {
            auto st = std::make_unique<detail::sqlite_statement>(db, sql);
            error = st->error();
            if (error) {
                return;
            }
            slot = std::move(st);
        }
        q = slot.get();
    }
    kept_statement(const kept_statement&) = delete;
    auto operator=(const kept_statement&) -> kept_statement& = delete;
    ~kept_statement() {
        if (q != nullptr) {
            q->reset();  // ends its read of the table (a stepped statement holds a snapshot)
        }
    }
    detail::sqlite_statement* q = nullptr;
    std::error_code error;
};

/// Reads the next batch after `after` (relay_row::load: the stored encoding kept, to be
/// forwarded as it is).
auto read_batch(sqlite_outbox::state& s, std::int64_t after)
    -> result<std::vector<detail::relay_row>> {
    kept_statement kept(s.read_q, s.db, s.read_sql);
    if (kept.error) {
        return kept.error;
    }
    detail::sqlite_statement& q = *kept.q;
    q.bind(1, after);
    q.bind(2, static_cast<std::int64_t>(std::max<std::uint32_t>(1, s.options.relay.batch_size)));
    std::vector<detail::relay_row> rows;
    rows.reserve(std::max<std::uint32_t>(1, s.options.relay.batch_size));
    for (;;) {
        const int rc = q.step();
        if (rc == SQLITE_DONE) {
            break;
        }
        if (rc != SQLITE_ROW) {
            return detail::sqlite_error(rc);
        }
        detail::relay_row row;
        row.seq = q.column_int(0);
        row.staged_ms = q.column_int(2);
        row.load(q.column_bytes(1));
        rows.push_back(std::move(row));
    }
    return rows;
}

/// Deletes the published rows and moves the dead ones, in one transaction. The finished seqs
/// are deleted as runs of consecutive numbers (`seq BETWEEN a AND b`, one statement per run
/// rather than per row): every number in such a run is a finished row, so no other row can be
/// in it.
auto finish_batch(sqlite_outbox::state& s, const std::vector<detail::relay_row>& rows)
    -> result<void> {
    sqlite3* db = s.db;
    if (const int rc = detail::sqlite_exec(db, "BEGIN IMMEDIATE"); rc != 0) {
        return detail::sqlite_error(rc);
    }
    auto fail = [&](int rc) -> result<void> {
        (void)detail::sqlite_exec(db, "ROLLBACK");
        return detail::sqlite_error(rc);
    };
    kept_statement kept_del(s.delete_q, db, s.delete_sql);
    kept_statement kept_dead(s.dead_q, db, s.dead_sql);
    if (kept_del.error || kept_dead.error) {
        (void)detail::sqlite_exec(db, "ROLLBACK");
        return kept_del.error ? kept_del.error : kept_dead.error;
    }
    detail::sqlite_statement& del = *kept_del.q;
    detail::sqlite_statement& dead = *kept_dead.q;
    const std::int64_t now = detail::now_ms();
    std::vector<std::int64_t> seqs;
    seqs.reserve(rows.size());
    for (const auto& row : rows) {
        if (row.outcome == detail::relay_row::fate::pending) {
            continue;
        }
        seqs.push_back(row.seq);
        if (row.outcome == detail::relay_row::fate::dead) {
            dead.bind(1, now);
            dead.bind_text(2, row.reason);
            dead.bind(3, row.seq);
            if (const int rc = dead.step(); rc != SQLITE_DONE) {
                return fail(rc);
            }
            dead.reset();
        }
    }
    std::sort(seqs.begin(), seqs.end());
    auto delete_run = [&](std::int64_t first, std::int64_t last) -> int {
        del.bind(1, first);
        del.bind(2, last);
        const int rc = del.step();
        del.reset();
        return rc == SQLITE_DONE ? 0 : rc;
    };
    // The "mid_commit" crash point comes once half the finished rows are deleted (a run ends
    // there).
    const std::size_t half = seqs.size() / 2;
    std::size_t i = 0;
    while (i < seqs.size()) {
        if (i == half) {
            detail::crash_point("mid_commit");
        }
        std::size_t j = i + 1;
        while (j < seqs.size() && seqs[j] == seqs[j - 1] + 1 && j != half) {
            ++j;
        }
        if (const int rc = delete_run(seqs[i], seqs[j - 1]); rc != 0) {
            return fail(rc);
        }
        i = j;
    }
    if (const int rc = detail::sqlite_exec(db, "COMMIT"); rc != 0) {
        return fail(rc);
    }
    return {};
}

/// Counts through a connection of its own, so it may run while the relay uses its connection.
auto count(const std::string& path, const std::string& sql) -> result<std::uint64_t> {
    sqlite3* db = nullptr;
    const int orc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
    struct closer {
        sqlite3* db;
        ~closer() { sqlite3_close_v2(db); }
    } close_db{db};
    if (orc != SQLITE_OK) {
        return detail::sqlite_error(orc);
    }
    sqlite3_busy_timeout(db, 5'000);
    detail::sqlite_statement q(db, sql);
    if (auto e = q.error()) {
        return e;
    }
    const int rc = q.step();
    if (rc != SQLITE_ROW) {
        return detail::sqlite_error(rc);
    }
    return static_cast<std::uint64_t>(q.column_int(0));
}

}  // namespace

sqlite_outbox::sqlite_outbox(std::string path, sqlite_outbox_options options)
    : s_(std::make_unique<state>()) {
    s_->path = std::move(path);
    s_->options = std::move(options);
    const std::string& name =
        detail::checked_table_name(s_->options.table, "weft::bus::sqlite_outbox");
    const std::string t = detail::quoted(name);
    const std::string dead = detail::quoted(name + "_dead");
    s_->insert_sql =
        "INSERT INTO " + t + " (id, topic, key, envelope, staged_ms) VALUES (?, ?, ?, ?, ?)";
    s_->read_sql =
        "SELECT seq, envelope, staged_ms FROM " + t + " WHERE seq > ? ORDER BY seq LIMIT ?";
    s_->delete_sql = "DELETE FROM " + t + " WHERE seq BETWEEN ? AND ?";
    s_->dead_sql = "INSERT INTO " + dead +
                   " (seq, id, topic, key, envelope, staged_ms, failed_ms, reason) "
                   "SELECT seq, id, topic, key, envelope, staged_ms, ?, ? FROM " +
                   t + " WHERE seq = ?";
    s_->count_sql = "SELECT count(*) FROM " + t;
    s_->count_dead_sql = "SELECT count(*) FROM " + dead;

    // NOMUTEX: one blocking call at a time uses the connection (see above), so SQLite's
    // per-connection mutex, taken by every step, bind and column call, guards nothing here.
    const int rc =
        sqlite3_open_v2(s_->path.c_str(), &s_->db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
    check(rc == SQLITE_OK ? 0 : rc, s_->db, "open");
    sqlite3_extended_result_codes(s_->db, 1);
    sqlite3_busy_timeout(s_->db, static_cast<int>(s_->options.busy_timeout.count()));
    if (s_->options.wal) {
        check(detail::sqlite_enable_wal(s_->db, s_->options.busy_timeout), s_->db, "WAL");
    }
    check(detail::sqlite_exec(s_->db, s_->options.secure_delete ? "PRAGMA secure_delete=ON"
                                                                : "PRAGMA secure_delete=OFF"),
          s_->db, "secure_delete");
    migrate(s_->db, name);
}

sqlite_outbox::~sqlite_outbox() = default;

auto sqlite_outbox::stage(sqlite_txn& txn, envelope env) -> result<message_id> {
    if (!txn.open()) {
        return std::errc::invalid_argument;
    }
    if (env.id.is_nil()) {
        env.id = message_id::generate();
    }
    if (env.time.time_since_epoch().count() == 0) {
        env.time = std::chrono::system_clock::now();
    }
    thread_local std::string bytes;  // reused: SQLite copies what it binds (SQLITE_TRANSIENT)
    bytes.clear();
    encode(env, bytes);
    state* s = s_.get();
    sqlite3* db = txn.db();
    std::unique_ptr<detail::sqlite_statement> ins;
    {
        std::lock_guard lock(s->stage_mu);
        auto& kept = s->stage_statements;
        auto it = std::find_if(kept.begin(), kept.end(),
                               [db](const state::stage_statement& k) { return k.db == db; });
        if (it != kept.end()) {
            ins = std::move(it->q);
            kept.erase(it);
        }
    }
    if (!ins) {
        ins = std::make_unique<detail::sqlite_statement>(db, s->insert_sql);
        if (auto e = ins->error()) {
            return e;
        }
    }
    ins->bind_blob(1, env.id.bytes.data(), env.id.bytes.size());
    ins->bind_text(2, env.topic);
    ins->bind_text(3, env.key);
    ins->bind_blob(4, bytes.data(), bytes.size());
    ins->bind(5, detail::now_ms());
    const int rc = ins->step();
    ins->reset();
    {
        std::lock_guard lock(s->stage_mu);
        auto& kept = s->stage_statements;
        if (kept.size() == state::max_stage_statements) {
            kept.erase(kept.begin());  // the least recently used: finalized
        }
        kept.push_back({db, std::move(ins)});
    }
    if (rc != SQLITE_DONE) {
        return detail::sqlite_error(rc);
    }
    txn.on_commit([s] {
        s->counters.staged.fetch_add(1, std::memory_order_relaxed);
        s->notified.set();
    });
    return env.id;
}

void sqlite_outbox::release(sqlite3* db) noexcept {
    std::lock_guard lock(s_->stage_mu);
    std::erase_if(s_->stage_statements,
                  [db](const state::stage_statement& k) { return k.db == db; });
}

void sqlite_outbox::notify() noexcept { s_->notified.set(); }

void sqlite_outbox::stop_relay() noexcept {
    s_->stop.request();
    s_->notified.set();
}

auto sqlite_outbox::metrics() const noexcept -> outbox_metrics {
    return detail::snapshot(s_->counters);
}

auto sqlite_outbox::pending_rows() -> result<std::uint64_t> {
    return count(s_->path, s_->count_sql);
}

auto sqlite_outbox::dead_letter_rows() -> result<std::uint64_t> {
    return count(s_->path, s_->count_dead_sql);
}

namespace {

/// The SQLite side of the relay (detail::relay_store): a round is one blocking call on the
/// relay's connection that deletes (and dead-letters) what the pipeline finished and reads the
/// next batch after `cursor_`. Every row at or below `cursor_` is held by the relay or finished
/// (deleted, or dead-lettered): rows are never claimed twice, and a parked key's newer rows are
/// read in seq order behind it (SQLite's claim cannot leave a key out cheaply; the pipeline
/// queues them). Nothing is ever lost with a failed round (SQLITE_BUSY past busy_timeout, or
/// worse): the relay owns the file through its flock, and the round is tried again.
class sqlite_relay_store final : public detail::relay_store {
public:
    explicit sqlite_relay_store(sqlite_outbox::state& s) : s_(s) {}

    auto prepare(detail::relay_pipeline& /*pipe*/,
                 const std::vector<detail::relay_row>& /*unfinished*/,
                 bool /*stopping*/) -> task<result<void>> override {
        co_return result<void>{};
    }
    [[nodiscard]] auto can_claim() const -> bool override { return true; }
    auto round(const std::vector<detail::relay_row>& finished,
               bool claim,
               const detail::relay_pipeline& /*pipe*/)
        -> task<result<std::vector<detail::relay_row>>> override {
        sqlite_outbox::state& s = s_;
        const std::int64_t after = cursor_;
        auto r = co_await spawn_blocking(
            [&s, &finished, claim, after]() -> result<std::vector<detail::relay_row>> {
                if (!finished.empty()) {
                    if (auto done = finish_batch(s, finished); !done) {
                        return done.error();
                    }
                }
                if (!claim) {
                    return std::vector<detail::relay_row>{};
                }
                return read_batch(s, after);
            });
        if (!r) {
            co_return r.error();  // cancelled before it ran
        }
        if (*r && !(*r)->empty()) {
            cursor_ = (*r)->back().seq;
        }
        co_return std::move(*r);
    }
    auto lost() -> bool override { return false; }
    auto wait_idle(std::chrono::milliseconds d) -> task<void> override {
        co_await detail::wait_for_event(s_.notified, d);
    }
    [[nodiscard]] auto max_wait() const -> std::chrono::milliseconds override {
        return std::chrono::milliseconds::max();
    }
    void end() noexcept override {}

private:
    sqlite_outbox::state& s_;
    std::int64_t cursor_ = 0;
};

}  // namespace

auto sqlite_outbox::run_relay(publisher& pub) -> task<result<void>> {
    auto lock = relay_lock::take(s_->path);
    if (!lock) {
        co_return lock.error();
    }
    state& s = *s_;
    sqlite_relay_store store{s};
    auto r =
        co_await detail::run_relay(store, pub, s.options.relay, s.counters, s.stop, s.notified);
    s.stop.clear();  // this run's stop (see relay_stop)
    co_return r;
}

}  // namespace weft::bus
