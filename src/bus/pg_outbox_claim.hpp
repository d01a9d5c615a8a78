#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "weft/bus/pg_connection.hpp"

namespace weft::bus::detail {

/// The planner settings of the relay's own session (pg_relay_session.hpp, open, says why):
/// the claim walks the seq index and stops after a batch, the batch delete goes by the primary
/// key, and no plan is JIT-compiled.
/// tests/bus/test_outbox_pg_plan.cpp explains the claim under exactly these.
inline constexpr std::string_view pg_relay_planner_settings =
    "SET enable_sort = off; SET enable_seqscan = off; SET jit = off";

/// The relay's claim on `table`, with its parameters bound as the relay binds them: the oldest
/// rows of the `owned` partitions, at most `batch_size` (0 counts as 1), keys in `skip_keys`
/// left out, and the seqs of `held` too when it is given and not empty; locked FOR UPDATE SKIP
/// LOCKED; binary results: seq int8, envelope bytea, staged_ms int8, part int4.
[[nodiscard]] auto pg_claim(const std::string& table,
                            const std::vector<std::int64_t>& owned,
                            std::uint32_t batch_size,
                            const std::vector<std::string>& skip_keys,
                            const std::vector<std::int64_t>* held) -> pg_statement;

}  // namespace weft::bus::detail
