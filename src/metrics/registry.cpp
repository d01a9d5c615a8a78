#include "weft/metrics/registry.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <iterator>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include "registry_state.hpp"

namespace weft::metrics {

namespace detail {

namespace {

std::atomic<std::uint64_t> next_registry_id{1};

auto valid_metric_name(std::string_view n) noexcept -> bool {
    if (n.empty()) {
        return false;
    }
    for (std::size_t i = 0; i < n.size(); ++i) {
        const char c = n[i];
        const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
        if (!alpha && !(i > 0 && c >= '0' && c <= '9')) {
            return false;
        }
    }
    return true;
}

auto valid_label_name(std::string_view n) noexcept -> bool {
    if (n.empty() || n.starts_with("__")) {
        return false;
    }
    for (std::size_t i = 0; i < n.size(); ++i) {
        const char c = n[i];
        const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        if (!alpha && !(i > 0 && c >= '0' && c <= '9')) {
            return false;
        }
    }
    return true;
}

[[noreturn]] void bad(std::string_view name, std::string_view why) {
    throw std::invalid_argument("weft::metrics: metric \"" + std::string(name) +
                                "\": " + std::string(why));
}

/// The sample names a family exposes (for clash checks; the family name itself included, as
/// OpenMetrics names families and samples in one space).
auto sample_names(std::string_view name, metric_type t) -> std::vector<std::string> {
    const std::string n(name);
    switch (t) {
        case metric_type::counter:
            return {n, n + "_total", n + "_created"};
        case metric_type::gauge:
            return {n};
        case metric_type::histogram:
            return {n, n + "_bucket", n + "_sum", n + "_count", n + "_created"};
    }
    return {n};
}

/// Checks `f`'s definition; throws std::invalid_argument.
void check_definition(const family_snapshot& f) {
    if (!valid_metric_name(f.name)) {
        bad(f.name, "the name must match [a-zA-Z_:][a-zA-Z0-9_:]*");
    }
    if (f.type == metric_type::counter && f.name.ends_with("_total")) {
        bad(f.name, "a counter is named without _total (the exposition appends it)");
    }
    std::set<std::string_view> seen;
    for (const auto& l : f.label_names) {
        if (!valid_label_name(l)) {
            bad(f.name,
                "label \"" + l + "\" must match [a-zA-Z_][a-zA-Z0-9_]* and not start with __");
        }
        if (f.type == metric_type::histogram && l == "le") {
            bad(f.name, "a histogram cannot have a label named le");
        }
        if (!seen.insert(l).second) {
            bad(f.name, "label \"" + l + "\" is given twice");
        }
    }
    if (f.type == metric_type::histogram) {
        if (f.bounds.size() > chunk_cells - 12) {
            bad(f.name, "at most 500 buckets");
        }
        for (std::size_t i = 0; i < f.bounds.size(); ++i) {
            if (!std::isfinite(f.bounds[i])) {
                bad(f.name, "bucket bounds must be finite (+Inf is always there)");
            }
            if (i > 0 && !(f.bounds[i - 1] < f.bounds[i])) {
                bad(f.name, "bucket bounds must increase strictly");
            }
        }
    }
}

/// Throws if `f`'s samples clash with a family already in `names` (adding its own).
void claim_names(std::set<std::string>& names, const family_snapshot& f) {
    for (auto& s : sample_names(f.name, f.type)) {
        if (!names.insert(s).second) {
            bad(f.name, "its name or a sample name (" + s + ") clashes with another family");
        }
    }
}

}  // namespace

registry_state::registry_state() : id(next_registry_id.fetch_add(1, std::memory_order_relaxed)) {}

auto registry_state::allocate(std::uint32_t width, bool double_last) -> std::uint32_t {
    std::uint32_t first = next_cell;
    if (first % chunk_cells + width > chunk_cells) {
        first = (first / chunk_cells + 1) * chunk_cells;  // never straddle a chunk
    }
    if (first + width > chunk_cells * max_chunks) {
        throw std::length_error("weft::metrics: a registry holds at most " +
                                std::to_string(chunk_cells * max_chunks) + " cells");
    }
    next_cell = first + width;
    is_double.resize(next_cell, false);
    retired.resize(next_cell, 0);
    if (double_last) {
        is_double[first + width - 1] = true;
    }
    return first;
}

auto registry_state::read_u64(std::uint32_t c) const noexcept -> std::uint64_t {
    std::uint64_t v = retired[c];
    for (const shard* s : shards) {
        // acquire: pairs with the owner's release of a new chunk (its cells start at zero).
        if (const cell_chunk* ch = s->chunks[c / chunk_cells].load(std::memory_order_acquire)) {
            v += ch->cells[c % chunk_cells].load(std::memory_order_relaxed);
        }
    }
    return v;
}

auto registry_state::read_f64(std::uint32_t c) const noexcept -> double {
    double v = std::bit_cast<double>(retired[c]);
    for (const shard* s : shards) {
        if (const cell_chunk* ch = s->chunks[c / chunk_cells].load(std::memory_order_acquire)) {
            v += std::bit_cast<double>(ch->cells[c % chunk_cells].load(std::memory_order_relaxed));
        }
    }
    return v;
}

void registry_state::retire(shard& s) noexcept {
    for (std::uint32_t i = 0; i < max_chunks; ++i) {
        const cell_chunk* ch = s.chunks[i].load(std::memory_order_relaxed);  // the owner's own
        if (ch == nullptr) {
            continue;
        }
        const std::uint32_t end = std::min(next_cell, (i + 1) * chunk_cells);
        for (std::uint32_t c = i * chunk_cells; c < end; ++c) {
            const std::uint64_t v = ch->cells[c % chunk_cells].load(std::memory_order_relaxed);
            if (is_double[c]) {
                retired[c] = std::bit_cast<std::uint64_t>(std::bit_cast<double>(retired[c]) +
                                                          std::bit_cast<double>(v));
            } else {
                retired[c] += v;
            }
        }
    }
    std::erase(shards, &s);
}

auto find_series(const std::shared_ptr<registry_state>& r,
                 family_data& f,
                 std::span<const std::string_view> values) -> series_ref {
    if (values.size() != f.label_names.size()) {
        bad(f.name, "expected " + std::to_string(f.label_names.size()) + " label values, got " +
                        std::to_string(values.size()));
    }
    std::vector<std::string> key(values.begin(), values.end());
    std::lock_guard lock(r->mu);
    auto it = f.series.find(key);
    if (it == f.series.end()) {
        const bool double_last = f.type != metric_type::counter;  // a gauge, a histogram's sum
        it = f.series.emplace(std::move(key), r->allocate(f.width, double_last)).first;
    }
    return {.state = r,
            .registry_id = r->id,
            .cell = it->second,
            .bounds = f.bounds.data(),
            .bound_count = static_cast<std::uint32_t>(f.bounds.size())};
}

namespace {

auto register_family(registry_state& r, family_snapshot def) -> family_data* {
    if (def.type == metric_type::histogram && !def.bounds.empty() &&
        std::isinf(def.bounds.back()) && def.bounds.back() > 0) {
        def.bounds.pop_back();
    }
    check_definition(def);
    std::lock_guard lock(r.mu);
    std::set<std::string> names;
    for (family_data& f : r.families) {
        if (f.name == def.name) {
            if (f.type != def.type || f.label_names != def.label_names || f.bounds != def.bounds) {
                bad(def.name, "registered already with another type, labels or buckets");
            }
            return &f;
        }
        claim_names(names, {.name = f.name, .type = f.type});
    }
    claim_names(names, def);
    family_data& f = r.families.emplace_back();
    f.name = std::move(def.name);
    f.help = std::move(def.help);
    f.type = def.type;
    f.label_names = std::move(def.label_names);
    f.bounds = std::move(def.bounds);
    f.width =
        def.type == metric_type::histogram ? static_cast<std::uint32_t>(f.bounds.size()) + 2 : 1;
    return &f;
}

/// Adds `from` into `into` (same family): series with equal label values are summed.
void merge_into(family_snapshot& into, family_snapshot&& from) {
    if (into.type != from.type || into.label_names != from.label_names ||
        (into.type == metric_type::histogram && into.bounds != from.bounds)) {
        bad(into.name, "two collectors give it different types, labels or buckets");
    }
    for (auto& s : from.series) {
        auto same = std::find_if(into.series.begin(), into.series.end(),
                                 [&](const auto& t) { return t.label_values == s.label_values; });
        if (same == into.series.end()) {
            into.series.push_back(std::move(s));
            continue;
        }
        same->value += s.value;
        same->sum += s.sum;
        for (std::size_t i = 0; i < same->buckets.size() && i < s.buckets.size(); ++i) {
            same->buckets[i] += s.buckets[i];
        }
    }
}

}  // namespace

}  // namespace detail

collector_handle::collector_handle(collector_handle&& o) noexcept
    : r_(std::move(o.r_)), id_(std::exchange(o.id_, 0)) {}

auto collector_handle::operator=(collector_handle&& o) noexcept -> collector_handle& {
    if (this != &o) {
        reset();
        r_ = std::move(o.r_);
        id_ = std::exchange(o.id_, 0);
    }
    return *this;
}

collector_handle::~collector_handle() { reset(); }

void collector_handle::reset() noexcept {
    if (auto r = r_.lock(); r && id_ != 0) {
        std::lock_guard running(r->collect_mu);
        std::lock_guard lock(r->mu);
        r->collectors.erase(id_);
    }
    r_.reset();
    id_ = 0;
}

registry::registry() : s_(std::make_shared<detail::registry_state>()) {}

auto registry::add_counter(std::string_view name, std::string_view help) -> counter {
    return add_counter_family(name, help, {}).with({});
}

auto registry::add_counter_family(std::string_view name,
                                  std::string_view help,
                                  std::vector<std::string> labels) -> counter_family {
    return {s_, detail::register_family(*s_, {.name = std::string(name),
                                              .help = std::string(help),
                                              .type = metric_type::counter,
                                              .label_names = std::move(labels)})};
}

auto registry::add_gauge(std::string_view name, std::string_view help) -> gauge {
    return add_gauge_family(name, help, {}).with({});
}

auto registry::add_gauge_family(std::string_view name,
                                std::string_view help,
                                std::vector<std::string> labels) -> gauge_family {
    return {s_, detail::register_family(*s_, {.name = std::string(name),
                                              .help = std::string(help),
                                              .type = metric_type::gauge,
                                              .label_names = std::move(labels)})};
}

auto registry::add_histogram(std::string_view name,
                             std::string_view help,
                             std::vector<double> bounds) -> histogram {
    return add_histogram_family(name, help, {}, std::move(bounds)).with({});
}

auto registry::add_histogram_family(std::string_view name,
                                    std::string_view help,
                                    std::vector<std::string> labels,
                                    std::vector<double> bounds) -> histogram_family {
    return {s_, detail::register_family(*s_, {.name = std::string(name),
                                              .help = std::string(help),
                                              .type = metric_type::histogram,
                                              .label_names = std::move(labels),
                                              .bounds = std::move(bounds)})};
}

auto registry::add_collector(collect_fn fn) -> collector_handle {
    std::lock_guard lock(s_->mu);
    const std::uint64_t id = s_->next_collector++;
    s_->collectors.emplace(id, std::move(fn));
    return {s_, id};
}

auto registry::collect() const -> std::vector<family_snapshot> {
    std::vector<family_snapshot> out;
    std::vector<collect_fn> fns;
    std::lock_guard running(s_->collect_mu);
    {
        std::lock_guard lock(s_->mu);
        const detail::registry_state& r = *s_;
        for (const detail::family_data& f : r.families) {
            family_snapshot& fs = out.emplace_back();
            fs.name = f.name;
            fs.help = f.help;
            fs.type = f.type;
            fs.label_names = f.label_names;
            fs.bounds = f.bounds;
            for (const auto& [values, cell] : f.series) {
                series_snapshot& s = fs.series.emplace_back();
                s.label_values = values;
                switch (f.type) {
                    case metric_type::counter:
                        s.value = static_cast<double>(r.read_u64(cell));
                        break;
                    case metric_type::gauge:
                        s.value = r.read_f64(cell);
                        break;
                    case metric_type::histogram: {
                        std::uint64_t total = 0;
                        for (std::uint32_t i = 0; i + 1 < f.width; ++i) {
                            total += r.read_u64(cell + i);
                            s.buckets.push_back(total);
                        }
                        s.sum = r.read_f64(cell + f.width - 1);
                        break;
                    }
                }
            }
        }
        for (const auto& [id, fn] : r.collectors) {
            fns.push_back(fn);
        }
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    const std::size_t own = out.size();
    std::vector<family_snapshot> extra;
    for (const auto& fn : fns) {
        fn(extra);
    }
    std::set<std::string> names;
    for (const auto& f : out) {
        detail::claim_names(names, f);
    }
    for (auto& f : extra) {
        if (f.type == metric_type::histogram) {
            for (const auto& s : f.series) {
                if (s.buckets.size() != f.bounds.size() + 1) {
                    detail::bad(f.name, "a series needs one bucket per bound and +Inf");
                }
            }
        }
        auto same = std::find_if(out.begin() + static_cast<std::ptrdiff_t>(own), out.end(),
                                 [&](const auto& g) { return g.name == f.name; });
        if (same != out.end()) {
            detail::merge_into(*same, std::move(f));
            continue;
        }
        detail::check_definition(f);
        detail::claim_names(names, f);
        out.push_back(std::move(f));
    }
    return out;
}

auto registry::render(exposition_format f) const -> std::string {
    return metrics::render(collect(), f);
}

auto duration_buckets() -> std::vector<double> {
    return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

}  // namespace weft::metrics
