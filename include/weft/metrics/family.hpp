#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string_view>
#include <utility>

#include "weft/metrics/counter.hpp"
#include "weft/metrics/detail/series_ref.hpp"
#include "weft/metrics/gauge.hpp"
#include "weft/metrics/histogram.hpp"

namespace weft::metrics {

namespace detail {
struct family_data;  // src/metrics/registry_state.hpp
/// The series of `f` with these label values, made on first use. Throws std::invalid_argument
/// for the wrong number of values.
auto find_series(const std::shared_ptr<registry_state>& r,
                 family_data& f,
                 std::span<const std::string_view> values) -> series_ref;
}  // namespace detail

/// A metric family with a fixed set of label names (registry::add_counter_family and friends):
/// `with(values)` gives the series for one combination of label values, in the order of the
/// names. Any thread; with() takes the registry's lock, so a hot path keeps the handle it
/// returns rather than calling with() per event.
///
///     auto requests = reg.add_counter_family("app_requests", "Requests.", {"method", "status"});
///     auto get_ok = requests.with({"GET", "2xx"});
///     get_ok.inc();
template <typename Metric>
class family {
public:
    family(std::shared_ptr<detail::registry_state> r, detail::family_data* f) noexcept
        : r_(std::move(r)), f_(f) {}

    [[nodiscard]] auto with(std::span<const std::string_view> values) const -> Metric {
        return Metric{detail::find_series(r_, *f_, values)};
    }
    [[nodiscard]] auto with(std::initializer_list<std::string_view> values) const -> Metric {
        return with(std::span<const std::string_view>(values.begin(), values.size()));
    }

private:
    std::shared_ptr<detail::registry_state> r_;
    detail::family_data* f_;
};

using counter_family = family<counter>;
using gauge_family = family<gauge>;
using histogram_family = family<histogram>;

}  // namespace weft::metrics
