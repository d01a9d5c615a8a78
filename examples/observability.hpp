// What the examples share for operations: traces sent to an OpenTelemetry collector named by
// the environment, and a check that a /metrics answer is well-formed Prometheus text.
#pragma once

#include <charconv>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <weft/trace/otlp_exporter.hpp>
#include <weft/trace/tracer.hpp>

namespace example {

/// The collector's OTLP/HTTP traces endpoint, as OpenTelemetry's SDKs read it:
/// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the full URL), else OTEL_EXPORTER_OTLP_ENDPOINT with
/// "/v1/traces" appended. Empty when neither is set: traces are off.
inline auto otlp_endpoint() -> std::string {
    if (const char* u = std::getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); u != nullptr && *u) {
        return u;
    }
    if (const char* u = std::getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); u != nullptr && *u) {
        std::string base = u;
        while (!base.empty() && base.back() == '/') {
            base.pop_back();
        }
        return base + "/v1/traces";
    }
    return {};
}

/// A tracer and its exporter to otlp_endpoint(), or null when traces are off. Spawn
/// `exporter.run()` beside the server; `stop()` it after the server's shutdown (it sends what
/// is left, then returns).
struct traces {
    weft::trace::tracer tracer;
    weft::trace::otlp_exporter exporter;

    traces(std::string_view service, const std::string& url)
        : tracer({.service_name = std::string(service)}), exporter(tracer, {.url = url}) {}

    static auto from_environment(std::string_view service) -> std::unique_ptr<traces> {
        const std::string url = otlp_endpoint();
        return url.empty() ? nullptr : std::make_unique<traces>(service, url);
    }
};

/// Whether `text` is Prometheus text exposition (version 0.0.4): every line ends in '\n' and
/// is blank, a `# HELP`/`# TYPE` comment, or a sample `name{label="value",...} number`; at
/// least one sample.
inline auto is_prometheus_text(std::string_view text) -> bool {
    auto name_char = [](char c, bool first) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
               (!first && c >= '0' && c <= '9');
    };
    std::size_t samples = 0;
    while (!text.empty()) {
        const auto nl = text.find('\n');
        if (nl == std::string_view::npos) {
            return false;
        }
        const std::string_view line = text.substr(0, nl);
        text.remove_prefix(nl + 1);
        if (line.empty() || line.starts_with("# HELP ") || line.starts_with("# TYPE ")) {
            continue;
        }
        std::size_t i = 0;
        while (i < line.size() && name_char(line[i], i == 0)) {
            ++i;
        }
        if (i == 0) {
            return false;
        }
        if (i < line.size() && line[i] == '{') {
            ++i;
            while (i < line.size() && line[i] != '}') {
                const std::size_t start = i;
                while (i < line.size() && name_char(line[i], i == start)) {
                    ++i;
                }
                if (i == start || line.substr(i, 2) != "=\"") {
                    return false;
                }
                for (i += 2; i < line.size() && line[i] != '"'; ++i) {
                    i += line[i] == '\\' ? 1 : 0;  // \" \\ \n
                }
                if (i >= line.size()) {
                    return false;
                }
                ++i;
                if (i < line.size() && line[i] == ',') {
                    ++i;
                }
            }
            if (i >= line.size()) {
                return false;
            }
            ++i;
        }
        if (i >= line.size() || line[i] != ' ') {
            return false;
        }
        std::string_view value = line.substr(i + 1);
        if (value.starts_with('+')) {
            value.remove_prefix(1);  // +Inf
        }
        double v = 0;
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
        if (ec != std::errc{} || end != value.data() + value.size()) {
            return false;
        }
        ++samples;
    }
    return samples > 0;
}

}  // namespace example
