#pragma once

// Where a metric's values live: every thread that records into a registry has its own cells
// for it (a shard), so recording is a load and a store to memory no other thread writes.
//
// Layout: a series owns `width` consecutive cell numbers of its registry (a counter or gauge 1,
// a histogram its buckets + 1 for the sum), never straddling a chunk. A thread's shard holds
// up to max_chunks chunks of chunk_cells cells, each allocated the first time the thread
// records into one of its cells. A published chunk never moves or shrinks, so the collector may
// read its cells while the owner writes them.
//
// Who writes what:
// - A cell: only its shard's owner thread (load + store, relaxed: no other thread writes it, so
//   no read-modify-write is needed; the collector's relaxed load sees some value it stored).
// - shard::chunks[i]: the owner, once, with release (publishes the zeroed chunk); the collector
//   loads it with acquire.
// Exactness: a count read after the recording threads' work is known to be done (a task
// joined, a thread joined) is exact: that join orders the stores before the read.
// When a thread exits, its cells are added to the registry's retired totals under the
// registry's lock (which the collector also holds), so nothing recorded is lost or counted
// twice.

#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace weft::metrics::detail {

struct registry_state;  // src/metrics/registry_state.hpp

inline constexpr std::uint32_t chunk_cells = 512;
inline constexpr std::uint32_t max_chunks = 256;

struct cell_chunk {
    std::array<std::atomic<std::uint64_t>, chunk_cells> cells{};
};

struct shard {
    std::array<std::atomic<cell_chunk*>, max_chunks> chunks{};
};

/// The calling thread's last shard (trivial, so reading it costs no guard): a process records
/// into one registry almost always.
struct last_shard {
    std::uint64_t registry_id = 0;  // 0: none (ids start at 1)
    shard* s = nullptr;
};
inline thread_local last_shard tl_last_shard{};

/// This thread's last_shard, its address found anew at each call. A coroutine may resume on
/// another thread between two records, while a compiler, which takes a function's thread as
/// fixed, may keep a thread_local's address in a register across the suspension (a loop of
/// records with a co_await in it then writes the first thread's cells from the second: lost
/// updates, seen under TSan). Out of line, the address cannot be reused; the cost is a call.
[[gnu::noinline]] auto this_thread_last_shard() noexcept -> last_shard&;

/// Slow path of local_cells: finds or makes the calling thread's shard of `r` and the chunk
/// holding `cell`. Allocation failure terminates (it is called from noexcept recording).
auto local_cells_slow(const std::shared_ptr<registry_state>& r,
                      std::uint64_t id,
                      std::uint32_t cell) noexcept -> std::atomic<std::uint64_t>*;

/// The calling thread's cell `cell` of registry `r` (whose id is `id`); the series' other
/// cells follow it (a series never straddles a chunk).
inline auto local_cells(const std::shared_ptr<registry_state>& r,
                        std::uint64_t id,
                        std::uint32_t cell) noexcept -> std::atomic<std::uint64_t>* {
    const last_shard& l = this_thread_last_shard();
    if (l.registry_id == id) [[likely]] {
        cell_chunk* c = l.s->chunks[cell / chunk_cells].load(std::memory_order_relaxed);
        if (c != nullptr) [[likely]] {
            return &c->cells[cell % chunk_cells];
        }
    }
    return local_cells_slow(r, id, cell);
}

/// Owner-only updates (see the file comment: no other thread writes the cell).
inline void add_u64(std::atomic<std::uint64_t>& c, std::uint64_t n) noexcept {
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}
inline void add_f64(std::atomic<std::uint64_t>& c, double v) noexcept {
    const double now = std::bit_cast<double>(c.load(std::memory_order_relaxed));
    c.store(std::bit_cast<std::uint64_t>(now + v), std::memory_order_relaxed);
}

}  // namespace weft::metrics::detail
