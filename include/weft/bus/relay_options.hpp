#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <system_error>

namespace weft::trace {
class tracer;
}  // namespace weft::trace

namespace weft::bus {

class backend;

/// How an outbox relay reads, publishes and waits (SQLite and PostgreSQL alike).
/// - `batch_size`: staged events read (claimed) at once. The batches overlap: the next is read
///   while fewer than a batch of events waits to be sent (at most 4 batches held), and
///   acknowledged events are deleted in the background, each after its key's earlier ones.
/// - `min_poll` / `max_poll`: when a read finds nothing the relay waits for a notification
///   (`notify()`, or a commit through sqlite_txn) or this long, doubling from min to max while
///   the table stays empty, back to min once it finds work.
/// - `min_backoff` / `max_backoff`: a publish that fails transiently (broker down, timed out)
///   is tried again after this wait, doubling; the key waits (order is kept), others go on.
/// - `is_permanent`: which publish errors mean the broker will never take this event (it goes
///   to the dead-letter table); empty: message_too_large, malformed_envelope,
///   unsupported_version and invalid_argument.
/// - `max_unacked_per_key`: events of one key published and not yet acknowledged, at most.
///   1 (the default) on every broker. Above 1 only where `broker` is given and its features
///   say `keeps_partition_prefix` (Kafka, idempotent producer); otherwise the relay clamps it
///   to 1, says so once on stderr and reports the window it uses in
///   outbox_metrics::unacked_per_key_limit. Whatever the window, the relay sends through
///   try_publish_encoded_async and reads the publisher's results(): give it a publisher of
///   its own.
///   What order the consumer sees then: docs/guide/outbox.md, "A per-key window on Kafka".
/// - `broker`: the backend the relay's publisher sends through (only read for its features).
/// - `tracer`: a producer span "publish <topic>" per send (bus::start_publish_span), a child
///   of the context stored in the event's traceparent header, ended with the broker's answer
///   (status error when it failed). The stored encoding is forwarded unchanged, so consumers
///   see the creation context. Null (the default): no span, and the relay reads only the
///   envelope's routing fields.
struct relay_options {
    std::uint32_t batch_size = 512;
    std::chrono::milliseconds min_poll{1};
    std::chrono::milliseconds max_poll{500};
    std::chrono::milliseconds min_backoff{10};
    std::chrono::milliseconds max_backoff{2'000};
    std::function<bool(std::error_code)> is_permanent{};
    std::uint32_t max_unacked_per_key = 1;
    const backend* broker = nullptr;
    trace::tracer* tracer = nullptr;
};

}  // namespace weft::bus
