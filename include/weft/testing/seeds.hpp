#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>

#include "weft/core/task.hpp"
#include "weft/sched/runtime.hpp"

namespace weft::testing {

/// runtime_options for a deterministic runtime: one worker thread that picks the next task to
/// run from everything runnable with a generator seeded by `seed`, on a test clock
/// (test_clock_runtime; `auto_advance` as there). The same seed gives the same interleaving of
/// a body whose tasks talk only through weft (channels, events, timers, the memory broker);
/// real IO completions and spawn_blocking calls arrive when the kernel or a thread delivers
/// them, and are not replayed.
[[nodiscard]] auto seeded_runtime(std::uint64_t seed, bool auto_advance = true) -> runtime_options;

struct seed_options {
    /// Time as in seeded_runtime.
    bool auto_advance = true;
    /// Asked after each seed's run: did it fail without throwing (e.g. GoogleTest's
    /// `[] { return ::testing::Test::HasFailure(); }`)? Empty: only an exception fails a run.
    std::function<bool()> failed = {};
};

/// What run_seeds throws for the first seed whose run failed: what() names the seed and the
/// command line that reruns it alone.
class seed_failure : public std::runtime_error {
public:
    seed_failure(std::uint64_t seed, const std::string& what)
        : std::runtime_error(what), seed_(seed) {}
    [[nodiscard]] auto seed() const noexcept -> std::uint64_t { return seed_; }

private:
    std::uint64_t seed_;
};

/// Runs `body(seed)` on a fresh seeded_runtime for seeds 1..n, stopping at the first run that
/// throws or that `o.failed` reports. That seed is printed on stderr with how to rerun it
/// (`WEFT_TEST_SEED=<seed>`), and seed_failure is thrown. With WEFT_TEST_SEED set in the
/// environment only that seed runs: the failing run replays exactly. Returns the seeds run.
///
///     weft::testing::run_seeds(200, [&](std::uint64_t) -> weft::task<void> {
///         co_await exercise_the_outbox();  // throws on a broken invariant
///     });
auto run_seeds(unsigned n,
               const std::function<task<void>(std::uint64_t seed)>& body,
               const seed_options& o = {}) -> unsigned;

}  // namespace weft::testing
