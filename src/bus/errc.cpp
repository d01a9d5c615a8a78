#include "weft/bus/errc.hpp"

#include <string>

namespace weft::bus {
namespace {
class bus_category_impl final : public std::error_category {
public:
    [[nodiscard]] auto name() const noexcept -> const char* override { return "weft.bus"; }
    [[nodiscard]] auto message(int ev) const -> std::string override {
        switch (static_cast<bus_errc>(ev)) {
            case bus_errc::publisher_closed:
                return "publisher closed";
            case bus_errc::subscription_closed:
                return "subscription closed";
            case bus_errc::malformed_envelope:
                return "malformed envelope (truncated, or a length past its end)";
            case bus_errc::unsupported_version:
                return "unsupported envelope encoding version";
            case bus_errc::not_pending:
                return "delivery no longer pending (already settled, expired or its "
                       "subscription closed)";
            case bus_errc::message_too_large:
                return "message too large for the broker";
            case bus_errc::broker_unreachable:
                return "broker unreachable (not connected)";
            case bus_errc::no_stream:
                return "no stream or topic on the broker for this topic";
            case bus_errc::broker_error:
                return "the broker refused the request";
            case bus_errc::relay_active:
                return "another outbox relay is running on this outbox";
            case bus_errc::unconfirmed:
                return "the broker did not confirm this message (it may or may not be stored)";
            case bus_errc::not_expressible:
                return "the envelope cannot be sent as a CloudEvent: each header name must be a "
                       "CloudEvents attribute name (1 to 20 of a-z and 0-9, not specversion, id, "
                       "type, time, subject or data) given once, the type must not be empty and "
                       "all text must be UTF-8";
            case bus_errc::malformed_event:
                return "a received message is not a valid event in the wire format its headers "
                       "declare (CloudEvents binary or structured, or weft's encoding)";
        }
        return "unknown weft.bus error";
    }
};
}  // namespace

auto bus_category() noexcept -> const std::error_category& {
    static const bus_category_impl cat;
    return cat;
}

}  // namespace weft::bus
