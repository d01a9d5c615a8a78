#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "relay_counters.hpp"
#include "relay_row.hpp"
#include "relay_stop.hpp"
#include "weft/bus/publisher.hpp"
#include "weft/bus/relay_options.hpp"
#include "weft/core/task.hpp"
#include "weft/sync/event.hpp"

namespace weft::bus::detail {

/// The publishing half of every outbox relay (SQLite and PostgreSQL, any per-key window: 1, or
/// relay_options::max_unacked_per_key on a broker that keeps a partition prefix), continuous
/// across batches: the database side (relay_driver) adds each claimed batch while the previous
/// ones are still being acknowledged, and deletes the rows whose fate is final in the
/// background, so no key's window empties at a batch boundary.
///
/// Per key, the rows it holds are one queue in staging order (every batch appends behind the
/// key's earlier rows):
///
///     [ decided prefix | sent, outcome pending ... | not yet sent ... ]
///       popped at once   at most `window` of them    sent as the window frees
///
/// - A row is sent (try_publish_async, in queue order, so the producer numbers them in that
///   order) only while fewer than `window` of its key are unacknowledged.
/// - A row is finished (handed to take_finished, to be deleted or dead-lettered) only when it
///   and every earlier row of its key were acknowledged or rejected for good: the decided
///   prefix. So a row is deleted only after its ack, and never ahead of an earlier row of its
///   key that may still be re-sent.
/// - A transient failure of a key's row n stops the key: nothing more of it is sent, the
///   outcomes of the rest of its window are read, then n and every later row (those
///   acknowledged too: counted in window_gaps) are not sent again
///   before the key's back-off (min_backoff doubling to max_backoff, back to min after a
///   success) has passed; meanwhile the key is "parked" and its newer rows queue behind. Other
///   keys go on.
/// - Outcomes are matched by key and envelope id; one this pipeline did not send (left over
///   from an earlier relay on the same publisher, or from before reset()) is dropped.
///
/// Threads: the database side (add, take_finished, wants_rows, ..., one task) and pump() (the
/// only reader of pub.results()) may run on different workers; every member takes `mu_`,
/// never across a suspension. Both sides may send (add sends what the windows allow at once).
/// Wakes: the pump sets `db_wake` when the database side has work (rows finished, or the
/// pipeline wants rows); add, close and reset set the pump's own event.
///
///     relay_pipeline pipe{pub, options, counters, stop, window, notified};
///     co_await when_all(database_side(pipe), pipe.pump());   // relay_driver's run_relay
class relay_pipeline {
public:
    relay_pipeline(publisher& pub,
                   const relay_options& options,
                   relay_counters& counters,
                   relay_stop& stop,
                   std::uint32_t window,
                   event& db_wake);
    relay_pipeline(const relay_pipeline&) = delete;
    auto operator=(const relay_pipeline&) -> relay_pipeline& = delete;
    ~relay_pipeline();

    /// Takes claimed rows (in seq order, none already held) and sends what the windows allow.
    void add(std::vector<relay_row> rows);
    /// Appends to `into` the rows finished since the last call (published or dead, each after
    /// its key's earlier rows), in the order they were decided; returns how many.
    auto take_finished(std::vector<relay_row>& into) -> std::size_t;
    /// True when fewer than a batch of rows waits to be sent (parked keys' rows not counted)
    /// and the pipeline holds fewer than 4 batches: time to claim the next batch.
    [[nodiscard]] auto wants_rows() const -> bool;
    /// The database side found no more rows (its last claim was short): the pump does not wake
    /// it for rows until the next claim brought some (it polls on its own).
    void set_dry(bool dry);
    /// True when the database side has work: finished rows (a batch, or any once nothing
    /// is in flight), or wants_rows() while not dry, or the pump ended.
    [[nodiscard]] auto db_work() const -> bool;
    /// Seqs of every row held (queued, in flight, finished and not yet taken): a claim leaves
    /// them out.
    [[nodiscard]] auto held_seqs() const -> std::vector<std::int64_t>;
    /// Keys in back-off: a claim may leave their newer rows out.
    [[nodiscard]] auto parked_keys() const -> std::vector<std::string>;
    /// Forgets the rows of the parked keys (back-off, nothing of them in flight) whose oldest
    /// row `gone` selects: they are never sent by this pipeline again and stay staged (the
    /// database side gives their partition up). Returns how many rows were dropped.
    auto drop_parked(const std::function<bool(const relay_row&)>& gone) -> std::size_t;
    /// Rows held, finished ones not yet taken included.
    [[nodiscard]] auto size() const -> std::size_t;
    /// staged_ms of the oldest row held (0: none).
    [[nodiscard]] auto oldest_staged_ms() const -> std::int64_t;
    /// Forgets every row (the database side lost its claim: a PostgreSQL session ended). The
    /// outcomes of what was in flight are dropped when they come.
    void reset();
    /// Wakes pump() (the relay is stopping: it ends once nothing is in flight).
    void wake();
    /// Ends pump() (at its next wake: at once when nothing is in flight, else at the next
    /// outcome). Sending stops at once.
    void close();
    /// True once pump() ended (close, stop, cancellation, or the publisher closed).
    [[nodiscard]] auto ended() const -> bool;
    /// True once the publisher refused a send or closed its results (publisher_closed): the
    /// rows held stay staged, and the relay ends with that error.
    [[nodiscard]] auto publisher_closed() const -> bool;

    /// Reads outcomes and keeps the windows full until close(), cancellation, the publisher's
    /// results() closing, or the relay's stop once the outcome of every send is in (a stop
    /// sends nothing more). One pump per pipeline.
    auto pump() -> task<void>;

private:
    struct state;
    std::unique_ptr<state> s_;
};

}  // namespace weft::bus::detail
