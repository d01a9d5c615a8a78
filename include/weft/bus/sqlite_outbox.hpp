#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "weft/bus/envelope.hpp"
#include "weft/bus/outbox_metrics.hpp"
#include "weft/bus/publisher.hpp"
#include "weft/bus/relay_options.hpp"
#include "weft/bus/sqlite_txn.hpp"
#include "weft/core/result.hpp"
#include "weft/core/task.hpp"
#include "weft/sync/event.hpp"

struct sqlite3;

namespace weft::bus {

struct sqlite_outbox_options {
    /// The outbox table; its dead letters go to `<table>_dead`. Schema versions are kept in
    /// `weft_schema_versions` (one row per table), not in PRAGMA user_version, which belongs
    /// to the application.
    /// Letters, digits and `_`, not starting with a digit, at most 54 characters (the
    /// constructor throws std::invalid_argument otherwise).
    std::string table = "weft_outbox";
    /// Switch the database to WAL (persistent), so the relay reads while business
    /// transactions write. Off: whatever journal mode the file has.
    bool wal = true;
    /// How long the relay's connection waits for a busy database before SQLITE_BUSY.
    std::chrono::milliseconds busy_timeout{5'000};
    /// PRAGMA secure_delete on the relay's connection. Off (the default here) a delete only
    /// unlinks the published rows; on (Debian's libsqlite3 builds it on) it also overwrites
    /// their bytes with zeros, which dirties every page a deleted row touched and writes those
    /// pages to the WAL again (docs/design/decisions.md has the cost per event). Turn it
    /// on where deleted events must not stay readable in free pages of the file.
    bool secure_delete = false;
    relay_options relay{};
};

/// The transactional outbox on SQLite (the embedded default): events are written in the
/// caller's own transaction with the business change, and a relay publishes them.
///
/// Guarantees
/// - An event is published iff the transaction that staged it committed (a rolled back
///   transaction leaves no row).
/// - At least once: a row is deleted only after the broker acknowledged it. A crash between the
///   ack and the delete publishes it again on restart with the same id, which brokers that
///   de-duplicate (NATS `Nats-Msg-Id`, the memory broker) drop; an inbox absorbs the rest.
/// - Order per key: events of one key are published in staging order, and event n+1 only after
///   event n was acknowledged (or dead-lettered). Different keys are published in parallel.
///   Rowids are AUTOINCREMENT and SQLite has one writer at a time, so staging order is commit
///   order and a later commit never gets a smaller `seq`.
/// - One relay per database file: `run_relay` takes an exclusive flock on `<path>-relay.lock`
///   (released by the kernel when the relay's process dies, even by SIGKILL); a second relay,
///   in this process or another, gets `bus_errc::relay_active`.
/// - Poison: an event the broker rejects for good (relay_options::is_permanent) moves to
///   `<table>_dead` with the reason, and its key goes on.
///
/// Threads: SQLite has no non-blocking API (every call may wait on the disk or on another
/// connection's lock), so the relay makes all its SQLite calls on weft's blocking pool
/// (`spawn_blocking`), through its own connection, one call at a time; no runtime worker ever
/// blocks in SQLite. `stage` is a blocking call on the caller's connection, made where the
/// caller runs its own transaction. The constructor is blocking setup (opens the file, creates
/// or migrates the schema) and throws std::system_error on failure. Any thread may call
/// `stage`, `notify`, `stop_relay` and `metrics`. Destroy only after run_relay returned.
///
///     weft::bus::sqlite_outbox outbox{"app.db"};
///     { weft::bus::sqlite_txn txn{db}; /* business writes */ outbox.stage(txn, env).value();
///       txn.commit().value(); }
///     co_await outbox.run_relay(pub);   // until stop_relay()
class sqlite_outbox {
public:
    explicit sqlite_outbox(std::string path, sqlite_outbox_options options = {});
    sqlite_outbox(const sqlite_outbox&) = delete;
    auto operator=(const sqlite_outbox&) -> sqlite_outbox& = delete;
    ~sqlite_outbox();

    /// Inserts `env` (a nil id and an epoch time are filled in first) in `txn`, which must be
    /// on a connection to this outbox's file. When `txn` commits, the relay is woken. Returns
    /// the event's id; a SQLite error (sqlite_category) leaves the transaction to the caller.
    /// The INSERT is prepared once per connection and kept (for the 8 connections staged on
    /// most recently): close a connection you staged on with sqlite3_close_v2, or call
    /// release(db) before sqlite3_close (which fails with SQLITE_BUSY while a statement of the
    /// connection exists).
    auto stage(sqlite_txn& txn, envelope env) -> result<message_id>;
    /// Finalizes the statement stage() keeps for `db`, if any. Call it before closing `db` with
    /// sqlite3_close; not while a stage() on `db` runs.
    void release(sqlite3* db) noexcept;
    /// Wakes the relay now (for rows inserted by other means, or another process's commits).
    void notify() noexcept;

    /// Runs the relay until stop_relay() or until the awaiting task is stopped (then ok; what
    /// it did not finish stays staged for the next relay). `publisher_closed` once `pub` is
    /// closed (what it held stays staged). `relay_active` when another relay holds the file.
    /// A SQLite error (SQLITE_BUSY past busy_timeout, or worse) is tried again after a
    /// back-off. Reads `pub.results()`: give the relay a publisher of its own.
    auto run_relay(publisher& pub) -> task<result<void>>;
    /// Asks a running relay to return: it sends nothing more, waits for the outcomes of the
    /// events it has in flight (at most the publisher's delivery timeout), deletes those the
    /// broker took and returns. Stop the awaiting task instead to return at once: events in
    /// flight then stay staged, and the next relay publishes them again. Asked before a
    /// spawned run_relay has started, it ends that run as soon as it starts; a run clears the
    /// stop when it returns, so the next one starts afresh.
    void stop_relay() noexcept;

    [[nodiscard]] auto metrics() const noexcept -> outbox_metrics;
    /// Rows staged and not yet finished (a blocking query on a connection of its own; for tests
    /// and tools, not for a runtime worker).
    auto pending_rows() -> result<std::uint64_t>;
    /// Rows in the dead-letter table (blocking, as pending_rows).
    auto dead_letter_rows() -> result<std::uint64_t>;

    struct state;

private:
    std::unique_ptr<state> s_;
};

}  // namespace weft::bus
