#pragma once

// The IO home's load window (runtime_core's class comment): what a worker publishes at the end
// of each window, and the saturated streak it keeps to say whether the home should spread.

#include <algorithm>
#include <array>

namespace weft::detail {

inline constexpr unsigned io_home_spread_busy_permille = 950;
inline constexpr unsigned io_home_spread_windows = 10;
inline constexpr unsigned io_home_spread_sleeps = 10;  // in io_home_spread_windows windows

/// One window of a worker's load, as it published it.
struct io_home_window {
    unsigned busy_permille = 0;  // time its thread ran or waited to run / wall time
    unsigned sleeps = 0;         // times its thread blocked (voluntary context switches)
    unsigned saturated = 0;      // saturated windows in a row, this one included (io_home_streak)
};

/// A worker's saturated streak (owner only): it closes each of its windows here and publishes
/// what close returns. A window is saturated when its thread wanted a CPU for at least
/// io_home_spread_busy_permille of it and slept at most io_home_spread_sleeps times in the last
/// io_home_spread_windows windows, this one included (100 ms, at most 100 sleeps a second). A
/// sleep is a block, not a park: a park whose wait returns at once (completions already there)
/// is none. Not "no sleep in the window": a saturated home still blocks now and then
/// (docs/design/decisions.md; bench/http/profile/threads_run.sh).
struct io_home_streak {
    unsigned windows = 0;                                   // saturated windows in a row
    std::array<unsigned, io_home_spread_windows> sleeps{};  // the last windows' sleeps (ring)
    unsigned next = 0;                                      // the oldest entry of `sleeps`

    auto close(unsigned busy_permille, unsigned window_sleeps) noexcept -> io_home_window {
        sleeps[next] = window_sleeps;
        next = (next + 1) % io_home_spread_windows;
        unsigned recent = 0;
        for (const unsigned n : sleeps) {
            recent += std::min(n, io_home_spread_sleeps + 1);  // (no overflow)
        }
        const bool saturated =
            busy_permille >= io_home_spread_busy_permille && recent <= io_home_spread_sleeps;
        windows = saturated ? windows + 1 : 0;
        return {.busy_permille = busy_permille, .sleeps = window_sleeps, .saturated = windows};
    }
};

}  // namespace weft::detail
