#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "weft/metrics/counter.hpp"
#include "weft/metrics/exposition.hpp"
#include "weft/metrics/family.hpp"
#include "weft/metrics/family_snapshot.hpp"
#include "weft/metrics/gauge.hpp"
#include "weft/metrics/histogram.hpp"

namespace weft::metrics {

/// Appends the families a collector owns, read when the registry is collected.
using collect_fn = std::function<void(std::vector<family_snapshot>&)>;

/// Keeps a collector registered; destroying it (or reset()) removes the collector, after which
/// the collector is never called again (a collection under way finishes first).
class collector_handle {
public:
    collector_handle() = default;
    collector_handle(std::weak_ptr<detail::registry_state> r, std::uint64_t id) noexcept
        : r_(std::move(r)), id_(id) {}
    collector_handle(collector_handle&& o) noexcept;
    auto operator=(collector_handle&& o) noexcept -> collector_handle&;
    collector_handle(const collector_handle&) = delete;
    auto operator=(const collector_handle&) -> collector_handle& = delete;
    ~collector_handle();
    void reset() noexcept;

private:
    std::weak_ptr<detail::registry_state> r_;
    std::uint64_t id_ = 0;
};

/// Metric families and the collectors that read values kept elsewhere; rendered for a
/// scraper in the Prometheus text format or OpenMetrics (exposition.hpp).
///
/// A registry is a handle: copies share the same families. Any thread may call anything.
/// Registering takes a lock and checks the name (`[a-zA-Z_:][a-zA-Z0-9_:]*`), the label names
/// (`[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__`, no repeat, `le` not on a histogram) and
/// the bounds; a bad one throws std::invalid_argument. Registering a family again with the same
/// type, labels and bounds returns the existing one; with a different definition, or a name
/// whose samples would clash with another family's (`x_count` beside histogram `x`), throws.
/// A counter's name is given without `_total`, which the exposition appends.
///
/// Recording (counter::inc, gauge::add, histogram::observe) takes no lock: each thread has its
/// own cells (detail/cells.hpp), summed by collect().
///
///     weft::metrics::registry reg;
///     auto jobs = reg.add_counter("app_jobs", "Jobs done.");
///     jobs.inc();
///     std::string page = reg.render(weft::metrics::exposition_format::prometheus_text);
class registry {
public:
    registry();

    [[nodiscard]] auto add_counter(std::string_view name, std::string_view help) -> counter;
    [[nodiscard]] auto add_counter_family(std::string_view name,
                                          std::string_view help,
                                          std::vector<std::string> labels) -> counter_family;
    [[nodiscard]] auto add_gauge(std::string_view name, std::string_view help) -> gauge;
    [[nodiscard]] auto add_gauge_family(std::string_view name,
                                        std::string_view help,
                                        std::vector<std::string> labels) -> gauge_family;
    /// `bounds`: the buckets' upper bounds, strictly increasing and finite (a last +Inf is
    /// dropped: the +Inf bucket is always there), at most 500.
    [[nodiscard]] auto add_histogram(std::string_view name,
                                     std::string_view help,
                                     std::vector<double> bounds) -> histogram;
    [[nodiscard]] auto add_histogram_family(std::string_view name,
                                            std::string_view help,
                                            std::vector<std::string> labels,
                                            std::vector<double> bounds) -> histogram_family;

    /// `fn` appends families read from elsewhere at each collection (on the collecting
    /// thread, under no lock of the registry's). Families of the same name and type from
    /// several collectors are merged: series with the same label values are added up.
    [[nodiscard]] auto add_collector(collect_fn fn) -> collector_handle;

    /// Every family, registered ones in name order first, then the collectors'. Throws
    /// std::invalid_argument when a collector's family has a bad name or clashes with another.
    [[nodiscard]] auto collect() const -> std::vector<family_snapshot>;
    /// collect(), rendered.
    [[nodiscard]] auto render(exposition_format f) const -> std::string;

private:
    std::shared_ptr<detail::registry_state> s_;
};

/// Buckets for durations in seconds, 0.5 ms to 10 s (as the Prometheus clients' defaults,
/// with finer steps below 5 ms for an in-process server).
[[nodiscard]] auto duration_buckets() -> std::vector<double>;

}  // namespace weft::metrics
