#pragma once

#include <chrono>
#include <cstdint>

namespace weft::bus {

/// What an outbox reports to its program (a snapshot; counters since the outbox was made, in
/// this process).
/// - `staged`: events staged in transactions that committed.
/// - `published`: events the broker acknowledged (duplicates the broker dropped included).
/// - `retries`: publishes tried again after a transient failure.
/// - `dead_lettered`: events the broker rejected for good, moved to the dead-letter table.
/// - `oldest_pending_age`: how long the oldest event the relay has read and not finished has
///   been staged; zero when it has nothing pending (its last read found the table empty).
struct outbox_metrics {
    std::uint64_t staged = 0;
    std::uint64_t published = 0;
    std::uint64_t retries = 0;
    std::uint64_t dead_lettered = 0;
    /// Times the relay found nothing to publish and began to wait (for a notification or its
    /// poll interval).
    std::uint64_t idle_waits = 0;
    std::chrono::milliseconds oldest_pending_age{0};
    /// The per-key window the relay uses (relay_options::max_unacked_per_key, or 1 where the
    /// broker lacks keeps_partition_prefix); 0 before a relay ran.
    std::uint32_t unacked_per_key_limit = 0;
    /// The most events of one key that were published and unacknowledged at once.
    std::uint64_t peak_unacked_per_key = 0;
    /// Failures (with a window above 1) of an event of a key while a later event of the key,
    /// sent in the same window, was acknowledged: the broker holds that later one ahead of it,
    /// so the order as first stored is broken there. 0 is what the window's guarantee means;
    /// docs/guide/outbox.md, "A per-key window on Kafka", says when it can be otherwise.
    std::uint64_t window_gaps = 0;
};

}  // namespace weft::bus
