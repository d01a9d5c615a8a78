#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "weft/bus/message_id.hpp"

namespace weft::bus {

/// One header of an envelope. Names are case-sensitive; repeats are allowed and kept in order.
struct header {
    std::string name;
    std::string value;

    friend auto operator==(const header&, const header&) -> bool = default;
};

/// What travels on the bus: an event, its routing and its metadata. A plain value type.
/// - `id`: unique per message (a UUIDv7 from message_id::generate). Left nil, the publisher
///   fills it in; set by the caller (a re-publish from an outbox), brokers that de-duplicate use
///   it to drop the repeat.
/// - `topic`: where it goes (a NATS subject, a Kafka topic). Must not be empty.
/// - `key`: the aggregate it belongs to; brokers keep order per key (Kafka's partition key).
/// - `type`: the event's type name, for consumers that dispatch on it.
/// - `payload`: opaque bytes (any byte values; std::string only as the container).
/// - `time`: when the event happened; left at the epoch, the publisher sets it to now.
///
///     weft::bus::envelope env{.topic = "orders", .key = "order-42", .type = "order.placed",
///                             .payload = R"({"total": 12})"};
struct envelope {
    message_id id{};
    std::string topic{};
    std::string key{};
    std::string type{};
    std::vector<header> headers{};
    std::string payload{};
    std::chrono::system_clock::time_point time{};

    /// The first header named `name`, or nullptr.
    [[nodiscard]] auto find_header(std::string_view name) const noexcept -> const header*;

    friend auto operator==(const envelope&, const envelope&) -> bool = default;
};

}  // namespace weft::bus
