#pragma once

// What weft::io asks the scheduler about where a stream's multishot receive belongs
// (runtime_options::consolidate_io). Implemented in src/sched/runtime_core.cpp.

#include <coroutine>
#include <cstdint>

namespace weft::detail {

/// The runtime's choice of ring for multishot receives, as one worker reads it.
struct io_home {
    /// runtime_options::consolidate_io is on (with stealing and 2+ workers).
    bool enabled = false;
    /// The worker whose ring gathers every receive, or -1: none (each stays where it was armed,
    /// except that one gathered under an earlier home moves once, to the worker its socket
    /// hashes to: detail::spread_worker in src/io).
    int worker = -1;
    /// Changes with every change of `worker` (a receive records the epoch it was armed in).
    std::uint32_t epoch = 0;
    /// The runtime's worker count.
    unsigned workers = 0;
};

/// On a runtime worker thread: this runtime's io_home (off a runtime worker: disabled). A relaxed
/// read: a reader that waits just after a change sees it at its next wait.
[[nodiscard]] auto current_io_home() noexcept -> io_home;

/// On a runtime worker thread: is the calling worker its runtime's IO home? It then keeps what
/// its completions wake for itself (wakes no helper for a batch), until it saturates.
[[nodiscard]] auto current_worker_is_io_home() noexcept -> bool;

/// On a runtime worker thread: the index of the calling worker.
[[nodiscard]] auto current_worker_index() noexcept -> unsigned;

/// On a runtime worker thread: run `h` on worker `index` of the same runtime (its inbox, which no
/// other worker takes from). Throws std::bad_alloc.
void post_to_worker(unsigned index, std::coroutine_handle<> h);

/// Test hook, on a runtime worker thread: from now on this runtime's home is `worker` (-1:
/// none), whatever the load; the automatic choice stays off for the runtime's life. Throws
/// std::out_of_range for a worker the runtime does not have.
void force_io_home_for_test(int worker);

/// On a runtime worker thread: how often this runtime's home changed (automatic or forced).
[[nodiscard]] auto io_home_changes() noexcept -> std::uint64_t;

}  // namespace weft::detail
