#pragma once

#include <utility>

#include "weft/metrics/detail/series_ref.hpp"

namespace weft::metrics {

/// A value that goes up and down (jobs in progress): one series of a gauge family. Its value
/// is the sum of every add() so far, kept per thread like counter's (any thread, no lock).
///
/// There is no set(): a value owned by one place (a queue's length, a pool's size) is read at
/// collection instead, by a collector (registry::add_collector), which is also cheaper than
/// keeping a copy up to date.
///
///     auto busy = reg.add_gauge("app_jobs_in_progress", "Jobs being served now.");
///     busy.add(1);
///     busy.add(-1);
class gauge {
public:
    explicit gauge(detail::series_ref s) noexcept : s_(std::move(s)) {}

    void add(double v) noexcept { detail::add_f64(*s_.cells(), v); }
    void inc() noexcept { add(1.0); }
    void dec() noexcept { add(-1.0); }

private:
    detail::series_ref s_;
};

}  // namespace weft::metrics
