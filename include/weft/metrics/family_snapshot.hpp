#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft::metrics {

enum class metric_type : std::uint8_t { counter, gauge, histogram };

/// One series' values at collection.
struct series_snapshot {
    /// In the order of family_snapshot::label_names.
    std::vector<std::string> label_values{};
    /// Counter (a whole number) or gauge.
    double value = 0;
    /// Histogram: cumulative counts, one per family_snapshot::bounds entry, then +Inf (the
    /// count of every observation).
    std::vector<std::uint64_t> buckets{};
    /// Histogram: the sum of every observation.
    double sum = 0;
};

/// One family's values at collection: what registry::collect returns and what a collector
/// (registry::add_collector) appends.
///
/// `name` is the family's name: a counter's samples are exposed as `<name>_total`, a
/// histogram's as `<name>_bucket`, `<name>_sum` and `<name>_count`.
struct family_snapshot {
    std::string name{};
    std::string help{};
    metric_type type = metric_type::counter;
    std::vector<std::string> label_names{};
    /// Histogram: the buckets' upper bounds, increasing, finite (+Inf is implied).
    std::vector<double> bounds{};
    std::vector<series_snapshot> series{};
};

}  // namespace weft::metrics
