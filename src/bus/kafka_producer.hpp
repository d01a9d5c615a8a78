#pragma once

#include <memory>
#include <string_view>

#include "kafka_connection.hpp"
#include "weft/bus/backend.hpp"

namespace weft::bus {

/// The Kafka backend's side of one publisher: its own idempotent librdkafka producer.
///
/// The ack path, step by step:
///   1. start(env, slot) (any weft task): encodes env and hands it to rd_kafka_produceva
///      under `rk_mu` with the slot as the message's opaque. Never blocks:
///      queue.buffering.max.messages is above max_pending, so librdkafka never answers
///      QUEUE_FULL.
///   2. librdkafka's threads batch, send and get the broker's acks; each batch's delivery
///      reports become one DR event on the producer's main queue. The queue's io event writes
///      the eventfd when the queue turns from empty to non-empty (and only then).
///   3. The drain task (one weft task per producer) wakes from wait_readable(efd), resets the
///      eventfd, and polls the queue without waiting until it is empty, handing every message
///      of every DR event to the publisher's sink by its slot. Draining to empty is what makes
///      the edge-only signal safe: an event queued after the last poll signals again.
///   4. The awaited publishes that pass completed are resumed by the drain task, in order, on
///      its worker, before it waits again (completion_run): not spread over the workers.
/// With kafka_ack_path::background_thread, step 3 is librdkafka's background thread instead:
/// it writes each report's outcome into a completion slot allocated up front (indexed by the
/// publisher's slot), appends the batch's slots to a list under one lock and writes the eventfd
/// when the list was empty; the drain task then hands the listed outcomes to the sink.
/// Invariant: started - completed == outstanding <= max_pending.
///
/// A fatal error (the idempotent producer's state is broken; librdkafka then fails what it
/// had queued and refuses new messages with ERR__FATAL) replaces the client: under `rk_mu`
/// a new one becomes current and the broken one retires. From then until every retired client
/// has reported all it had, nothing is produced: each failed message a broken client reports
/// and each message started meanwhile is held; then the held messages are produced on the
/// current client in the order they were started (each message's opaque carries that order
/// beside its slot), and sends go on. So the re-sends reach the new client before any later
/// message, and order per key holds across the recreation (an outbox relay may keep several
/// events of a key unacknowledged). Held: at most max_pending; a publish started while held
/// still returns at once, its outcome comes later.
/// A retired client is destroyed once it has nothing left to report (rd_kafka_outq_len 0).
///
/// Lifetime: the state is shared by the producer and its drain task. close() lets the drain
/// task end once nothing is outstanding; it then destroys the librdkafka client on the
/// backend's closer thread (rd_kafka_destroy joins librdkafka's threads).
class kafka_producer final : public backend_producer {
public:
    static auto make(std::shared_ptr<kafka_backend::connection> conn,
                     publish_sink& sink,
                     std::uint32_t max_pending) -> result<std::unique_ptr<backend_producer>>;

    void start(envelope env, std::uint32_t slot) override;
    auto start_encoded(const encoded_envelope& e, std::uint32_t slot) -> bool override;
    void close() noexcept override;
    ~kafka_producer() override;

    struct state;
    explicit kafka_producer(std::shared_ptr<state> s) noexcept : st_(std::move(s)) {}

private:
    /// Hands `value` and `headers` (taken) to librdkafka, which copies the value.
    void produce(std::string_view topic,
                 std::string_view key,
                 std::string_view value,
                 rd_kafka_headers_t* headers,
                 std::uint32_t slot);

    std::shared_ptr<state> st_;
};

}  // namespace weft::bus
