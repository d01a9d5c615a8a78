#include "weft/trace/otlp_json.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "weft/core/detail/json_text.hpp"

namespace weft::trace {

namespace {

template <typename Int>
void number(std::string& out, Int v) {
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof(buf), v);
    out.append(buf, r.ptr);
}

template <typename Int>
void quoted_number(std::string& out, Int v) {
    out += '"';
    number(out, v);
    out += '"';
}

void any_value(std::string& out, const attribute& a) {
    out += R"({"key":)";
    weft::detail::append_json_string(out, a.key);
    out += R"(,"value":{)";
    std::visit(
        [&](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::string>) {
                out += R"("stringValue":)";
                weft::detail::append_json_string(out, v);
            } else if constexpr (std::is_same_v<T, std::int64_t>) {
                out += R"("intValue":)";
                quoted_number(out, v);
            } else if constexpr (std::is_same_v<T, bool>) {
                out += R"("boolValue":)";
                out += v ? "true" : "false";
            } else {
                // JSON numbers have no NaN or infinity; the protobuf JSON mapping writes them
                // as these strings.
                out += R"("doubleValue":)";
                if (std::isnan(v)) {
                    out += R"("NaN")";
                } else if (std::isinf(v)) {
                    out += v > 0 ? R"("Infinity")" : R"("-Infinity")";
                } else {
                    char buf[32];
                    const auto r = std::to_chars(buf, buf + sizeof(buf), v);
                    out.append(buf, r.ptr);
                }
            }
        },
        a.value);
    out += "}}";
}

void one_span(std::string& out, const span_data& s) {
    out += R"({"traceId":")";
    out += s.trace.hex();
    out += R"(","spanId":")";
    out += s.id.hex();
    out += '"';
    if (s.parent.valid()) {
        out += R"(,"parentSpanId":")";
        out += s.parent.hex();
        out += '"';
    }
    if (!s.state.empty()) {
        out += R"(,"traceState":)";
        weft::detail::append_json_string(out, s.state);
    }
    out += R"(,"name":)";
    weft::detail::append_json_string(out, s.name);
    out += R"(,"kind":)";
    number(out, static_cast<int>(s.kind));
    out += R"(,"startTimeUnixNano":)";
    quoted_number(out, s.start_ns);
    out += R"(,"endTimeUnixNano":)";
    quoted_number(out, s.end_ns);
    out += R"(,"attributes":[)";
    for (std::size_t i = 0; i < s.attributes.size(); ++i) {
        if (i != 0) {
            out += ',';
        }
        any_value(out, s.attributes[i]);
    }
    out += R"(],"status":{"code":)";
    number(out, static_cast<int>(s.status));
    if (!s.status_message.empty()) {
        out += R"(,"message":)";
        weft::detail::append_json_string(out, s.status_message);
    }
    out += "}}";
}

}  // namespace

auto otlp_json(std::span<const span_data> spans, std::string_view service_name) -> std::string {
    std::string out;
    out.reserve(256 + spans.size() * 384);
    out +=
        R"({"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":)";
    weft::detail::append_json_string(out, service_name);
    out += R"(}}]},"scopeSpans":[{"scope":{"name":"weft"},"spans":[)";
    for (std::size_t i = 0; i < spans.size(); ++i) {
        if (i != 0) {
            out += ',';
        }
        one_span(out, spans[i]);
    }
    out += "]}]}]}";
    return out;
}

}  // namespace weft::trace
