#pragma once

// Schedule shuffling, for tests (CMake -DWEFT_SHUFFLE=ON; never in a release build). Every
// scheduling decision that may legally go either way is then taken at random from a seed:
// which ready task runs next (the LIFO slot or the deque's newest or oldest entry), whether a
// worker looks at the injector early, whether a thief steals now, whether a spin lock's first
// attempt fails, the order in which IO completions reaped together run, and a yield before a
// fraction of awaited tasks start. Shuffling is on in a process whose environment sets
// WEFT_SHUFFLE_SEED (a number, or "random" for one taken from the clock); the seed is printed
// once, so a failing run replays with the same seed (the interleaving of threads still varies;
// the decisions each thread makes in order do not). Without it a shuffle build schedules as a
// normal one, so one test build serves the plain run and the shuffled runs.
//
// In a normal build WEFT_SHUFFLED(n) is the constant false and costs nothing.

#include <cstdint>

#if defined(WEFT_SHUFFLE) && WEFT_SHUFFLE

namespace weft::detail {

/// True about once in `one_in` calls (a per-thread generator seeded from the process seed);
/// always false while shuffling is off.
[[nodiscard]] auto shuffle_chance(unsigned one_in) noexcept -> bool;
/// The process's seed (reads WEFT_SHUFFLE_SEED and prints it on first use; 0 when unset).
[[nodiscard]] auto shuffle_seed() noexcept -> std::uint64_t;
/// Whether this process shuffles: WEFT_SHUFFLE_SEED is set.
[[nodiscard]] auto shuffle_on() noexcept -> bool;

}  // namespace weft::detail

#define WEFT_SHUFFLED(one_in) (::weft::detail::shuffle_chance(one_in))
#define WEFT_SHUFFLE_BUILD 1

#else

#define WEFT_SHUFFLED(one_in) false
#define WEFT_SHUFFLE_BUILD 0

#endif
