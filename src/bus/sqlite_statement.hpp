#pragma once

// A prepared SQLite statement owned by one scope (private to the SQLite outbox and inbox).

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <string_view>
#include <system_error>
#include <thread>

#include "weft/bus/sqlite_txn.hpp"

namespace weft::bus::detail {

[[nodiscard]] inline auto sqlite_error(int rc) noexcept -> std::error_code {
    return {rc, sqlite_category()};
}

/// Runs `sql` (one or more statements, no results wanted). 0 or SQLite's extended error code.
[[nodiscard]] inline auto sqlite_exec(sqlite3* db, const char* sql) noexcept -> int {
    const int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
    return rc == SQLITE_OK ? 0 : sqlite3_extended_errcode(db);
}

/// Switches the database file to WAL (persistent: a no-op once any connection did it). 0 or
/// SQLite's extended error code. Changing the journal mode takes an exclusive lock, and SQLite
/// may answer SQLITE_BUSY at once instead of calling the busy handler where waiting could
/// deadlock (two connections opening a new file together: a relay and the program staging
/// events, seen in the outbox's chaos test), so BUSY and LOCKED are retried here until
/// `timeout` has passed.
[[nodiscard]] inline auto sqlite_enable_wal(sqlite3* db, std::chrono::milliseconds timeout) -> int {
    const auto give_up = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        const int rc = sqlite_exec(db, "PRAGMA journal_mode=WAL");
        const int primary = rc & 0xff;
        if ((primary != SQLITE_BUSY && primary != SQLITE_LOCKED) ||
            std::chrono::steady_clock::now() >= give_up) {
            return rc;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds{2});
    }
}

class sqlite_statement {
public:
    sqlite_statement(sqlite3* db, std::string_view sql) noexcept : db_(db) {
        rc_ = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &st_, nullptr);
    }
    sqlite_statement(const sqlite_statement&) = delete;
    auto operator=(const sqlite_statement&) -> sqlite_statement& = delete;
    ~sqlite_statement() { sqlite3_finalize(st_); }

    /// The error of preparing it, if any.
    [[nodiscard]] auto error() const noexcept -> std::error_code {
        return rc_ == SQLITE_OK ? std::error_code{} : sqlite_error(sqlite3_extended_errcode(db_));
    }
    [[nodiscard]] auto get() const noexcept -> sqlite3_stmt* { return st_; }

    void bind(int i, std::int64_t v) noexcept { sqlite3_bind_int64(st_, i, v); }
    void bind_text(int i, std::string_view v) noexcept {
        sqlite3_bind_text(st_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    }
    void bind_blob(int i, const void* p, std::size_t n) noexcept {
        sqlite3_bind_blob(st_, i, p, static_cast<int>(n), SQLITE_TRANSIENT);
    }
    /// SQLITE_ROW, SQLITE_DONE or an extended error code.
    auto step() noexcept -> int {
        const int rc = sqlite3_step(st_);
        return (rc == SQLITE_ROW || rc == SQLITE_DONE) ? rc : sqlite3_extended_errcode(db_);
    }
    void reset() noexcept {
        sqlite3_reset(st_);
        sqlite3_clear_bindings(st_);
    }
    [[nodiscard]] auto column_int(int i) const noexcept -> std::int64_t {
        return sqlite3_column_int64(st_, i);
    }
    [[nodiscard]] auto column_bytes(int i) const noexcept -> std::string_view {
        const void* p = sqlite3_column_blob(st_, i);
        const int n = sqlite3_column_bytes(st_, i);
        return p == nullptr
                   ? std::string_view{}
                   : std::string_view(static_cast<const char*>(p), static_cast<std::size_t>(n));
    }

private:
    sqlite3* db_;
    sqlite3_stmt* st_ = nullptr;
    int rc_ = SQLITE_OK;
};

}  // namespace weft::bus::detail
