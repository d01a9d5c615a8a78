#pragma once

// The publishing half of an outbox relay, shared by the SQLite and PostgreSQL outboxes:
// publish_batch publishes one claimed batch in order per key (one unacknowledged event per
// key) and records each row's fate; relay_pipeline does the same across batches with a window
// of several per key. Reading, claiming and deleting are the database's (sqlite_outbox.cpp,
// pg_outbox.cpp).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "weft/bus/envelope.hpp"
#include "weft/bus/publisher.hpp"
#include "weft/bus/relay_options.hpp"
#include "weft/core/task.hpp"
#include "weft/sync/event.hpp"

namespace weft::bus::detail {

/// One staged event of a batch. `fate` starts pending; the batch sets it to published or dead
/// (with `reason`), or leaves it pending when the relay is stopping.
struct relay_row {
    enum class fate : unsigned char { pending, published, dead };
    std::int64_t seq = 0;
    std::int64_t staged_ms = 0;
    envelope env;
    /// The envelope's encoding as the outbox stored it, when the relay forwards it as it is
    /// (relay_pipeline sends it with try_publish_encoded_async); `env` then holds only id,
    /// topic and key. Empty: `env` is whole.
    std::string encoded;
    fate outcome = fate::pending;
    std::string reason;

    /// Fills env (and `encoded`, for a relay that forwards the stored bytes: id, topic and key
    /// read out of them, checked as decode checks) from a row's stored encoding. A row that does
    /// not decode is marked dead with the reason: stage() wrote it, so only an edited table gets
    /// here, and a dead letter beats stopping its key forever.
    void load(std::string_view stored, bool forward_encoded);
};

/// The relay's counters (relaxed: statistics, read as a snapshot).
struct relay_counters {
    std::atomic<std::uint64_t> staged{0};
    std::atomic<std::uint64_t> published{0};
    std::atomic<std::uint64_t> retries{0};
    std::atomic<std::uint64_t> dead_lettered{0};
    std::atomic<std::uint64_t> idle_waits{0};
    std::atomic<std::int64_t> oldest_pending_staged_ms{0};  // 0: nothing pending
    std::atomic<std::uint32_t> window{0};                   // set by the relay at its start
    std::atomic<std::uint64_t> peak_unacked_per_key{0};
    std::atomic<std::uint64_t> window_gaps{0};
};

/// The per-key window the relay uses: options.max_unacked_per_key where options.broker keeps a
/// partition prefix, else 1 (and a line on stderr when more was asked for).
[[nodiscard]] auto effective_window(const relay_options& options) -> std::uint32_t;

/// What stops a relay: `stopping` (read acquire, set by stop_relay with release) and `wake`
/// (manual reset, set together with it) to cut short its waits.
struct relay_stop {
    std::atomic<bool> stopping{false};
    event wake{event::reset_mode::manual};
    void request() {
        stopping.store(true, std::memory_order_release);
        wake.set();
    }
    [[nodiscard]] auto requested() const noexcept -> bool {
        return stopping.load(std::memory_order_acquire);
    }
};

/// A key whose publish failed transiently, across batches: it is not tried again before
/// `not_before`; `backoff` is the next wait (doubling up to relay_options::max_backoff).
struct key_retry {
    std::chrono::steady_clock::time_point not_before;
    std::chrono::milliseconds backoff;
};
using retry_map = std::unordered_map<std::string, key_retry>;

/// Publishes `rows` (in seq order): one chain per key, the chains concurrently; within a chain
/// each event is published (awaited) only after the previous one was acknowledged or
/// dead-lettered, so a transient failure never lets a later event of the key overtake.
/// - `deferred` null: a transient failure is retried in place after a doubling back-off; the
///   call returns when every row has a fate (a retrying key holds up the whole batch).
/// - `deferred` given: a transient failure records the key's back-off there and leaves the
///   rest of its chain pending; a chain whose key is still in back-off is not started. The call
///   returns once every chain has finished or been deferred, so the relay can go on with the
///   next batch while the key waits (the caller keeps its pending rows and offers them again,
///   ahead of the key's newer rows). A success clears the key's entry.
/// Returns early when stopping (the rest stay pending). One unacknowledged event per key; a
/// window above one is relay_pipeline's.
auto publish_batch(publisher& pub,
                   std::vector<relay_row>& rows,
                   const relay_options& options,
                   relay_counters& counters,
                   relay_stop& stop,
                   retry_map* deferred = nullptr) -> task<void>;

/// The publishing half of a relay whose per-key window is above one (relay_options::
/// max_unacked_per_key on a broker that keeps a partition prefix: Kafka), continuous across
/// batches: the database side adds each claimed batch while the previous ones are still being
/// acknowledged, and deletes the rows whose fate is final in the background, so no key's
/// window empties at a batch boundary.
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
///   acknowledged too: counted in window_gaps, as publish_batch does) are not sent again
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
///     co_await when_all(database_side(pipe), pipe.pump());
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
    /// Ends pump() (at its next wake: at once when nothing is in flight, else at the next
    /// outcome). Sending stops at once.
    void close();
    /// True once pump() ended (close, stop, cancellation, or the publisher closed).
    [[nodiscard]] auto ended() const -> bool;

    /// Reads outcomes and keeps the windows full until close(), the relay's stop or
    /// cancellation, or the publisher's results() closing. One pump per pipeline.
    auto pump() -> task<void>;

private:
    struct state;
    std::unique_ptr<state> s_;
};

/// Waits until `e` is set or `d` passes (or the task is stopped). Never fails.
auto wait_for_event(event& e, std::chrono::milliseconds d) -> task<void>;

[[nodiscard]] auto now_ms() noexcept -> std::int64_t;

// Crash points for the chaos tests (tests/bus/chaos). Compiled in only where the build defines
// WEFT_OUTBOX_CRASH_POINTS (tests/CMakeLists.txt does, for the outbox libraries and weft::bus
// of a test build); elsewhere all are constant no-ops.
// - crash_point(name): when WEFT_OUTBOX_CRASH_POINT equals `name`, the process ends with
//   _exit(86) (no destructor, no flush, as SIGKILL would) the WEFT_OUTBOX_CRASH_AFTER-th time
//   (default 1) it passes there. Names: "after_ack" (the batch is acknowledged, not yet marked
//   done), "mid_commit" (half the batch deleted inside the finishing transaction, no COMMIT),
//   "after_mark_done" (the control below: marked done, not yet published).
// - fault_mark_done_first(): WEFT_OUTBOX_FAULT=mark_done_first makes the relay delete a batch
//   before publishing it: a deliberately broken relay, the chaos test's positive control for
//   losses.
// - fault_unbounded_window(): WEFT_OUTBOX_FAULT=unbounded_window makes publish_batch publish
//   every row at once, each on its own (no chain per key: a key's later rows do not wait for
//   the acks of its earlier ones), and a row whose publish failed is re-sent by itself after
//   its own back-off while the later rows of its key go on: the control for order. Works with
//   `deferred` (the relays pass it); its retry_map entries are then per row (retry_key).
#if defined(WEFT_OUTBOX_CRASH_POINTS)
inline void crash_point(std::string_view name) noexcept {
    static const char* const wanted = std::getenv("WEFT_OUTBOX_CRASH_POINT");
    static std::atomic<long> left{[] {
        const char* n = std::getenv("WEFT_OUTBOX_CRASH_AFTER");
        return n != nullptr ? std::atol(n) : 1L;
    }()};
    if (wanted != nullptr && name == wanted && left.fetch_sub(1) <= 1) {
        std::_Exit(86);
    }
}
inline auto fault_mark_done_first() noexcept -> bool {
    static const bool on = [] {
        const char* f = std::getenv("WEFT_OUTBOX_FAULT");
        return f != nullptr && std::string_view{f} == "mark_done_first";
    }();
    return on;
}
inline auto fault_unbounded_window() noexcept -> bool {
    static const bool on = [] {
        const char* f = std::getenv("WEFT_OUTBOX_FAULT");
        return f != nullptr && std::string_view{f} == "unbounded_window";
    }();
    return on;
}
#else
inline void crash_point(std::string_view /*name*/) noexcept {}
constexpr auto fault_mark_done_first() noexcept -> bool { return false; }
constexpr auto fault_unbounded_window() noexcept -> bool { return false; }
#endif

/// The retry_map entry that holds `r` back: its key's (under fault_unbounded_window, its own,
/// named "#<seq>").
inline auto find_retry(retry_map& m, const relay_row& r) -> retry_map::iterator {
    return fault_unbounded_window() ? m.find("#" + std::to_string(r.seq)) : m.find(r.env.key);
}

}  // namespace weft::bus::detail
