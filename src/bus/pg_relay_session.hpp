#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "weft/bus/pg_connection.hpp"
#include "weft/bus/pg_outbox.hpp"
#include "weft/core/result.hpp"
#include "weft/core/task.hpp"

namespace weft::bus::detail {

/// One connected PostgreSQL relay session: its connection and the partitions it owns (session
/// advisory locks, which the server drops with the connection: a killed relay's partitions are
/// free at once).
///
/// Rebalancing: `share` is the fair share from the last count of live relays (0: not counted
/// yet in this session); `releasing` the partitions given up but still locked, until the relay
/// holds no row of them (release_drained); `parts` the partition of each row claimed and
/// perhaps still held (pruned as rows leave). Used by one task (the relay's database side).
class pg_relay_session {
public:
    pg_relay_session(const pg_outbox_options& options,
                     std::int32_t lock_class,
                     std::atomic<std::uint32_t>& owned_count);

    std::unique_ptr<pg_connection> conn;
    std::vector<std::int64_t> owned;
    std::vector<std::int64_t> releasing;
    std::uint32_t share = 0;
    std::chrono::steady_clock::time_point next_count{};
    bool take_due = true;
    std::unordered_map<std::int64_t, std::int64_t> parts;

    /// Opens the relay's own connection: connected, `synchronous_commit` off unless
    /// durable_deletes, `enable_sort`, `enable_seqscan` and `jit` off, listening with
    /// listen_notify.
    ///
    /// `enable_sort = off`: the claim (pg_claim) must walk the seq index and stop after a
    /// batch, whatever the table's statistics say. Left to its estimates, PostgreSQL 15 plans it on
    /// a table without statistics (never analyzed: a new outbox, or one autovacuum has not reached
    /// yet) of 10,000 rows as a bitmap scan of every row of the owned partitions and a sort of all
    /// of them (the row locks sit between the sort and the LIMIT, so not even a top-N sort): each
    /// claim then costs the whole backlog, 7 ms at 10,000 rows against 0.6 ms by the index, and a
    /// drain costs backlog^2 / batch rows (at 50,000 rows it chose the index). With sorts off the
    /// ordered index scan is the plan; the relay's other statements have no sort to avoid (the
    /// partition take's sort of at most `partitions` numbers has no other plan and stays). Only the
    /// relay's own session is affected. `enable_seqscan = off` for the batch delete (`seq =
    /// ANY($1)`), which the same table's missing statistics made a sequential scan of the whole
    /// backlog per batch (about 10 rows read per row deleted at 10,000 rows; by the primary key,
    /// one). `jit = off` with them: a plan that keeps a sort carries the
    /// planner's disable cost (1e10), far above jit_above_cost, and the server compiled the
    /// partition take with LLVM: 130 ms of its CPU for a statement of 0.1 ms. No relay statement
    /// runs long enough for JIT to pay.
    auto open() -> task<result<void>>;
    /// Counts the live relays (the presence lock's holders in this database) at most once per
    /// rebalance_interval, sets the fair share, and moves the owned partitions above it to
    /// `releasing` (the highest numbered first): from then on no claim reads them. Each count
    /// also makes a take due (take_partitions). Errors are the connection's.
    auto count_relays() -> task<result<void>>;
    /// Tries to take free partitions, up to the fair share, in one statement: the partitions
    /// neither owned nor being released that pg_locks shows free (a MATERIALIZED list, computed
    /// before any lock is tried, so a partition this session holds is never locked twice: a session
    /// lock taken twice needs two unlocks), then pg_try_advisory_lock on them in order until the
    /// LIMIT has enough. So a relay never holds more than its share, not even for a moment (a lock
    /// taken and given back could make another relay's one try miss it). Only when a take is due
    /// (once per count: a relay under its share does not try on every round trip). Errors are the
    /// connection's.
    auto take_partitions() -> task<result<void>>;
    /// Unlocks the partitions in `releasing` of which the relay holds no row: `held` are the seqs
    /// of every row it holds (claimed and not yet deleted, dead-lettered or dropped), looked up in
    /// rs.parts (which is pruned to them). Called between round trips, so a deletion sent is
    /// committed. Errors are the connection's.
    auto release_drained(const std::vector<std::int64_t>& held) -> task<result<void>>;
    /// Whether release_drained has work: partitions to give up, or `parts` grown well past what a
    /// relay holds (pruned then, so its cost per row stays constant).
    [[nodiscard]] auto release_due() const -> bool;
    /// The connection is gone: so are its advisory locks (the server drops them with the
    /// session), hence every partition owned or being given up.
    void lose();

private:
    const pg_outbox_options& options_;
    std::int32_t lock_class_;
    std::atomic<std::uint32_t>& owned_count_;  // relaxed: a statistic (owned_partitions)
};

}  // namespace weft::bus::detail
