#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include "weft/metrics/detail/series_ref.hpp"

namespace weft::metrics {

/// A distribution over fixed buckets (request durations in seconds): one series of a
/// histogram family. observe(v) counts v in the first bucket whose upper bound is >= v (bounds
/// are inclusive, Prometheus's `le`), or in +Inf, and adds v to the sum; NaN goes to +Inf.
/// Any thread, no lock (see counter).
///
///     auto took = reg.add_histogram("app_job_seconds", "Time per job.", {0.01, 0.1, 1});
///     took.observe(0.05);  // counted in le="0.1", le="1" and le="+Inf"
class histogram {
public:
    explicit histogram(detail::series_ref s) noexcept : s_(std::move(s)) {}

    void observe(double v) noexcept {
        const double* b = s_.bounds;
        const std::uint32_t n = s_.bound_count;
        const auto i =
            std::isnan(v) ? n : static_cast<std::uint32_t>(std::lower_bound(b, b + n, v) - b);
        std::atomic<std::uint64_t>* c = s_.cells();
        detail::add_u64(c[i], 1);
        detail::add_f64(c[n + 1], v);
    }

private:
    detail::series_ref s_;
};

}  // namespace weft::metrics
