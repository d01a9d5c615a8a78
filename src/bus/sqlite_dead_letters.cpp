#include "weft/bus/sqlite_dead_letters.hpp"

#include <sqlite3.h>

#include <charconv>
#include <system_error>

#include "sql_identifier.hpp"
#include "sqlite_statement.hpp"
#include "weft/bus/envelope_codec.hpp"

namespace weft::bus {

namespace {

auto parse_seq(std::string_view ref, std::int64_t& seq) -> bool {
    const auto [p, ec] = std::from_chars(ref.data(), ref.data() + ref.size(), seq);
    return ec == std::errc{} && p == ref.data() + ref.size();
}

auto not_found() -> std::error_code {
    return std::make_error_code(std::errc::no_such_file_or_directory);
}

// One row of `SELECT seq, envelope, reason, topic`.
auto row_of(const detail::sqlite_statement& q) -> result<dead_letter> {
    auto env = decode(q.column_bytes(1));
    if (!env) {
        return env.error();
    }
    const std::string_view reason = q.column_bytes(2);
    const std::string_view topic = q.column_bytes(3);
    return dead_letter{.ref = std::to_string(q.column_int(0)),
                       .message = std::move(*env),
                       .reason = std::string(reason),
                       .topic = std::string(topic)};
}

}  // namespace

sqlite_dead_letters::sqlite_dead_letters(std::string path, std::string table)
    : table_(detail::quoted(detail::checked_table_name(table, "weft::bus::sqlite_dead_letters"))),
      dead_(detail::quoted(table + "_dead")) {
    const int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr);
    if (rc != SQLITE_OK) {
        const std::string why = db_ != nullptr ? sqlite3_errmsg(db_) : "out of memory";
        sqlite3_close(db_);
        throw std::system_error(detail::sqlite_error(rc),
                                "weft::bus::sqlite_dead_letters: open " + path + ": " + why);
    }
    sqlite3_busy_timeout(db_, 5'000);
}

sqlite_dead_letters::~sqlite_dead_letters() { sqlite3_close(db_); }

auto sqlite_dead_letters::list(std::size_t limit) -> result<std::vector<dead_letter>> {
    detail::sqlite_statement q(
        db_, "SELECT seq, envelope, reason, topic FROM " + dead_ + " ORDER BY seq LIMIT ?");
    if (q.error()) {
        return q.error();
    }
    q.bind(1, static_cast<std::int64_t>(limit));
    std::vector<dead_letter> out;
    int rc = 0;
    while ((rc = q.step()) == SQLITE_ROW) {
        auto d = row_of(q);
        if (!d) {
            return d.error();
        }
        out.push_back(std::move(*d));
    }
    if (rc != SQLITE_DONE) {
        return detail::sqlite_error(rc);
    }
    return out;
}

auto sqlite_dead_letters::show(std::string_view ref) -> result<dead_letter> {
    std::int64_t seq = 0;
    if (!parse_seq(ref, seq)) {
        return not_found();
    }
    detail::sqlite_statement q(
        db_, "SELECT seq, envelope, reason, topic FROM " + dead_ + " WHERE seq = ?");
    if (q.error()) {
        return q.error();
    }
    q.bind(1, seq);
    const int rc = q.step();
    if (rc == SQLITE_DONE) {
        return not_found();
    }
    if (rc != SQLITE_ROW) {
        return detail::sqlite_error(rc);
    }
    return row_of(q);
}

auto sqlite_dead_letters::requeue(std::string_view ref) -> result<void> {
    std::int64_t seq = 0;
    if (!parse_seq(ref, seq)) {
        return not_found();
    }
    if (const int rc = detail::sqlite_exec(db_, "BEGIN IMMEDIATE"); rc != SQLITE_OK) {
        return detail::sqlite_error(rc);
    }
    auto step = [&](const std::string& sql) -> int {
        detail::sqlite_statement q(db_, sql);
        if (q.error()) {
            return sqlite3_extended_errcode(db_);
        }
        q.bind(1, seq);
        const int rc = q.step();
        return rc == SQLITE_DONE ? SQLITE_OK : rc;
    };
    int rc = step("INSERT INTO " + table_ +
                  " (id, topic, key, envelope, staged_ms) SELECT id, topic, key, envelope, "
                  "staged_ms FROM " +
                  dead_ + " WHERE seq = ?");
    const bool found = rc == SQLITE_OK && sqlite3_changes(db_) == 1;
    if (found) {
        rc = step("DELETE FROM " + dead_ + " WHERE seq = ?");
    }
    if (rc != SQLITE_OK || !found) {
        (void)detail::sqlite_exec(db_, "ROLLBACK");
        return rc != SQLITE_OK ? detail::sqlite_error(rc) : not_found();
    }
    if (const int c = detail::sqlite_exec(db_, "COMMIT"); c != SQLITE_OK) {
        (void)detail::sqlite_exec(db_, "ROLLBACK");
        return detail::sqlite_error(c);
    }
    return {};
}

auto sqlite_dead_letters::drop(std::string_view ref) -> result<void> {
    std::int64_t seq = 0;
    if (!parse_seq(ref, seq)) {
        return not_found();
    }
    detail::sqlite_statement q(db_, "DELETE FROM " + dead_ + " WHERE seq = ?");
    if (q.error()) {
        return q.error();
    }
    q.bind(1, seq);
    if (const int rc = q.step(); rc != SQLITE_DONE) {
        return detail::sqlite_error(rc);
    }
    if (sqlite3_changes(db_) != 1) {
        return not_found();
    }
    return {};
}

}  // namespace weft::bus
