#pragma once

#include <chrono>
#include <vector>

#include "relay_pipeline.hpp"
#include "relay_row.hpp"
#include "weft/core/result.hpp"
#include "weft/core/task.hpp"

namespace weft::bus::detail {

/// What the relay driver (relay_driver.hpp) asks of an outbox's database: SQLite
/// (sqlite_outbox.cpp) and PostgreSQL (pg_relay_store.hpp) implement it. Every call comes from
/// the driver's one task, one at a time, never two at once.
///
/// A round trip finishes rows (deletes the published ones, moves the dead ones to the dead
/// letters: one transaction, committed before it returns) and claims the next batch after what
/// the relay holds, in seq order. Rows the pipeline holds are never claimed again, and a key the
/// pipeline parked may be left out of a claim (its newer rows would only queue behind).
class relay_store {
public:
    relay_store() = default;
    relay_store(const relay_store&) = delete;
    auto operator=(const relay_store&) -> relay_store& = delete;
    virtual ~relay_store() = default;

    /// Before each round: whatever lets the store claim (PostgreSQL: its session, its
    /// partitions, their rebalancing; nothing for SQLite). `unfinished`: rows the pipeline
    /// finished and the store has not yet deleted (held as much as the pipeline's own).
    /// `stopping`: the relay is ending, it claims nothing more. An error: see lost().
    virtual auto prepare(relay_pipeline& pipe,
                         const std::vector<relay_row>& unfinished,
                         bool stopping) -> task<result<void>> = 0;
    /// True when a claim may find rows (PostgreSQL: the relay owns a partition).
    [[nodiscard]] virtual auto can_claim() const -> bool = 0;
    /// One round trip: finishes `finished` and, with `claim`, claims up to a batch (leaving out
    /// pipe.held_seqs() and, where it matters, pipe.parked_keys()). Returns the claimed rows
    /// (loaded: relay_row::load), empty without `claim`.
    virtual auto round(const std::vector<relay_row>& finished,
                       bool claim,
                       const relay_pipeline& pipe) -> task<result<std::vector<relay_row>>> = 0;
    /// After a failed prepare or round: true when the store lost what the relay holds
    /// (PostgreSQL: the session and its partitions, so other relays may claim those rows now):
    /// the driver forgets every row (they stay staged). False: nothing lost, tried again.
    virtual auto lost() -> bool = 0;
    /// The idle wait (the last claim found nothing): until `notified`, or (PostgreSQL with
    /// listen_notify) a notification on the store's connection, or `d`.
    virtual auto wait_idle(std::chrono::milliseconds d) -> task<void> = 0;
    /// The longest the driver waits between rounds (PostgreSQL: rebalance_interval, so the
    /// relays are counted that often: a relay joining or leaving is seen within about that).
    [[nodiscard]] virtual auto max_wait() const -> std::chrono::milliseconds = 0;
    /// The relay ended (after its last round).
    virtual void end() noexcept = 0;
};

}  // namespace weft::bus::detail
