#include "weft/bus/pg_inbox.hpp"

#include <string>
#include <utility>
#include <vector>

#include "sql_identifier.hpp"

namespace weft::bus {

pg_inbox::pg_inbox(pg_inbox_options options) : options_(std::move(options)) {
    const std::string t =
        detail::quoted(detail::checked_table_name(options_.table, "weft::bus::pg_inbox"));
    insert_sql_ = "INSERT INTO " + t + " (id) VALUES ($1) ON CONFLICT DO NOTHING";
    expire_sql_ = "DELETE FROM " + t + " WHERE id IN (SELECT id FROM " + t +
                  " WHERE received_at < now() - $1::bigint * interval '1 millisecond' LIMIT "
                  "$2::bigint)";
}

auto pg_inbox::migrate(pg_connection& conn) -> task<result<void>> {
    const std::string t = detail::quoted(options_.table);  // checked by the constructor
    // One simple query is one transaction: the lock (pg_outbox::migrate's) is held until its
    // end, so consumers starting together on a new database create the table one at a time
    // (two `CREATE TABLE IF NOT EXISTS` of one name at once make one fail: a unique violation
    // in pg_type).
    auto r = co_await conn.query(
        "SELECT pg_advisory_xact_lock(hashtext('weft_schema_versions'));"
        "CREATE TABLE IF NOT EXISTS " +
        t +
        " (id bytea PRIMARY KEY, received_at timestamptz NOT NULL "
        "DEFAULT now());"
        "CREATE INDEX IF NOT EXISTS " +
        detail::quoted(options_.table + "_received") + " ON " + t + " (received_at)");
    if (!r) {
        co_return r.error();
    }
    co_return result<void>{};
}

auto pg_inbox::record(pg_connection& conn, message_id id) -> task<result<bool>> {
    std::vector<pg_param> p;
    p.push_back(pg_param{
        std::string(reinterpret_cast<const char*>(id.bytes.data()), id.bytes.size()), true});
    auto r = co_await conn.query(insert_sql_, std::move(p));
    if (!r) {
        co_return r.error();
    }
    const bool fresh = r->affected() == 1;
    if (options_.expire_every != 0 &&
        calls_.fetch_add(1, std::memory_order_relaxed) % options_.expire_every ==
            options_.expire_every - 1) {
        auto e = co_await expire(conn, options_.expire_every);
        if (!e) {
            co_return e.error();
        }
    }
    co_return fresh;
}

auto pg_inbox::expire(pg_connection& conn, std::uint32_t limit) -> task<result<std::uint64_t>> {
    std::vector<pg_param> p;
    p.push_back(pg_param{std::to_string(options_.window.count()), false});
    p.push_back(pg_param{std::to_string(limit), false});
    auto r = co_await conn.query(expire_sql_, std::move(p));
    if (!r) {
        co_return r.error();
    }
    co_return static_cast<std::uint64_t>(r->affected());
}

}  // namespace weft::bus
