#pragma once

// The one place a relative timeout becomes a deadline (sleep_for, with_timeout,
// deadline_timer::expires_after, runtime_options::shutdown_timeout).

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ratio>
#include <type_traits>
#include <utility>

#include "weft/sched/runtime_clock.hpp"

namespace weft::detail {

/// runtime_clock::now() + d, rounded up to the clock's tick (a timer never fires early) and
/// saturated to the clock's range: a deadline past its last tick is time_point::max(), which
/// the timers take as "never" (duration::max() of any unit; a NaN too), and one before its
/// first tick is time_point::min(), a deadline already passed. A plain `now() + d` overflows
/// there (signed overflow: undefined; in practice it wraps, so duration::max() expires at once).
template <typename Rep, typename Period>
[[nodiscard]] auto deadline_after(std::chrono::duration<Rep, Period> d) noexcept
    -> std::chrono::steady_clock::time_point {
    using clock = std::chrono::steady_clock;
    using tick = clock::duration;
    const clock::time_point now = runtime_clock::now();
    const tick::rep now_ticks = now.time_since_epoch().count();
    if constexpr (std::is_integral_v<Rep> && std::ratio_greater_equal_v<Period, clock::period>) {
        // The common case, exact in integers: |d| below 2^62 ticks added to a reading in
        // [0, 2^62) ticks (146 years since boot, in nanoseconds) stays within the range.
        constexpr std::intmax_t limit =
            std::chrono::floor<std::chrono::duration<std::intmax_t, Period>>(
                tick{tick::rep{1} << 62})
                .count();
        if (std::cmp_less_equal(d.count(), limit) && std::cmp_greater_equal(d.count(), -limit) &&
            now_ticks >= 0 && now_ticks < (tick::rep{1} << 62)) {
            return now + std::chrono::ceil<tick>(d);
        }
    }
    // Anything else (floating-point counts, units finer than a tick, counts near the ends of
    // the range) in long double ticks, which hold every int64 exactly and never overflow here.
    static_assert(std::numeric_limits<long double>::digits >= 64);
    const long double at = std::ceil(static_cast<long double>(now_ticks) +
                                     std::chrono::duration<long double, clock::period>(d).count());
    if (!(at < static_cast<long double>(std::numeric_limits<tick::rep>::max()))) {
        return clock::time_point::max();
    }
    if (at <= static_cast<long double>(std::numeric_limits<tick::rep>::min())) {
        return clock::time_point::min();
    }
    return clock::time_point{tick{static_cast<tick::rep>(at)}};
}

}  // namespace weft::detail
