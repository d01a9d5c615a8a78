#include "weft/bus/delivery.hpp"

#include "weft/bus/backend.hpp"

namespace weft::bus {

auto delivery::ack() -> result<void> { return source_->ack(token_); }

auto delivery::nack(std::chrono::milliseconds delay) -> result<void> {
    return source_->nack(token_, delay);
}

auto delivery::term(std::string_view reason) -> result<void> {
    return source_->term(token_, reason);
}

auto delivery::in_progress() -> result<void> { return source_->in_progress(token_); }

}  // namespace weft::bus
