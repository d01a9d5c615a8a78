#include "weft/metrics/exposition.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace weft::metrics {

namespace {

auto lower(char c) noexcept -> char {
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
}

auto iequals(std::string_view a, std::string_view b) noexcept -> bool {
    if (a.size() != b.size()) {
        return false;
    }
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (lower(a[i]) != lower(b[i])) {
            return false;
        }
    }
    return true;
}

auto trim(std::string_view s) noexcept -> std::string_view {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
        s.remove_prefix(1);
    }
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
        s.remove_suffix(1);
    }
    return s;
}

/// A number as the formats write it: +Inf, -Inf, NaN, else the shortest round-trip form.
void append_number(std::string& out, double v) {
    if (std::isnan(v)) {
        out += "NaN";
    } else if (std::isinf(v)) {
        out += v > 0 ? "+Inf" : "-Inf";
    } else {
        char buf[32];
        const auto r = std::to_chars(buf, buf + sizeof(buf), v);
        out.append(buf, r.ptr);
    }
}

void append_u64(std::string& out, std::uint64_t v) {
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof(buf), v);
    out.append(buf, r.ptr);
}

/// Label values: backslash, double quote and newline escaped (both formats).
void append_escaped(std::string& out, std::string_view v, bool quote) {
    for (char c : v) {
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '"' && quote) {
            out += "\\\"";
        } else {
            out += c;
        }
    }
}

void append_labels(std::string& out,
                   const family_snapshot& f,
                   const series_snapshot& s,
                   const char* le,
                   double bound) {
    const bool any = !f.label_names.empty() || le != nullptr;
    if (!any) {
        return;
    }
    out += '{';
    for (std::size_t i = 0; i < f.label_names.size(); ++i) {
        if (i > 0) {
            out += ',';
        }
        out += f.label_names[i];
        out += "=\"";
        append_escaped(out, i < s.label_values.size() ? s.label_values[i] : std::string_view{},
                       true);
        out += '"';
    }
    if (le != nullptr) {
        if (!f.label_names.empty()) {
            out += ',';
        }
        out += le;
        out += "=\"";
        append_number(out, bound);
        out += '"';
    }
    out += '}';
}

auto type_name(metric_type t) noexcept -> const char* {
    switch (t) {
        case metric_type::counter:
            return "counter";
        case metric_type::gauge:
            return "gauge";
        case metric_type::histogram:
            return "histogram";
    }
    return "untyped";
}

}  // namespace

auto negotiate(std::string_view accept) noexcept -> exposition_format {
    while (!accept.empty()) {
        const auto comma = accept.find(',');
        std::string_view range = accept.substr(0, comma);
        accept = comma == std::string_view::npos ? std::string_view{} : accept.substr(comma + 1);
        const auto semi = range.find(';');
        const std::string_view type = trim(range.substr(0, semi));
        if (!iequals(type, "application/openmetrics-text")) {
            continue;
        }
        bool zero = false;  // q=0: "not acceptable"
        std::string_view params =
            semi == std::string_view::npos ? std::string_view{} : range.substr(semi + 1);
        while (!params.empty()) {
            const auto next = params.find(';');
            const std::string_view p = trim(params.substr(0, next));
            params = next == std::string_view::npos ? std::string_view{} : params.substr(next + 1);
            if (p.size() >= 2 && lower(p[0]) == 'q' && p[1] == '=') {
                const std::string_view q = p.substr(2);
                zero = q.find_first_not_of("0.") == std::string_view::npos;
            }
        }
        if (!zero) {
            return exposition_format::openmetrics;
        }
    }
    return exposition_format::prometheus_text;
}

auto content_type(exposition_format f) noexcept -> std::string_view {
    return f == exposition_format::openmetrics
               ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
               : "text/plain; version=0.0.4; charset=utf-8";
}

auto render(const std::vector<family_snapshot>& families, exposition_format fmt) -> std::string {
    const bool om = fmt == exposition_format::openmetrics;
    std::string out;
    out.reserve(families.size() * 128);
    for (const family_snapshot& f : families) {
        // The Prometheus text format names a counter's family by its sample (`x_total`);
        // OpenMetrics by the family (`x`).
        const std::string family_name =
            (f.type == metric_type::counter && !om) ? f.name + "_total" : f.name;
        if (!f.help.empty()) {
            out += "# HELP ";
            out += family_name;
            out += ' ';
            append_escaped(out, f.help, om);  // 0.0.4 escapes only backslash and newline
            out += '\n';
        }
        out += "# TYPE ";
        out += family_name;
        out += ' ';
        out += type_name(f.type);
        out += '\n';
        for (const series_snapshot& s : f.series) {
            if (f.type != metric_type::histogram) {
                out += f.type == metric_type::counter ? f.name + "_total" : f.name;
                append_labels(out, f, s, nullptr, 0);
                out += ' ';
                if (f.type == metric_type::counter && s.value >= 0 && s.value < 0x1p64) {
                    append_u64(out, static_cast<std::uint64_t>(s.value));
                } else {
                    append_number(out, s.value);
                }
                out += '\n';
                continue;
            }
            for (std::size_t i = 0; i < s.buckets.size(); ++i) {
                out += f.name;
                out += "_bucket";
                const double bound =
                    i < f.bounds.size() ? f.bounds[i] : std::numeric_limits<double>::infinity();
                append_labels(out, f, s, "le", bound);
                out += ' ';
                append_u64(out, s.buckets[i]);
                out += '\n';
            }
            out += f.name;
            out += "_sum";
            append_labels(out, f, s, nullptr, 0);
            out += ' ';
            append_number(out, s.sum);
            out += '\n';
            out += f.name;
            out += "_count";
            append_labels(out, f, s, nullptr, 0);
            out += ' ';
            append_u64(out, s.buckets.empty() ? 0 : s.buckets.back());
            out += '\n';
        }
    }
    if (om) {
        out += "# EOF\n";
    }
    return out;
}

}  // namespace weft::metrics
