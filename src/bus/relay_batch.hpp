#pragma once

// The publishing half of an outbox relay, shared by the SQLite and PostgreSQL outboxes: given
// one claimed batch of staged events, publish it in order per key and record each row's fate.
// Reading, claiming and deleting are the database's (sqlite_outbox.cpp, pg_outbox.cpp).

#include <atomic>
#include <cstdint>
#include <string>
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
    fate outcome = fate::pending;
    std::string reason;
};

/// The relay's counters (relaxed: statistics, read as a snapshot).
struct relay_counters {
    std::atomic<std::uint64_t> staged{0};
    std::atomic<std::uint64_t> published{0};
    std::atomic<std::uint64_t> retries{0};
    std::atomic<std::uint64_t> dead_lettered{0};
    std::atomic<std::uint64_t> idle_waits{0};
    std::atomic<std::int64_t> oldest_pending_staged_ms{0};  // 0: nothing pending
};

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

/// Publishes `rows` (in seq order): one chain per key, the chains concurrently; within a chain
/// each event is published (awaited) only after the previous one was acknowledged or
/// dead-lettered; a transient failure is retried after a doubling back-off, keeping the order.
/// Returns when every row has a fate, or when stopping (the rest stay pending).
auto publish_batch(publisher& pub,
                   std::vector<relay_row>& rows,
                   const relay_options& options,
                   relay_counters& counters,
                   relay_stop& stop) -> task<void>;

/// Waits until `e` is set or `d` passes (or the task is stopped). Never fails.
auto wait_for_event(event& e, std::chrono::milliseconds d) -> task<void>;

[[nodiscard]] auto now_ms() noexcept -> std::int64_t;

}  // namespace weft::bus::detail
