#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "weft/bus/broker_tls.hpp"
#include "weft/bus/dead_letters.hpp"
#include "weft/bus/wire_format.hpp"

namespace weft::bus {

struct kafka_dead_letters_options {
    /// bootstrap.servers: "host:port[,host:port...]".
    std::string brokers = "127.0.0.1:9092";
    /// The dead-letter topic, e.g. "orders.dead-letter".
    std::string topic{};
    /// The consumer group whose committed offsets record which dead letters are settled
    /// (requeued or dropped). Used by this class only: no member ever joins it.
    std::string group = "weft-dead-letters";
    /// How requeue puts the envelope on the wire (as kafka_backend_options::wire).
    wire_options wire{};
    /// Every call to the broker: the bound before it fails (timed_out, broker_unreachable).
    std::chrono::milliseconds timeout{5'000};
    /// TLS to the brokers (as kafka_backend_options::tls).
    broker_tls tls{};
};

/// The dead letters of a Kafka dead-letter topic (see dead_letters). `ref` is
/// "<partition>:<offset>".
///
/// Kafka cannot delete one record, so "removed" is a mark: a dead letter is settled (requeued
/// or dropped) when the admin group (`options.group`) has committed, for its partition, an
/// offset past it, or when its offset is in the metadata of that commit (the settled offsets
/// above the committed one, comma-separated). Settling one commits the partition's offset past
/// every settled record at its front, the rest in the metadata; the records stay in the topic
/// until its retention removes them, and a consumer of the topic still reads them. The
/// metadata is bounded by the broker (offset.metadata.max.bytes, 4 KiB by default: about 400
/// offsets settled out of order ahead of an unsettled one); past it a settle fails with
/// message_too_large and changes nothing.
///
/// A record the consumer could not read (its copy carries `weft-malformed`), or any record of
/// the topic that is not an event, is listed with the reason "malformed: <defect>" and its
/// key, headers and payload as they are; requeue refuses it (malformed_event: it would come
/// back), drop settles it.
///
/// requeue publishes the original envelope to its topic (the `weftoriginaltopic` header),
/// waits for Kafka's acknowledgement, then settles the dead letter (not atomic: see
/// dead_letters). Blocking (its own clients); a broker that cannot be reached is an error
/// value of the call (broker_unreachable or timed_out), never an exception. Settling reads,
/// then commits the admin group's offset: one process at a time per group.
///
///     weft::bus::kafka_dead_letters dead{{.brokers = "k1:9092", .topic = "orders.dead-letter"}};
///     for (const auto& d : dead.list(100).value()) { std::cout << d.ref << ' ' << d.reason; }
class kafka_dead_letters final : public dead_letters {
public:
    /// Throws std::system_error (invalid_argument) for a configuration librdkafka refuses or
    /// an empty topic.
    explicit kafka_dead_letters(kafka_dead_letters_options options);
    ~kafka_dead_letters() override;

    auto list(std::size_t limit) -> result<std::vector<dead_letter>> override;
    auto show(std::string_view ref) -> result<dead_letter> override;
    auto requeue(std::string_view ref) -> result<void> override;
    auto drop(std::string_view ref) -> result<void> override;

private:
    struct state;
    std::unique_ptr<state> s_;
};

}  // namespace weft::bus
