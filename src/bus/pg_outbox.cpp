#include "weft/bus/pg_outbox.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pg_outbox_claim.hpp"
#include "relay_batch.hpp"
#include "sql_identifier.hpp"
#include "weft/bus/envelope_codec.hpp"
#include "weft/core/stop.hpp"
#include "weft/core/when_all.hpp"
#include "weft/core/when_any.hpp"
#include "weft/sched/timer.hpp"
#include "weft/sync/event.hpp"

namespace weft::bus {

struct pg_outbox::state {
    pg_outbox_options options;
    std::int32_t lock_class = 0;  // the advisory locks' first key: the table's hash
    detail::relay_counters counters;
    event notified{event::reset_mode::automatic};
    detail::relay_stop stop;
    std::atomic<std::uint32_t> owned{0};  // relaxed: a statistic
};

namespace {

auto fnv1a(std::string_view s) noexcept -> std::uint32_t {
    std::uint32_t h = 2166136261U;
    for (const char c : s) {
        h = (h ^ static_cast<unsigned char>(c)) * 16777619U;
    }
    return h;
}

auto migrations(const std::string& name) -> std::vector<std::string> {
    const std::string t = detail::quoted(name);
    return {
        // 1: the relay reads `WHERE part = ANY(owned) ORDER BY seq`: the (part, seq) index.
        "CREATE TABLE " + t +
            " (seq bigserial PRIMARY KEY, id bytea NOT NULL, topic text NOT NULL, key text NOT "
            "NULL, part integer NOT NULL, envelope bytea NOT NULL, staged_at timestamptz NOT "
            "NULL DEFAULT clock_timestamp());"
            "CREATE INDEX " +
            detail::quoted(name + "_part_seq") + " ON " + t +
            " (part, seq);"
            "CREATE TABLE " +
            detail::quoted(name + "_dead") +
            " (seq bigint PRIMARY KEY, id bytea NOT NULL, topic text NOT NULL, key text "
            "NOT NULL, envelope bytea NOT NULL, staged_at timestamptz NOT NULL, failed_at "
            "timestamptz NOT NULL DEFAULT now(), reason text NOT NULL);",
    };
}

/// A text[] literal: every element double-quoted, `"` and `\` escaped with a backslash.
auto text_array(const std::vector<std::string>& v) -> std::string {
    std::string s = "{";
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (i != 0) {
            s += ',';
        }
        s += '"';
        for (const char c : v[i]) {
            if (c == '"' || c == '\\') {
                s += '\\';
            }
            s += c;
        }
        s += '"';
    }
    return s + "}";
}

auto join_ints(const std::vector<std::int64_t>& v) -> std::string {
    std::string s = "{";
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (i != 0) {
            s += ',';
        }
        s += std::to_string(v[i]);
    }
    return s + "}";
}

/// `seqs` as an int8multirange literal of inclusive runs, "{[1,4],[9,9]}": the rows a
/// windowed relay holds are mostly a few runs of consecutive seqs, so the claim's test against
/// them is a search among a few ranges, where a bigint[] of every seq (up to 4 batches) was
/// parsed element by element on every claim.
auto seq_ranges(std::vector<std::int64_t> seqs) -> std::string {
    std::sort(seqs.begin(), seqs.end());
    std::string s = "{";
    std::size_t i = 0;
    while (i < seqs.size()) {
        std::size_t j = i + 1;
        while (j < seqs.size() && seqs[j] <= seqs[j - 1] + 1) {
            ++j;
        }
        if (i != 0) {
            s += ',';
        }
        s += '[' + std::to_string(seqs[i]) + ',' + std::to_string(seqs[j - 1]) + ']';
        i = j;
    }
    return s + "}";
}

auto text_param(std::string v) -> pg_param { return pg_param{std::move(v), false}; }

}  // namespace

auto detail::pg_claim(const std::string& table,
                      const std::vector<std::int64_t>& owned,
                      std::uint32_t batch_size,
                      const std::vector<std::string>& skip_keys,
                      const std::vector<std::int64_t>* held) -> pg_statement {
    std::vector<pg_param> args;
    args.push_back(text_param(join_ints(owned)));
    args.push_back(text_param(std::to_string(std::max<std::uint32_t>(1, batch_size))));
    args.push_back(text_param(text_array(skip_keys)));
    std::string held_clause;
    if (held != nullptr && !held->empty()) {
        args.push_back(text_param(seq_ranges(*held)));
        held_clause = " AND NOT ($4::int8multirange @> seq)";
    }
    return {"SELECT seq, envelope, (extract(epoch from staged_at) * 1000)::bigint, part FROM " +
                detail::quoted(table) + " WHERE part = ANY($1::int[]) AND key <> ALL($3::text[])" +
                held_clause + " ORDER BY seq LIMIT $2 FOR UPDATE SKIP LOCKED",
            std::move(args), true};
}

pg_outbox::pg_outbox(pg_outbox_options options) : s_(std::make_unique<state>()) {
    s_->options = std::move(options);
    detail::checked_table_name(s_->options.table, "weft::bus::pg_outbox");
    if (s_->options.partitions == 0) {
        s_->options.partitions = 1;
    }
    s_->lock_class = static_cast<std::int32_t>(fnv1a(s_->options.table) & 0x7fffffffU);
}

pg_outbox::~pg_outbox() = default;

auto pg_outbox::partition_of(std::string_view key) const noexcept -> std::uint32_t {
    return fnv1a(key) % s_->options.partitions;
}

auto pg_outbox::migrate(pg_connection& conn) -> task<result<void>> {
    const std::string& t = s_->options.table;
    auto b = co_await conn.query("BEGIN");
    if (!b) {
        co_return b.error();
    }
    std::vector<std::string> steps = migrations(t);
    std::vector<std::string> sql{
        "SELECT pg_advisory_xact_lock(hashtext('weft_schema_versions'))",
        "CREATE TABLE IF NOT EXISTS weft_schema_versions (name text PRIMARY KEY, version "
        "integer NOT NULL)"};
    for (auto& q : sql) {
        auto r = co_await conn.query(q);
        if (!r) {
            (void)co_await conn.query("ROLLBACK");
            co_return r.error();
        }
    }
    std::vector<pg_param> name;
    name.push_back(text_param(t));
    auto v = co_await conn.query("SELECT version FROM weft_schema_versions WHERE name = $1",
                                 std::move(name));
    if (!v) {
        (void)co_await conn.query("ROLLBACK");
        co_return v.error();
    }
    std::size_t version = v->size() == 0 ? 0 : std::stoul(std::string(v->text(0, 0)));
    for (; version < steps.size(); ++version) {
        auto r = co_await conn.query(steps[version]);
        if (!r) {
            (void)co_await conn.query("ROLLBACK");
            co_return r.error();
        }
    }
    std::vector<pg_param> up;
    up.push_back(text_param(t));
    up.push_back(text_param(std::to_string(steps.size())));
    auto u = co_await conn.query(
        "INSERT INTO weft_schema_versions (name, version) VALUES ($1, $2) "
        "ON CONFLICT (name) DO UPDATE SET version = EXCLUDED.version",
        std::move(up));
    if (!u) {
        (void)co_await conn.query("ROLLBACK");
        co_return u.error();
    }
    auto c = co_await conn.query("COMMIT");
    if (!c) {
        co_return c.error();
    }
    co_return result<void>{};
}

auto pg_outbox::stage(pg_connection& conn, envelope env) -> task<result<message_id>> {
    if (env.id.is_nil()) {
        env.id = message_id::generate();
    }
    if (env.time.time_since_epoch().count() == 0) {
        env.time = std::chrono::system_clock::now();
    }
    std::vector<pg_param> p;
    p.push_back(pg_param{
        std::string(reinterpret_cast<const char*>(env.id.bytes.data()), env.id.bytes.size()),
        true});
    p.push_back(text_param(env.topic));
    p.push_back(text_param(env.key));
    p.push_back(text_param(std::to_string(partition_of(env.key))));
    p.push_back(pg_param{encode(env), true});
    auto r = co_await conn.query("INSERT INTO " + detail::quoted(s_->options.table) +
                                     " (id, topic, key, part, envelope) VALUES ($1, $2, $3, "
                                     "$4, $5)",
                                 std::move(p));
    if (!r) {
        co_return r.error();
    }
    if (s_->options.listen_notify) {
        // Delivered at COMMIT, once per transaction however many events it staged (the server
        // folds equal notifications of one transaction).
        std::vector<pg_param> ch;
        ch.push_back(text_param(s_->options.table + "_wake"));
        auto n = co_await conn.query("SELECT pg_notify($1, '')", std::move(ch));
        if (!n) {
            co_return n.error();
        }
    }
    // Counted when the caller's transaction commits (at once outside a transaction).
    state* s = s_.get();
    conn.on_commit([s] { s->counters.staged.fetch_add(1, std::memory_order_relaxed); });
    co_return env.id;
}

void pg_outbox::notify() noexcept { s_->notified.set(); }

void pg_outbox::stop_relay() noexcept {
    s_->stop.request();
    s_->notified.set();
}

auto pg_outbox::owned_partitions() const noexcept -> std::uint32_t {
    return s_->owned.load(std::memory_order_relaxed);
}

auto pg_outbox::metrics() const noexcept -> outbox_metrics {
    const auto& c = s_->counters;
    outbox_metrics m;
    m.staged = c.staged.load(std::memory_order_relaxed);
    m.published = c.published.load(std::memory_order_relaxed);
    m.retries = c.retries.load(std::memory_order_relaxed);
    m.dead_lettered = c.dead_lettered.load(std::memory_order_relaxed);
    m.idle_waits = c.idle_waits.load(std::memory_order_relaxed);
    m.unacked_per_key_limit = c.window.load(std::memory_order_relaxed);
    m.peak_unacked_per_key = c.peak_unacked_per_key.load(std::memory_order_relaxed);
    m.window_gaps = c.window_gaps.load(std::memory_order_relaxed);
    const std::int64_t oldest = c.oldest_pending_staged_ms.load(std::memory_order_relaxed);
    if (oldest != 0) {
        m.oldest_pending_age =
            std::chrono::milliseconds{std::max<std::int64_t>(0, detail::now_ms() - oldest)};
    }
    return m;
}

namespace {

auto wait_event(event& e) -> task<result<void>> { co_return co_await e.wait(); }

auto wait_notify(pg_connection& c) -> task<result<void>> {
    auto r = co_await c.wait_notification();
    if (!r) {
        co_return r.error();
    }
    co_return result<void>{};
}

/// The idle wait: a notify() in this process, or (listen_notify) a NOTIFY from any commit on
/// the relay's connection, or `d`.
auto wait_idle(pg_outbox::state& s, pg_connection* conn, std::chrono::milliseconds d)
    -> task<void> {
    if (conn == nullptr || !s.options.listen_notify) {
        co_await detail::wait_for_event(s.notified, d);
        co_return;
    }
    auto r = co_await with_timeout(d, when_any(wait_event(s.notified), wait_notify(*conn)));
    (void)r;  // woken, timed out or cancelled: the relay looks at the table next
}

/// One connected relay session: its connection and the partitions it owns (advisory locks
/// that end with the connection), and the keys waiting out a transient failure: their rows are
/// left out of the claim until their back-off is over (all of a key's rows or none, so its
/// order holds), so a retrying key does not hold up the others.
///
/// Rebalancing: `share` is the fair share from the last count of live relays (0: not counted
/// yet in this session); `releasing` the partitions given up but still locked, until the relay
/// holds no row of them (release_drained); `parts` the partition of each row claimed and
/// perhaps still held (pruned as rows leave).
struct relay_session {
    std::unique_ptr<pg_connection> conn;
    std::vector<std::int64_t> owned;
    detail::retry_map deferred;
    std::vector<std::int64_t> releasing;
    std::uint32_t share = 0;
    std::chrono::steady_clock::time_point next_count{};
    bool take_due = true;
    std::unordered_map<std::int64_t, std::int64_t> parts;

    /// The connection is gone: so are its advisory locks (the server drops them with the
    /// session), hence every partition owned or being given up.
    void lose(std::atomic<std::uint32_t>& owned_count) {
        conn.reset();
        owned.clear();
        releasing.clear();
        parts.clear();
        share = 0;
        take_due = true;
        owned_count.store(0, std::memory_order_relaxed);
    }
};

/// The presence key's second half: (lock_class, presence_objid) is held shared by every live
/// relay of the table; partitions are 0 .. partitions-1, never this.
constexpr std::int32_t presence_objid = 2147483647;

/// The condition on pg_locks for the granted advisory lock (lock_class $1, `objid`) in this
/// database (two-int keys: objsubid 2): what the relay count and the partition take both read.
auto advisory_lock_held(std::string_view objid) -> std::string {
    return "locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE "
           "datname = current_database()) AND classid = $1::int::oid AND objsubid = 2 AND objid "
           "= " +
           std::string(objid);
}

/// The keys still in back-off; forgets entries long past (a key that moved to another relay).
auto keys_in_backoff(relay_session& rs, std::chrono::milliseconds max_backoff)
    -> std::vector<std::string> {
    const auto now = std::chrono::steady_clock::now();
    std::vector<std::string> keys;
    for (auto it = rs.deferred.begin(); it != rs.deferred.end();) {
        if (it->second.not_before > now) {
            keys.push_back(it->first);
        } else if (it->second.not_before + 4 * max_backoff < now) {
            it = rs.deferred.erase(it);
            continue;
        }
        ++it;
    }
    return keys;
}

/// The relay's own connection: connected, `synchronous_commit` off unless durable_deletes,
/// `enable_sort`, `enable_seqscan` and `jit` off, listening with listen_notify.
///
/// `enable_sort = off`: the claim (claim_statement) must walk the seq index and stop after a
/// batch, whatever the table's statistics say. Left to its estimates, PostgreSQL 15 plans it on
/// a table without statistics (never analyzed: a new outbox, or one autovacuum has not reached
/// yet) of 10,000 rows as a bitmap scan of every row of the owned partitions and a sort of all
/// of them (the row locks sit between the sort and the LIMIT, so not even a top-N sort): each
/// claim then costs the whole backlog, 7 ms at 10,000 rows against 0.6 ms by the index, and a
/// drain costs backlog^2 / batch rows (at 50,000 rows it chose the index). With sorts off the
/// ordered index scan is the plan; the relay's other statements have no sort to avoid (the
/// partition take's sort of at most `partitions` numbers has no other plan and stays). Only the
/// relay's own session is affected. `enable_seqscan = off` for the batch delete (`seq =
/// ANY($1)`), which the same table's missing statistics made a sequential scan of the whole
/// backlog per batch (about 10 rows read per row deleted at 10,000 rows; by the primary key,
/// one). `jit = off` with them: a plan that keeps a sort carries the
/// planner's disable cost (1e10), far above jit_above_cost, and the server compiled the
/// partition take with LLVM: 130 ms of its CPU for a statement of 0.1 ms. No relay statement
/// runs long enough for JIT to pay.
auto open_session(const pg_outbox::state& s) -> task<result<std::unique_ptr<pg_connection>>> {
    auto c = co_await pg_connection::connect(s.options.conninfo);
    if (!c) {
        co_return c.error();
    }
    std::string settings(detail::pg_relay_planner_settings);
    if (!s.options.durable_deletes) {
        settings += "; SET synchronous_commit = off";
    }
    auto a = co_await (*c)->query(std::move(settings));
    if (!a) {
        co_return a.error();
    }
    // Presence: held as long as the session (a killed relay's goes with its connection);
    // shared, so every relay holds it at once and pg_locks counts them.
    std::vector<pg_param> key;
    key.push_back(text_param(std::to_string(s.lock_class)));
    key.push_back(text_param(std::to_string(presence_objid)));
    auto p =
        co_await (*c)->query("SELECT pg_advisory_lock_shared($1::int, $2::int)", std::move(key));
    if (!p) {
        co_return p.error();
    }
    if (s.options.listen_notify) {
        auto l = co_await (*c)->query("LISTEN " + detail::quoted(s.options.table + "_wake"));
        if (!l) {
            co_return l.error();
        }
    }
    co_return std::move(*c);
}

/// Counts the live relays (the presence lock's holders in this database) at most once per
/// rebalance_interval, sets the fair share, and moves the owned partitions above it to
/// `releasing` (the highest numbered first): from then on no claim reads them. Each count
/// also makes a take due (take_partitions). Errors are the connection's.
auto count_relays(pg_outbox::state& s, relay_session& rs) -> task<result<void>> {
    const auto now = std::chrono::steady_clock::now();
    if (rs.share != 0 && now < rs.next_count) {
        co_return result<void>{};
    }
    rs.next_count = now + s.options.rebalance_interval;
    std::vector<pg_param> key;
    key.push_back(text_param(std::to_string(s.lock_class)));
    key.push_back(text_param(std::to_string(presence_objid)));
    auto r = co_await rs.conn->query(
        "SELECT count(*) FROM pg_locks WHERE " + advisory_lock_held("$2::int::oid"),
        std::move(key));
    if (!r) {
        co_return r.error();
    }
    const std::uint32_t n = s.options.partitions;
    const auto live = std::max<std::uint32_t>(
        1,
        static_cast<std::uint32_t>(std::strtoul(std::string(r->text(0, 0)).c_str(), nullptr, 10)));
    std::uint32_t share = (n + live - 1) / live;
    if (s.options.max_owned_partitions != 0) {
        share = std::min(share, s.options.max_owned_partitions);
    }
    rs.share = std::max<std::uint32_t>(1, share);
    rs.take_due = true;
    if (rs.owned.size() > rs.share) {
        std::sort(rs.owned.begin(), rs.owned.end());
        while (rs.owned.size() > rs.share) {
            rs.releasing.push_back(rs.owned.back());
            rs.owned.pop_back();
        }
        s.owned.store(static_cast<std::uint32_t>(rs.owned.size()), std::memory_order_relaxed);
    }
    co_return result<void>{};
}

/// Unlocks the partitions in `releasing` of which the relay holds no row: `held` are the seqs
/// of every row it holds (claimed and not yet deleted, dead-lettered or dropped), looked up in
/// rs.parts (which is pruned to them). Called between round trips, so a deletion sent is
/// committed. Errors are the connection's.
auto release_drained(pg_outbox::state& s, relay_session& rs, const std::vector<std::int64_t>& held)
    -> task<result<void>> {
    std::unordered_map<std::int64_t, std::int64_t> kept;
    kept.reserve(held.size());
    std::vector<std::int64_t> busy;
    for (const std::int64_t seq : held) {
        auto it = rs.parts.find(seq);
        if (it == rs.parts.end()) {
            continue;  // not claimed in this session (cannot happen): nothing to wait for
        }
        kept.emplace(seq, it->second);
        busy.push_back(it->second);
    }
    rs.parts = std::move(kept);
    if (rs.releasing.empty()) {
        co_return result<void>{};
    }
    std::vector<std::int64_t> still;
    std::vector<pg_statement> unlocks;
    for (const std::int64_t p : rs.releasing) {
        if (std::find(busy.begin(), busy.end(), p) != busy.end()) {
            still.push_back(p);
            continue;
        }
        unlocks.push_back(
            {"SELECT pg_advisory_unlock($1::int, $2::int)",
             {text_param(std::to_string(s.lock_class)), text_param(std::to_string(p))}});
    }
    if (unlocks.empty()) {
        co_return result<void>{};
    }
    auto u = co_await rs.conn->pipeline(std::move(unlocks));
    if (!u) {
        co_return u.error();
    }
    rs.releasing = std::move(still);
    co_return result<void>{};
}

/// Whether release_drained has work: partitions to give up, or `parts` grown well past what a
/// relay holds (pruned then, so its cost per row stays constant).
auto release_due(const pg_outbox::state& s, const relay_session& rs) -> bool {
    const std::size_t batch = std::max<std::uint32_t>(1, s.options.relay.batch_size);
    return !rs.releasing.empty() || rs.parts.size() > 16 * batch;
}

/// Tries to take free partitions, up to the fair share, in one statement: the partitions
/// neither owned nor being released that pg_locks shows free (a MATERIALIZED list, computed
/// before any lock is tried, so a partition this session holds is never locked twice: a session
/// lock taken twice needs two unlocks), then pg_try_advisory_lock on them in order until the
/// LIMIT has enough. So a relay never holds more than its share, not even for a moment (a lock
/// taken and given back could make another relay's one try miss it). Only when a take is due
/// (once per count: a relay under its share does not try on every round trip). Errors are the
/// connection's.
auto take_partitions(pg_outbox::state& s, relay_session& rs) -> task<result<void>> {
    const std::uint32_t n = s.options.partitions;
    const std::uint32_t target = rs.share;
    if (!rs.take_due || rs.owned.size() >= target) {
        co_return result<void>{};
    }
    rs.take_due = false;
    std::vector<std::int64_t> mine = rs.owned;
    mine.insert(mine.end(), rs.releasing.begin(), rs.releasing.end());
    std::vector<pg_param> args;
    args.push_back(text_param(std::to_string(s.lock_class)));
    args.push_back(text_param(std::to_string(n)));
    args.push_back(text_param(join_ints(mine)));
    args.push_back(text_param(std::to_string(target - rs.owned.size())));
    auto r = co_await rs.conn->query(
        "WITH free AS MATERIALIZED (SELECT p FROM generate_series(0, $2::int - 1) p WHERE p <> "
        "ALL($3::int[]) AND NOT EXISTS (SELECT 1 FROM pg_locks WHERE " +
            advisory_lock_held("p::oid") +
            ") ORDER BY p) SELECT p FROM free WHERE pg_try_advisory_lock($1::int, p) LIMIT "
            "$4::int",
        std::move(args));
    if (!r) {
        co_return r.error();
    }
    for (int i = 0; i < r->size(); ++i) {
        rs.owned.push_back(std::strtol(std::string(r->text(i, 0)).c_str(), nullptr, 10));
    }
    s.owned.store(static_cast<std::uint32_t>(rs.owned.size()), std::memory_order_relaxed);
    co_return result<void>{};
}

/// The claim: the oldest rows of the owned partitions, keys in back-off left out, locked FOR
/// UPDATE SKIP LOCKED (inside the caller's transaction), along the seq index (the session has
/// sorts off: open_session); binary results (no hex for the envelope): seq int8, envelope
/// bytea, staged_ms int8.
/// With a window above one (detail::relay_pipeline) the keys left out are the pipeline's
/// parked ones, and the rows it holds are left out too (`held`: their claim's transaction has
/// committed, so no row lock keeps them from this claim; the partition's advisory lock keeps
/// other relays away).
auto claim_statement(pg_outbox::state& s,
                     relay_session& rs,
                     const std::vector<std::string>& skip_keys,
                     const std::vector<std::int64_t>* held = nullptr) -> pg_statement {
    return detail::pg_claim(s.options.table, rs.owned, s.options.relay.batch_size, skip_keys, held);
}

auto be_int64(std::string_view b) -> std::int64_t {
    std::uint64_t v = 0;
    for (const char c : b.substr(0, 8)) {
        v = v << 8 | static_cast<unsigned char>(c);
    }
    return static_cast<std::int64_t>(v);
}

/// The claimed rows. `encoded` (the windowed relay): each keeps the stored encoding, to be
/// forwarded as it is (relay_row::encoded; id, topic and key read out of it, checked as decode
/// checks); else the envelope is decoded whole.
/// Each row's partition goes to `parts` (release_drained waits for the rows of a partition).
auto claimed_rows(const pg_rows& claimed,
                  bool encoded,
                  std::unordered_map<std::int64_t, std::int64_t>& parts)
    -> std::vector<detail::relay_row> {
    std::vector<detail::relay_row> rows;
    rows.reserve(static_cast<std::size_t>(claimed.size()));
    for (int i = 0; i < claimed.size(); ++i) {
        detail::relay_row row;
        row.seq = be_int64(claimed.text(i, 0));
        row.staged_ms = be_int64(claimed.text(i, 2));
        parts[row.seq] = be_int64(claimed.text(i, 3));  // int4: 4 bytes big-endian
        row.load(claimed.text(i, 1), encoded);
        rows.push_back(std::move(row));
    }
    return rows;
}

/// Whether this process's chaos test asked for the "mid_commit" crash (test builds only):
/// then the finishing DELETE goes to the server alone, and the crash comes after it and before
/// COMMIT; otherwise DELETE and COMMIT travel in one pipeline.
auto split_mid_commit() -> bool {
#if defined(WEFT_OUTBOX_CRASH_POINTS)
    static const bool split = [] {
        const char* p = std::getenv("WEFT_OUTBOX_CRASH_POINT");
        return p != nullptr && std::string_view{p} == "mid_commit";
    }();
    return split;
#else
    return false;
#endif
}

/// The statements that delete (and dead-letter) finished rows.
auto finish_statements(const std::string& name, const std::vector<detail::relay_row>& rows)
    -> std::vector<pg_statement> {
    const std::string t = detail::quoted(name);
    const std::string dead = detail::quoted(name + "_dead");
    std::vector<pg_statement> finish;
    std::vector<std::int64_t> finished;
    for (const auto& row : rows) {
        if (row.outcome == detail::relay_row::fate::dead) {
            finish.push_back({"INSERT INTO " + dead +
                                  " (seq, id, topic, key, envelope, staged_at, reason) "
                                  "SELECT seq, id, topic, key, envelope, staged_at, $1 FROM " +
                                  t + " WHERE seq = $2",
                              {text_param(row.reason), text_param(std::to_string(row.seq))}});
        }
        if (row.outcome != detail::relay_row::fate::pending) {
            finished.push_back(row.seq);
        }
    }
    if (!finished.empty()) {
        finish.push_back({"DELETE FROM " + t + " WHERE seq = ANY($1::bigint[])",
                          {text_param(join_ints(finished))}});
    }
    return finish;
}

/// The batch-at-a-time relay's (window 1) rows between round trips. A busy relay keeps two
/// batches: `rows` (claimed, being published) and `done` (published before it, its fates
/// known, not yet deleted). Each step sends one round trip, the deletes of `done` and the
/// claim of the next batch, while `rows` is published, so the client's publishing and the
/// server's work overlap instead of each waiting for the other.
///
/// The claims commit at once (the rows' FOR UPDATE lock ends with the round trip): what keeps
/// other relays away from the claimed rows is the partitions' advisory locks, which live as
/// long as the session (a lost session drops both batches: their rows stay staged). So a claim
/// names the rows the relay holds (`rows`) and leaves them out.
///
/// Order per key, the rule: a key is `blocked` while `done` holds a pending row of it (its
/// publish failed, or it was blocked itself). A blocked key's rows in `rows` are not published
/// (they stay pending), and the claim sent with `done`'s deletes leaves the key out (as it
/// leaves out keys in back-off). So a key's rows are published only when every earlier row of
/// it was published or dead-lettered: the claim that can bring a key's rows back comes two
/// steps after the last batch that held a pending row of it, when no batch the relay holds has
/// a row of the key, and then it brings them all in seq order from the oldest.
struct relay_batches {
    std::vector<detail::relay_row> rows;
    std::vector<detail::relay_row> done;
};

/// Keys with a pending row in `done`.
auto blocked_keys(const std::vector<detail::relay_row>& done) -> std::vector<std::string> {
    std::vector<std::string> keys;
    for (const auto& row : done) {
        if (row.outcome == detail::relay_row::fate::pending &&
            std::find(keys.begin(), keys.end(), row.env.key) == keys.end()) {
            keys.push_back(row.env.key);
        }
    }
    return keys;
}

/// The round trip of one step: in one transaction, `done`'s dead-letter moves and DELETE and,
/// with `claim`, the claim of the next batch (leaving out `held`, the keys in `skip`); COMMIT.
auto batch_round(pg_outbox::state& s,
                 relay_session& rs,
                 const std::vector<detail::relay_row>& done,
                 bool claim,
                 std::vector<std::string> skip,
                 std::vector<std::int64_t> held) -> task<result<std::vector<detail::relay_row>>> {
    pg_connection& c = *rs.conn;
    std::vector<pg_statement> round;
    round.push_back({"BEGIN"});
    for (auto& st : finish_statements(s.options.table, done)) {
        round.push_back(std::move(st));
    }
    if (split_mid_commit() && round.size() > 1) {
        auto d = co_await c.pipeline(std::move(round));
        if (!d) {
            co_return d.error();
        }
        round.clear();
        detail::crash_point("mid_commit");  // deleted inside the transaction, not committed
    }
    std::size_t claimed_at = 0;
    if (claim) {
        claimed_at = round.size();
        round.push_back(claim_statement(s, rs, skip, &held));
    }
    round.push_back({"COMMIT"});
    auto f = co_await c.pipeline(std::move(round));
    if (!f) {
        co_return f.error();
    }
    if (!claim) {
        co_return std::vector<detail::relay_row>{};
    }
    co_return claimed_rows((*f)[claimed_at], /*encoded=*/false, rs.parts);
}

/// Publishes `rows` but those of `blocked` keys (left pending).
auto publish_unblocked(pg_outbox::state& s,
                       relay_session& rs,
                       publisher& pub,
                       std::vector<detail::relay_row>& rows,
                       const std::vector<std::string>& blocked) -> task<void> {
    if (rows.empty()) {
        co_return;
    }
    if (blocked.empty()) {
        co_await detail::publish_batch(pub, rows, s.options.relay, s.counters, s.stop,
                                       &rs.deferred);
        co_return;
    }
    std::vector<detail::relay_row> open;
    std::vector<std::size_t> at;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        if (std::find(blocked.begin(), blocked.end(), rows[i].env.key) == blocked.end()) {
            at.push_back(i);
            open.push_back(std::move(rows[i]));
        }
    }
    co_await detail::publish_batch(pub, open, s.options.relay, s.counters, s.stop, &rs.deferred);
    for (std::size_t j = 0; j < at.size(); ++j) {
        rows[at[j]] = std::move(open[j]);
    }
}

/// One step of the batch-at-a-time relay (see relay_batches): publishes `b.rows` while one
/// round trip deletes `b.done` and (unless stopping) claims the next batch; then `rows` becomes
/// `done` and the claimed batch `rows`. Returns how many rows the step finished or claimed (0:
/// the relay is idle). On an error the session is lost and both batches are dropped (their
/// rows stay staged and are claimed again: published at least once).
auto relay_step(pg_outbox::state& s, relay_session& rs, relay_batches& b, publisher& pub)
    -> task<result<std::size_t>> {
    const bool claim = !s.stop.requested();
    std::vector<std::string> blocked = blocked_keys(b.done);
    std::vector<std::string> skip = keys_in_backoff(rs, s.options.relay.max_backoff);
    skip.insert(skip.end(), blocked.begin(), blocked.end());
    std::vector<std::int64_t> held;
    held.reserve(b.rows.size());
    for (const auto& row : b.rows) {
        held.push_back(row.seq);
    }
    if (!b.rows.empty()) {
        s.counters.oldest_pending_staged_ms.store(b.rows.front().staged_ms,
                                                  std::memory_order_relaxed);
    }
    // The round trip first: it is sent before the publishing starts (when_all runs its first
    // task at once), and the server works on it while this side publishes.
    auto [claimed, published] =
        co_await when_all(batch_round(s, rs, b.done, claim, std::move(skip), std::move(held)),
                          publish_unblocked(s, rs, pub, b.rows, blocked));
    (void)published;
    if (!claimed) {
        b.rows.clear();
        b.done.clear();
        co_return claimed.error();
    }
    if (!b.rows.empty()) {
        detail::crash_point("after_ack");
    }
    const std::size_t work = b.done.size() + b.rows.size() + claimed->size();
    b.done = std::move(b.rows);
    b.rows = std::move(*claimed);
    co_return work;
}

/// One round trip of the windowed relay's database side: in one transaction, the rows the
/// pipeline finished are deleted (dead ones moved) and, with `claim`, the next batch is
/// claimed (leaving out the rows the pipeline holds and its parked keys); COMMIT. Returns the
/// claimed rows (empty without `claim`).
auto feed_round(pg_outbox::state& s,
                relay_session& rs,
                detail::relay_pipeline& pipe,
                const std::vector<detail::relay_row>& finished,
                bool claim) -> task<result<std::vector<detail::relay_row>>> {
    pg_connection& c = *rs.conn;
    std::vector<pg_statement> round;
    round.push_back({"BEGIN"});
    for (auto& st : finish_statements(s.options.table, finished)) {
        round.push_back(std::move(st));
    }
    if (split_mid_commit() && !finished.empty()) {
        auto d = co_await c.pipeline(std::move(round));
        if (!d) {
            co_return d.error();
        }
        round.clear();
        detail::crash_point("mid_commit");  // deleted inside the transaction, not committed
    }
    std::size_t claimed_at = 0;
    if (claim) {
        const std::vector<std::int64_t> held = pipe.held_seqs();
        claimed_at = round.size();
        round.push_back(claim_statement(s, rs, pipe.parked_keys(), &held));
    }
    round.push_back({"COMMIT"});
    auto f = co_await c.pipeline(std::move(round));
    if (!f) {
        co_return f.error();
    }
    if (!claim) {
        co_return std::vector<detail::relay_row>{};
    }
    co_return claimed_rows((*f)[claimed_at], /*encoded=*/true, rs.parts);
}

/// The database side of the relay with a window above one (detail::relay_pipeline, which
/// publishes): connects, takes partitions, and in one round trip at a time deletes what the
/// pipeline finished and claims the next batch when it wants rows, while the pipeline's
/// earlier rows are still being acknowledged. A lost connection (its partitions may go to
/// another relay) resets the pipeline: what it held stays staged and is claimed again.
auto feed_pipeline(pg_outbox::state& s, detail::relay_pipeline& pipe) -> task<void> {
    const stop_token token = co_await get_stop_token();
    const relay_options& o = s.options.relay;
    const std::size_t batch = std::max<std::uint32_t>(1, o.batch_size);
    relay_session rs;
    std::vector<detail::relay_row> unfinished;  // finished by the pipeline, not yet deleted
    bool dry = false;  // the last claim was short: wait (poll) before claiming again
    auto poll = o.min_poll;
    auto backoff = o.min_backoff;
    auto lose_session = [&] {
        rs.lose(s.owned);
        pipe.reset();
        unfinished.clear();  // not deleted: claimed and published again (at least once)
    };
    for (;;) {
        const bool stopping = s.stop.requested() || token.stop_requested() || pipe.ended();
        if (!rs.conn) {
            if (stopping) {
                break;
            }
            auto c = co_await open_session(s);
            if (!c) {
                co_await detail::wait_for_event(s.stop.wake, backoff);
                backoff = std::min(backoff * 2, o.max_backoff);
                continue;
            }
            rs.conn = std::move(*c);
        }
        if (!stopping) {
            auto counted = co_await count_relays(s, rs);
            if (!counted) {
                lose_session();
                continue;
            }
            auto taken = co_await take_partitions(s, rs);
            if (!taken) {
                lose_session();
                continue;
            }
        }
        if (pipe.take_finished(unfinished) != 0) {
            detail::crash_point("after_ack");
        }
        if (release_due(s, rs)) {
            if (!rs.releasing.empty()) {
                // A parked key (in back-off, nothing of it in flight) of a partition being
                // given up is dropped, not waited for: it could fail for longer than any
                // rebalance (claims no longer read the partition, so only the pipeline's own
                // re-sends could drain it). Its rows stay staged, this relay never sends them
                // again, and the next owner claims them from the oldest, in order.
                pipe.drop_parked([&](const detail::relay_row& row) {
                    const auto it = rs.parts.find(row.seq);
                    return it != rs.parts.end() &&
                           std::find(rs.releasing.begin(), rs.releasing.end(), it->second) !=
                               rs.releasing.end();
                });
            }
            // Held: in the pipeline, or finished by it and not yet deleted (`unfinished`).
            std::vector<std::int64_t> held = pipe.held_seqs();
            for (const auto& row : unfinished) {
                held.push_back(row.seq);
            }
            auto released = co_await release_drained(s, rs, held);
            if (!released) {
                lose_session();
                continue;
            }
        }
        const bool claim = !stopping && !dry && !rs.owned.empty() && pipe.wants_rows();
        if (unfinished.empty() && !claim) {
            if (stopping) {
                break;
            }
            const std::int64_t oldest = pipe.oldest_staged_ms();
            s.counters.oldest_pending_staged_ms.store(oldest, std::memory_order_relaxed);
            if (dry && oldest == 0) {
                s.counters.idle_waits.fetch_add(1, std::memory_order_relaxed);
                co_await wait_idle(s, rs.conn.get(), poll);
            } else {
                // notify(), stop_relay() or the pipeline (rows finished, room for rows).
                co_await detail::wait_for_event(s.notified, dry ? poll : o.max_poll);
            }
            if (dry) {
                poll = std::min(poll * 2, o.max_poll);
                dry = false;  // claim again
            }
            continue;
        }
        auto rows = co_await feed_round(s, rs, pipe, unfinished, claim);
        if (!rows) {
            lose_session();
            if (stopping) {
                break;
            }
            co_await detail::wait_for_event(s.stop.wake, backoff);
            backoff = std::min(backoff * 2, o.max_backoff);
            continue;
        }
        backoff = o.min_backoff;
        unfinished.clear();
        if (claim) {
            dry = rows->size() < batch;
            pipe.set_dry(dry);
            if (!rows->empty()) {
                poll = o.min_poll;
                pipe.add(std::move(*rows));
            }
        }
    }
    pipe.close();
    s.owned.store(0, std::memory_order_relaxed);
}

}  // namespace

auto pg_outbox::run_relay(publisher& pub) -> task<result<void>> {
    state& s = *s_;
    s.stop.stopping.store(false, std::memory_order_release);
    s.stop.wake.reset();
    const stop_token token = co_await get_stop_token();
    const relay_options& o = s.options.relay;
    auto poll = o.min_poll;
    auto backoff = o.min_backoff;
    relay_session rs;
    // The test builds' faults break the batch-at-a-time relay (window 1) only.
    const std::uint32_t window = detail::fault_unbounded_window() ? 1 : detail::effective_window(o);
    s.counters.window.store(window, std::memory_order_relaxed);
    if (window > 1) {
        detail::relay_pipeline pipe{pub, o, s.counters, s.stop, window, s.notified};
        co_await when_all(feed_pipeline(s, pipe), pipe.pump());
        co_return result<void>{};
    }
    relay_batches b;
    auto lose_session = [&] {
        rs.lose(s.owned);
        b.rows.clear();  // not deleted: claimed and published again (at least once)
        b.done.clear();
    };
    for (;;) {
        if (token.stop_requested()) {
            break;
        }
        if (s.stop.requested() && b.rows.empty() &&
            std::none_of(b.done.begin(), b.done.end(), [](const detail::relay_row& r) {
                return r.outcome != detail::relay_row::fate::pending;
            })) {
            break;  // nothing published is left undeleted
        }
        if (!rs.conn) {
            if (s.stop.requested()) {
                break;
            }
            auto c = co_await open_session(s);
            if (!c) {
                co_await detail::wait_for_event(s.stop.wake, backoff);
                backoff = std::min(backoff * 2, o.max_backoff);
                continue;
            }
            rs.conn = std::move(*c);
        }
        auto counted = co_await count_relays(s, rs);
        if (!counted) {
            lose_session();
            continue;
        }
        auto taken = co_await take_partitions(s, rs);
        if (!taken) {
            lose_session();
            continue;
        }
        if (release_due(s, rs)) {
            // Held: `rows` (claimed, being published) and `done` (published before, its
            // deletion not yet sent); what an earlier step deleted is committed.
            std::vector<std::int64_t> held;
            for (const auto& row : b.rows) {
                held.push_back(row.seq);
            }
            for (const auto& row : b.done) {
                held.push_back(row.seq);
            }
            auto released = co_await release_drained(s, rs, held);
            if (!released) {
                lose_session();
                continue;
            }
        }
        if (rs.owned.empty() && b.rows.empty() && b.done.empty()) {
            co_await detail::wait_for_event(s.notified,
                                            std::min(o.max_poll, s.options.rebalance_interval));
            continue;
        }
        auto n = co_await relay_step(s, rs, b, pub);
        if (!n) {
            lose_session();
            co_await detail::wait_for_event(s.stop.wake, backoff);
            backoff = std::min(backoff * 2, o.max_backoff);
            continue;
        }
        backoff = o.min_backoff;
        if (*n == 0) {
            s.counters.oldest_pending_staged_ms.store(0, std::memory_order_relaxed);
            s.counters.idle_waits.fetch_add(1, std::memory_order_relaxed);
            co_await wait_idle(s, rs.conn.get(), poll);
            poll = std::min(poll * 2, o.max_poll);
        } else {
            poll = o.min_poll;
        }
    }
    s.owned.store(0, std::memory_order_relaxed);
    co_return result<void>{};
}

}  // namespace weft::bus
