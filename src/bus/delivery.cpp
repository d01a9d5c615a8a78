#include "weft/bus/delivery.hpp"

#include "delivery_counters.hpp"
#include "weft/bus/backend.hpp"

namespace weft::bus {

auto delivery::ack() -> result<void> {
    auto r = source_->ack(token_);
    if (r && counters_) {
        counters_->acks.inc();
    }
    return r;
}

auto delivery::nack(std::chrono::milliseconds delay) -> result<void> {
    auto r = source_->nack(token_, delay);
    if (r && counters_) {
        counters_->nacks.inc();
        // The broker dead-letters the last delivery it allows when it is nacked.
        if (counters_->max_deliveries != 0 && attempt_ >= counters_->max_deliveries) {
            counters_->dead_letters.inc();
        }
    }
    return r;
}

auto delivery::term(std::string_view reason) -> result<void> {
    auto r = source_->term(token_, reason);
    if (r && counters_) {
        counters_->dead_letters.inc();
    }
    return r;
}

auto delivery::in_progress() -> result<void> { return source_->in_progress(token_); }

}  // namespace weft::bus
