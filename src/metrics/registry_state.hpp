#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "weft/metrics/detail/cells.hpp"
#include "weft/metrics/family_snapshot.hpp"
#include "weft/metrics/registry.hpp"

namespace weft::metrics::detail {

/// A registered family. Fixed once registered, apart from `series`.
struct family_data {
    std::string name;
    std::string help;
    metric_type type = metric_type::counter;
    std::vector<std::string> label_names;
    std::vector<double> bounds;  // histogram only
    /// Cells per series: 1, or for a histogram bounds + 1 buckets (the last +Inf) and the sum.
    std::uint32_t width = 1;
    std::map<std::vector<std::string>, std::uint32_t> series;  // label values -> first cell
};

/// A registry's shared state (registry, its handles and the threads' shards keep it alive).
///
/// Invariant, per cell c, at any moment mu is held:
///   recorded(c) == retired[c] + sum over shards s of s->chunks[c / chunk_cells][c % chunk_cells]
/// (a thread's shard leaves `shards` in the same critical section that adds it to retired).
struct registry_state {
    registry_state();

    const std::uint64_t id;  // process-unique, never 0 (detail::last_shard)
    /// Held while collectors run and while one is removed, so that a removed collector is
    /// never called again (taken before mu, never after it).
    std::mutex collect_mu;
    mutable std::mutex mu;             // guards everything below
    std::deque<family_data> families;  // stable addresses (family handles point here)
    std::uint32_t next_cell = 0;
    std::vector<bool> is_double;         // per cell: holds a double's bits (gauge, sum)
    std::vector<std::uint64_t> retired;  // per cell: what exited threads recorded
    std::vector<shard*> shards;          // the live threads' shards
    std::map<std::uint64_t, collect_fn> collectors;
    std::uint64_t next_collector = 1;

    /// Cells for a series of `width`, never straddling a chunk. mu held.
    auto allocate(std::uint32_t width, bool double_last) -> std::uint32_t;
    /// The recorded value of cell c (see the invariant). mu held.
    [[nodiscard]] auto read_u64(std::uint32_t c) const noexcept -> std::uint64_t;
    [[nodiscard]] auto read_f64(std::uint32_t c) const noexcept -> double;
    /// Folds `s` into retired and drops it from shards. mu held.
    void retire(shard& s) noexcept;
};

}  // namespace weft::metrics::detail
