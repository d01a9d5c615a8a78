#include "weft/bus/sqlite_inbox.hpp"

#include <sqlite3.h>

#include <string>

#include "relay_row.hpp"
#include "sql_identifier.hpp"
#include "sqlite_statement.hpp"

namespace weft::bus {

sqlite_inbox::sqlite_inbox(sqlite3* db, sqlite_inbox_options options)
    : options_(std::move(options)) {
    const std::string& name = detail::checked_table_name(options_.table, "weft::bus::sqlite_inbox");
    const std::string t = detail::quoted(name);
    insert_sql_ = "INSERT OR IGNORE INTO " + t + " (id, received_ms) VALUES (?, ?)";
    expire_sql_ = "DELETE FROM " + t + " WHERE id IN (SELECT id FROM " + t +
                  " WHERE received_ms < ? LIMIT ?)";
    const std::string ddl = "CREATE TABLE IF NOT EXISTS " + t +
                            " (id BLOB PRIMARY KEY, received_ms INTEGER NOT NULL) WITHOUT ROWID;"
                            "CREATE INDEX IF NOT EXISTS " +
                            detail::quoted(name + "_received") + " ON " + t + " (received_ms);";
    if (const int rc = detail::sqlite_exec(db, ddl.c_str()); rc != 0) {
        throw std::system_error(detail::sqlite_error(rc),
                                "weft::bus::sqlite_inbox: create " + name);
    }
}

auto sqlite_inbox::record(sqlite_txn& txn, const message_id& id) -> result<bool> {
    if (!txn.open()) {
        return std::errc::invalid_argument;
    }
    detail::sqlite_statement ins(txn.db(), insert_sql_);
    if (auto e = ins.error()) {
        return e;
    }
    ins.bind_blob(1, id.bytes.data(), id.bytes.size());
    ins.bind(2, detail::now_ms());
    if (const int rc = ins.step(); rc != SQLITE_DONE) {
        return detail::sqlite_error(rc);
    }
    const bool fresh = sqlite3_changes(txn.db()) == 1;
    if (options_.expire_every != 0 &&
        calls_.fetch_add(1, std::memory_order_relaxed) % options_.expire_every ==
            options_.expire_every - 1) {
        auto e = expire(txn.db(), options_.expire_every);
        if (!e) {
            return e.error();
        }
    }
    return fresh;
}

auto sqlite_inbox::expire(sqlite3* db, std::uint32_t limit) -> result<std::uint64_t> {
    detail::sqlite_statement del(db, expire_sql_);
    if (auto e = del.error()) {
        return e;
    }
    del.bind(1, detail::now_ms() - options_.window.count());
    del.bind(2, static_cast<std::int64_t>(limit));
    if (const int rc = del.step(); rc != SQLITE_DONE) {
        return detail::sqlite_error(rc);
    }
    return static_cast<std::uint64_t>(sqlite3_changes(db));
}

}  // namespace weft::bus
