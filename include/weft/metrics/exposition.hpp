#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "weft/metrics/family_snapshot.hpp"

namespace weft::metrics {

/// The text formats a scraper may ask for.
/// - prometheus_text: Prometheus text exposition format 0.0.4 (`text/plain; version=0.0.4`),
///   what every Prometheus server reads.
/// - openmetrics: OpenMetrics 1.0 (`application/openmetrics-text; version=1.0.0`), which
///   Prometheus asks for first; ends with `# EOF`.
enum class exposition_format { prometheus_text, openmetrics };

/// The format an HTTP Accept field asks for: OpenMetrics when it names
/// application/openmetrics-text with a q above 0, else the Prometheus text format.
[[nodiscard]] auto negotiate(std::string_view accept) noexcept -> exposition_format;

/// The Content-Type of a response in format `f`.
[[nodiscard]] auto content_type(exposition_format f) noexcept -> std::string_view;

/// `families` in format `f`. Label values and help texts are escaped (backslash, double quote,
/// newline); names are written as they are (the registry checked them).
[[nodiscard]] auto render(const std::vector<family_snapshot>& families, exposition_format f)
    -> std::string;

}  // namespace weft::metrics
