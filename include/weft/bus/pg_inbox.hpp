#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <utility>

#include "weft/bus/delivery.hpp"
#include "weft/bus/envelope.hpp"
#include "weft/bus/inbox_outcome.hpp"
#include "weft/bus/pg_connection.hpp"
#include "weft/core/result.hpp"
#include "weft/core/task.hpp"

namespace weft::bus {

struct pg_inbox_options {
    /// The table of handled ids (id bytea PRIMARY KEY, received_at timestamptz).
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

/// The idempotent consumer on PostgreSQL, the same contract as sqlite_inbox: a message's id is
/// recorded in the same transaction as the handler's writes, so the writes happen once per id
/// however often the broker delivers it.
///
/// `co_await inbox.handle(conn, delivery, fn)` runs one transaction on `conn` (which must have
/// none open: `invalid_argument` otherwise, that transaction untouched and nothing acked):
/// - `BEGIN`; the id inserted (`ON CONFLICT DO NOTHING`). A new id: `co_await fn(conn,
///   message)` (-> task<result<void>>) writes in that transaction; then `COMMIT`, and only
///   after the commit succeeded `delivery.ack()`. An error from `fn` or from the commit:
///   `ROLLBACK`, nothing acked, the error returned (the caller nacks, or lets the ack wait
///   expire: the broker delivers it again). An exception from `fn`, or the awaiting task
///   stopped midway: rolled back (pg_connection::abandon_transaction) before the exception or
///   the cancellation leaves handle(), nothing acked.
/// - A duplicate (the id is committed already): `ROLLBACK`, acked, `fn` not run. A second
///   consumer handling the same id at the same moment waits on the primary key until the first
///   commits (then sees the duplicate) or rolls back (then handles it).
/// Exactly-once processing thus comes from the transaction: delivery is at least once, and the
/// id table turns repeats into acks.
/// One transaction at a time per connection (libpq's protocol is sequential); any task may
/// call handle on its own connection. Needs a runtime with a reactor (pg_connection).
///
///     weft::bus::pg_inbox inbox;
///     (co_await inbox.migrate(*conn)).value();
///     auto r = co_await inbox.handle(*conn, d, [](weft::bus::pg_connection& c,
///                                                 const weft::bus::envelope& e) {
///         return apply(c, e);                      // task<result<void>>
///     });
class pg_inbox {
public:
    explicit pg_inbox(pg_inbox_options options = {});

    /// Creates the table and its index (idempotent).
    auto migrate(pg_connection& conn) -> task<result<void>>;

    template <typename Fn>
    auto handle(pg_connection& conn, delivery d, Fn fn) -> task<result<inbox_outcome>> {
        if (conn.in_transaction()) {
            // Not ours to end: and an id recorded in it would read as a duplicate before it
            // committed.
            co_return std::make_error_code(std::errc::invalid_argument);
        }
        std::optional<result<inbox_outcome>> out;
        std::exception_ptr thrown;
        try {
            out.emplace(co_await handle_in_transaction(conn, d, fn));
        } catch (...) {
            thrown = std::current_exception();
        }
        if (conn.in_transaction()) {
            // An error, an exception or a stop left it open: rolled back before anything
            // propagates, or the next COMMIT on `conn` would commit the failed handler's
            // writes and its id.
            co_await conn.abandon_transaction();
        }
        if (thrown) {
            std::rethrow_exception(thrown);
        }
        if (*out) {
            (void)d.ack();  // committed (a duplicate's record, earlier; or ours, just now)
        }
        co_return std::move(*out);
    }
    /// Records `id` in the transaction open on `conn`: true if it was new, false if already
    /// there. Expires old ids on every `expire_every`-th call. For consumers that are not bus
    /// deliveries.
    auto record(pg_connection& conn, message_id id) -> task<result<bool>>;
    /// Deletes up to `limit` ids older than the window; returns how many.
    auto expire(pg_connection& conn, std::uint32_t limit = 10'000) -> task<result<std::uint64_t>>;

private:
    /// BEGIN, the id, the handler and COMMIT; a duplicate's transaction is rolled back. On any
    /// failure the transaction is left to handle() to end.
    template <typename Fn>
    auto handle_in_transaction(pg_connection& conn, const delivery& d, Fn& fn)
        -> task<result<inbox_outcome>> {
        auto begun = co_await conn.query("BEGIN");
        if (!begun) {
            co_return begun.error();
        }
        auto fresh = co_await record(conn, d.message().id);
        if (!fresh) {
            co_return fresh.error();
        }
        if (!*fresh) {
            auto rolled_back = co_await conn.query("ROLLBACK");
            if (!rolled_back) {
                co_return rolled_back.error();
            }
            co_return inbox_outcome::duplicate;
        }
        result<void> r = co_await fn(conn, d.message());
        if (!r) {
            co_return r.error();
        }
        auto committed = co_await conn.query("COMMIT");
        if (!committed) {
            co_return committed.error();  // the server rolled it back: nothing is recorded
        }
        co_return inbox_outcome::processed;
    }

    pg_inbox_options options_;
    std::string insert_sql_;
    std::string expire_sql_;
    std::atomic<std::uint32_t> calls_{0};  // relaxed: only spreads the expiry
};

}  // namespace weft::bus
