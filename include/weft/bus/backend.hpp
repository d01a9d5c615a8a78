#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "weft/bus/ack.hpp"
#include "weft/bus/delivery.hpp"
#include "weft/bus/envelope.hpp"
#include "weft/bus/envelope_codec.hpp"
#include "weft/core/result.hpp"
#include "weft/core/task.hpp"

namespace weft::bus {

/// What a backend can promise; the conformance suite skips what a backend declares it lacks.
struct backend_features {
    bool durable = false;           ///< acknowledged messages survive a process crash
    bool deduplicates_ids = false;  ///< a re-published id is dropped (within a window)
    bool can_pause = false;         ///< tests may hold its acks (pause() / resume())
    bool returns_on_close = false;  ///< a closed member's unsettled deliveries go to the others
                                    ///< at once, not after the ack timeout
    bool keeps_partition_prefix = false;  ///< what it stores of one key's messages, sent in
                                          ///< order without awaiting each ack, is a prefix of
                                          ///< them in order (an outbox relay may keep several
                                          ///< of a key unacknowledged)
};

/// What a publisher tells its producer about where outcomes go. `complete(slot, outcome)` is
/// called exactly once per `backend_producer::start`, from any thread (inline inside start, a
/// client library's callback thread, a weft task), and never blocks: the publisher has room for
/// every outcome it lets start (in-flight plus unread results <= max_pending).
class publish_sink {
public:
    virtual void complete(std::uint32_t slot, result<ack> outcome) noexcept = 0;

protected:
    publish_sink() = default;
    publish_sink(const publish_sink&) = default;
    auto operator=(const publish_sink&) -> publish_sink& = default;
    ~publish_sink() = default;
};

/// The backend side of one publisher. Made by backend::make_producer; used by one publisher.
class backend_producer {
public:
    virtual ~backend_producer() = default;
    /// Sends `env` (its id and time already set). Never blocks and never waits: the outcome is
    /// reported through the sink with `slot`, possibly before start returns. `slot` <
    /// max_pending, and no two messages in flight share one. A start that throws has reported
    /// no outcome and reports none: the publisher takes `slot` back and the exception reaches
    /// the caller of publish.
    virtual void start(envelope env, std::uint32_t slot) = 0;
    /// As start, for an envelope already encoded (its views valid during the call only), for a
    /// producer that sends the encoding as it is (Kafka): true when it took it; false, without
    /// any other effect, where it only takes envelopes (the publisher then decodes and calls
    /// start).
    virtual auto start_encoded(const encoded_envelope& /*e*/, std::uint32_t /*slot*/) -> bool {
        return false;
    }
    /// No start() follows. Outcomes still in flight are reported as they arrive.
    virtual void close() noexcept = 0;
};

/// What a subscription asks of the broker: one member of `group` on `topic`. The group's
/// settings (ack_wait, max_deliveries, dead_letter_topic) are fixed by its first member.
struct consumer_config {
    std::string topic{};
    std::string group{};
    std::chrono::milliseconds ack_wait{30'000};
    std::uint32_t max_deliveries = 0;  ///< 0: no limit
    std::string dead_letter_topic{};   ///< never empty here (the subscriber picks a default)
};

/// The backend side of one member of a consumer group (one subscription).
/// next() is consumer-side: one at a time per member. The settle calls may come from any
/// thread, for any delivery this member handed out, and never wait.
class backend_consumer {
public:
    virtual ~backend_consumer() = default;
    /// The next delivery for this member; waits while the group has none due. Returns
    /// `subscription_closed` once closed, `operation_canceled` when the awaiting task is stopped.
    virtual auto next() -> task<result<delivery>> = 0;
    virtual auto ack(std::uint64_t token) -> result<void> = 0;
    virtual auto nack(std::uint64_t token, std::chrono::milliseconds delay) -> result<void> = 0;
    virtual auto term(std::uint64_t token, std::string_view reason) -> result<void> = 0;
    virtual auto in_progress(std::uint64_t token) -> result<void> = 0;
    /// Ends the membership (idempotent): a waiting next() returns subscription_closed.
    virtual void close() noexcept = 0;
};

/// A connection to one broker, behind which publishers and subscribers work the same way
/// whatever the broker is. Implemented by `memory_broker` (in process); NATS JetStream and
/// Kafka backends will implement it too. Must outlive every publisher and subscriber using it.
/// Any thread may call any member.
class backend {
public:
    virtual ~backend() = default;
    [[nodiscard]] virtual auto name() const noexcept -> std::string_view = 0;
    [[nodiscard]] virtual auto features() const noexcept -> backend_features = 0;
    /// Setup failures (an unreachable broker) are error values.
    virtual auto make_producer(publish_sink& sink, std::uint32_t max_pending)
        -> result<std::unique_ptr<backend_producer>> = 0;
    virtual auto make_consumer(consumer_config config)
        -> task<result<std::shared_ptr<backend_consumer>>> = 0;
};

}  // namespace weft::bus
