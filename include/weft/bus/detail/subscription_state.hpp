#pragma once

#include <memory>

#include "weft/bus/retry_policy.hpp"

namespace weft::bus::detail {

/// What a subscriber fixes for each subscription it makes, shared (immutable) by the
/// subscription and read by subscription::fail.
struct subscription_state {
    retry_policy retry{};
};

}  // namespace weft::bus::detail
