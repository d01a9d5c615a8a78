#pragma once

#include <cstdint>
#include <memory>

#include "weft/metrics/detail/cells.hpp"

namespace weft::metrics::detail {

/// One series of a family: its registry (kept alive by the handle) and its first cell.
struct series_ref {
    std::shared_ptr<registry_state> state;
    std::uint64_t registry_id = 0;
    std::uint32_t cell = 0;
    /// Histograms: the family's upper bounds (owned by the registry, fixed once registered).
    const double* bounds = nullptr;
    std::uint32_t bound_count = 0;

    [[nodiscard]] auto cells() const noexcept -> std::atomic<std::uint64_t>* {
        return local_cells(state, registry_id, cell);
    }
};

}  // namespace weft::metrics::detail
