#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "weft/bus/delivery.hpp"
#include "weft/bus/envelope.hpp"
#include "weft/bus/inbox_outcome.hpp"
#include "weft/bus/sqlite_txn.hpp"
#include "weft/core/result.hpp"

struct sqlite3;

namespace weft::bus {

struct sqlite_inbox_options {
    /// The table of handled ids (id BLOB PRIMARY KEY, received_ms), WITHOUT ROWID.
    /// Letters, digits and `_`, not starting with a digit, at most 54 characters (the
    /// constructor throws std::invalid_argument otherwise).
    std::string table = "weft_inbox";
    /// Ids older than this are forgotten: a duplicate arriving later than the window after the
    /// original is handled again. Make it longer than the broker's redelivery horizon.
    std::chrono::milliseconds window{std::chrono::hours{24 * 7}};
    /// handle() deletes up to this many expired ids every `expire_every` calls (0: never; call
    /// expire() yourself).
    std::uint32_t expire_every = 1'000;
};

/// The idempotent consumer on SQLite: a message's id is recorded in the consumer's database in
/// the same transaction as the handler's writes, so the writes happen once per id however
/// often the broker delivers it (redelivery after a lost ack, a relay re-publishing after a
/// crash).
///
/// `handle(txn, delivery, fn)`:
/// - A new id: inserts it, runs `fn(txn, message)` (-> result<void>) in `txn`, and registers
///   `delivery.ack()` to run when `txn` commits: acknowledged only once the writes are durable.
///   An error from `fn` is returned; the caller rolls back (drops `txn`) and nacks.
/// - A duplicate (the id is already recorded: committed, or earlier in `txn` itself): `fn` not
///   run, and `delivery.ack()` registered to run when `txn` commits, as for a new id.
/// - `fn` throws: the exception propagates and the caller's `txn`, destroyed without commit,
///   rolls back the id with the writes; nothing is acked.
/// Exactly-once processing thus comes from the transaction, not from the broker: delivery is
/// at least once, and the id table turns repeats into acks.
/// Blocking calls on the caller's connection (see sqlite_txn). The constructor creates the
/// table on `db` (blocking; throws std::system_error).
///
///     weft::bus::sqlite_inbox inbox{db};
///     weft::bus::sqlite_txn txn{db};
///     auto r = inbox.handle(txn, d, [](sqlite_txn& t, const envelope& e) { return apply(t, e); });
///     if (r) txn.commit().value(); else d.nack();
class sqlite_inbox {
public:
    explicit sqlite_inbox(sqlite3* db, sqlite_inbox_options options = {});

    template <typename Fn>
    auto handle(sqlite_txn& txn, delivery d, Fn&& fn) -> result<inbox_outcome> {
        auto fresh = record(txn, d.message().id);
        if (!fresh) {
            return fresh.error();
        }
        // Either way acked only when `txn` commits: a duplicate's id may have been recorded
        // earlier in this same transaction, and is committed only with it.
        if (!*fresh) {
            txn.on_commit([d]() mutable { (void)d.ack(); });
            return inbox_outcome::duplicate;
        }
        result<void> r = std::forward<Fn>(fn)(txn, d.message());
        if (!r) {
            return r.error();
        }
        txn.on_commit([d]() mutable { (void)d.ack(); });
        return inbox_outcome::processed;
    }

    /// Records `id` in `txn`: true if it was new, false if already there. Expires old ids on
    /// every `expire_every`-th call. For consumers that are not bus deliveries.
    auto record(sqlite_txn& txn, const message_id& id) -> result<bool>;
    /// Deletes up to `limit` ids older than the window (in the caller's transaction or in
    /// autocommit); returns how many.
    auto expire(sqlite3* db, std::uint32_t limit = 10'000) -> result<std::uint64_t>;

private:
    sqlite_inbox_options options_;
    std::string insert_sql_;
    std::string expire_sql_;
    std::atomic<std::uint32_t> calls_{0};  // relaxed: only spreads the expiry
};

}  // namespace weft::bus
