#pragma once

#include <cstdint>
#include <utility>

#include "weft/metrics/detail/series_ref.hpp"

namespace weft::metrics {

/// A count that only goes up (requests served, bytes sent): one series of a counter family.
///
/// Any thread may call inc() at any time; it writes the calling thread's own cell of the
/// series (a load and a store: no lock, no read-modify-write, no line shared with another
/// writer), and the registry sums the threads' cells when it is collected. A copy is another
/// handle to the same series; a handle keeps its registry's state alive.
///
///     weft::metrics::registry reg;
///     auto served = reg.add_counter("app_jobs_served", "Jobs served.");
///     served.inc();
class counter {
public:
    explicit counter(detail::series_ref s) noexcept : s_(std::move(s)) {}

    void inc(std::uint64_t n = 1) noexcept { detail::add_u64(*s_.cells(), n); }

private:
    detail::series_ref s_;
};

}  // namespace weft::metrics
