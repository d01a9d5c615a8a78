#pragma once

#include <memory>

#include "weft/bus/retry_policy.hpp"

namespace weft::bus::detail {

struct delivery_counters;

/// What a subscriber fixes for each subscription it makes, shared (immutable) by the
/// subscription and read by subscription::next and fail.
struct subscription_state {
    retry_policy retry{};
    std::shared_ptr<delivery_counters> counters{};  ///< null: no metrics
};

}  // namespace weft::bus::detail
