#pragma once

#include <system_error>
#include <type_traits>

namespace weft::bus {

/// Errors of weft::bus operations (category "weft.bus"). Cancellation is
/// `std::errc::operation_canceled` and a timeout `std::errc::timed_out`, as everywhere in weft;
/// a bad argument (an empty topic or group) is `std::errc::invalid_argument`.
enum class bus_errc {
    publisher_closed = 1,  ///< publish after (or while) the publisher closed
    subscription_closed,   ///< next() on a closed subscription (or subscriber)
    malformed_envelope,    ///< decode: truncated input, a length past the end, trailing bytes
    unsupported_version,   ///< decode: a version byte this build does not know
    not_pending,           ///< ack/nack/term/in_progress on a delivery already settled or expired
    message_too_large,     ///< the encoded envelope exceeds the broker's limit
    broker_unreachable,    ///< no connection to the broker (down, or reconnecting)
    no_stream,             ///< no stream (NATS) or topic (Kafka) takes this topic
    broker_error,          ///< the broker refused the request for another reason
    relay_active,          ///< another outbox relay holds this outbox (its file, its partitions)
    unconfirmed,           ///< the broker never confirmed this message: it may or may not be stored
    not_expressible,  ///< publish: the envelope cannot be sent as a CloudEvent (a header name that
                      ///< is not an attribute name, an empty type...): refused, never renamed
    malformed_event,  ///< receive: not a valid event in the wire format its headers declare
};

[[nodiscard]] auto bus_category() noexcept -> const std::error_category&;

[[nodiscard]] inline auto make_error_code(bus_errc e) noexcept -> std::error_code {
    return {static_cast<int>(e), bus_category()};
}

}  // namespace weft::bus

template <>
struct std::is_error_code_enum<weft::bus::bus_errc> : std::true_type {};
