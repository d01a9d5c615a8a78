#pragma once

#include <functional>
#include <system_error>
#include <vector>

#include "weft/core/result.hpp"

struct sqlite3;

namespace weft::bus {

/// Errors from SQLite (category "sqlite"): the value is SQLite's extended result code
/// (SQLITE_BUSY = 5, SQLITE_CONSTRAINT_UNIQUE = 2067...), the message sqlite3_errstr's.
[[nodiscard]] auto sqlite_category() noexcept -> const std::error_category&;

/// One transaction on a caller's SQLite connection, the unit in which weft's SQLite outbox
/// stages events and its inbox records ids together with the caller's own writes.
///
/// - The constructor runs `BEGIN IMMEDIATE` (the write lock is taken at once, so the
///   transaction cannot fail later with SQLITE_BUSY on its first write after reading); failure
///   to begin throws std::system_error (category sqlite_category()).
/// - `commit()` runs COMMIT; on success the actions registered with `on_commit` run, in order,
///   on the committing thread (the outbox's relay notification, the inbox's ack). On failure
///   the transaction is rolled back and no action runs.
/// - Destroyed without commit(): ROLLBACK, and the actions are dropped: nothing staged in it
///   is ever published, no delivery handled in it is acknowledged.
/// The connection belongs to the caller, who must not use it for anything else (on any thread)
/// while the transaction is open. These are blocking calls: make them where the caller does its
/// own database work (on weft, inside `weft::spawn_blocking`). Not movable.
///
///     weft::bus::sqlite_txn txn{db};
///     exec(txn.db(), "INSERT INTO orders ...");
///     outbox.stage(txn, env).value();
///     txn.commit().value();                 // the relay is woken
class sqlite_txn {
public:
    explicit sqlite_txn(sqlite3* db);
    sqlite_txn(const sqlite_txn&) = delete;
    auto operator=(const sqlite_txn&) -> sqlite_txn& = delete;
    ~sqlite_txn();

    [[nodiscard]] auto db() const noexcept -> sqlite3* { return db_; }
    /// COMMIT, then the on_commit actions. Once only; afterwards `invalid_argument`.
    auto commit() -> result<void>;
    /// ROLLBACK now (what the destructor does otherwise).
    void rollback() noexcept;
    /// Runs `fn` after a successful commit (never after a rollback). `fn` must not throw.
    void on_commit(std::function<void()> fn) { after_commit_.push_back(std::move(fn)); }
    [[nodiscard]] auto open() const noexcept -> bool { return open_; }

private:
    sqlite3* db_;
    bool open_ = false;
    std::vector<std::function<void()>> after_commit_;
};

}  // namespace weft::bus
