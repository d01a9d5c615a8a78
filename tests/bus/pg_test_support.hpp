// What the PostgreSQL tests share: the server to use (WEFT_PG_CONNINFO, else the scripts'
// default port), a connection to it, and the reset of a test table's schema version.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "weft/bus/pg_connection.hpp"
#include "weft/core/task.hpp"

namespace weft::bus::test {

inline auto conninfo() -> std::string {
    const char* s = std::getenv("WEFT_PG_CONNINFO");
    return s != nullptr ? s : "host=127.0.0.1 port=15432 user=postgres dbname=postgres";
}

inline auto connect() -> weft::task<std::unique_ptr<pg_connection>> {
    auto c = co_await pg_connection::connect(conninfo());
    if (!c) {
        ADD_FAILURE() << "cannot connect to PostgreSQL (" << conninfo() << ")";
    }
    co_return std::move(c).value();
}

/// Forgets table `t`'s schema version, so the next migrate creates its schema again. Under the
/// advisory lock pg_outbox::migrate holds while it creates weft_schema_versions: tests run as
/// processes side by side (ctest -j2), and two `CREATE TABLE IF NOT EXISTS` of one name at once
/// make one of them fail (a unique violation in pg_type) on a database that does not have it yet.
inline auto reset_schema_version(pg_connection& c, const std::string& t) -> weft::task<void> {
    (co_await c.query("BEGIN")).value();
    (co_await c.query("SELECT pg_advisory_xact_lock(hashtext('weft_schema_versions'))")).value();
    (co_await c.query("CREATE TABLE IF NOT EXISTS weft_schema_versions (name text PRIMARY KEY, "
                      "version integer NOT NULL)"))
        .value();
    (co_await c.query("DELETE FROM weft_schema_versions WHERE name = '" + t + "'")).value();
    (co_await c.query("COMMIT")).value();
}

}  // namespace weft::bus::test
