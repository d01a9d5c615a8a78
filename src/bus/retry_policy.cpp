#include "weft/bus/retry_policy.hpp"

#include <algorithm>

namespace weft::bus {

auto retry_policy::window_after(std::uint32_t attempt) const noexcept -> std::chrono::milliseconds {
    if (attempt <= immediate_retries) {
        return std::chrono::milliseconds{0};
    }
    const std::uint32_t n = attempt - immediate_retries - 1;
    const std::int64_t limit = std::max<std::int64_t>(cap.count(), 0);
    std::int64_t w = std::max<std::int64_t>(base.count(), 0);
    // Doubling stops at the cap, so it cannot overflow however many retries came before.
    for (std::uint32_t i = 0; i < n && w < limit; ++i) {
        w *= 2;
    }
    return std::chrono::milliseconds{std::min(w, limit)};
}

auto retry_policy::delay_after(std::uint32_t attempt, double unit) const noexcept
    -> std::chrono::milliseconds {
    const auto w = window_after(attempt);
    if (!jitter) {
        return w;
    }
    const double u = std::clamp(unit, 0.0, 1.0);
    return std::chrono::milliseconds{
        static_cast<std::int64_t>(static_cast<double>(w.count()) * u + 0.5)};
}

}  // namespace weft::bus
