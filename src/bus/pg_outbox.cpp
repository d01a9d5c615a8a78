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

#include "pg_literals.hpp"
#include "pg_relay_store.hpp"
#include "relay_counters.hpp"
#include "relay_driver.hpp"
#include "relay_stop.hpp"
#include "sql_identifier.hpp"
#include "weft/bus/envelope_codec.hpp"
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

}  // namespace

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
    name.push_back(detail::text_param(t));
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
    up.push_back(detail::text_param(t));
    up.push_back(detail::text_param(std::to_string(steps.size())));
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
    p.push_back(detail::text_param(env.topic));
    p.push_back(detail::text_param(env.key));
    p.push_back(detail::text_param(std::to_string(partition_of(env.key))));
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
        ch.push_back(detail::text_param(s_->options.table + "_wake"));
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
    return detail::snapshot(s_->counters);
}

auto pg_outbox::run_relay(publisher& pub) -> task<result<void>> {
    state& s = *s_;
    detail::pg_relay_store store{s.options, s.lock_class, s.owned, s.notified};
    auto r =
        co_await detail::run_relay(store, pub, s.options.relay, s.counters, s.stop, s.notified);
    s.stop.clear();  // this run's stop (see relay_stop)
    co_return r;
}

}  // namespace weft::bus
