#pragma once

#include <span>
#include <string>
#include <string_view>

#include "weft/trace/span.hpp"

namespace weft::trace {

/// An OTLP ExportTraceServiceRequest in the protobuf JSON mapping, as OTLP/HTTP with
/// `Content-Type: application/json` takes it: one resource (`service.name`), one scope
/// (`weft`), `spans` in order. Per the OTLP spec's JSON rules, traceId / spanId /
/// parentSpanId are lowercase hex (not base64), 64-bit integers (times, intValue) are
/// decimal strings, enums (kind, status code) numbers; a root span has no parentSpanId.
[[nodiscard]] auto otlp_json(std::span<const span_data> spans, std::string_view service_name)
    -> std::string;

}  // namespace weft::trace
