#pragma once

#include <string>
#include <string_view>

#include "weft/bus/envelope.hpp"

namespace weft::bus {

/// The header that names an envelope's payload schema and its version: CloudEvents'
/// `dataschema` attribute (a URI, its last segment the version by convention:
/// "urn:acme:order.placed:2"). It travels as any header does (ce-dataschema / ce_dataschema in
/// the CloudEvents binary mode, in the JSON event in structured mode, in weft's encoding), so
/// a consumer in another language reads it where CloudEvents puts it. A name of weft's own
/// (`weft-schema-version`) could not: a CloudEvents attribute name is a-z and 0-9 only.
inline constexpr std::string_view schema_header = "dataschema";

/// The envelope's schema URI, or empty when it has none.
[[nodiscard]] inline auto schema_of(const envelope& env) -> std::string_view {
    const header* h = env.find_header(schema_header);
    return h != nullptr ? std::string_view(h->value) : std::string_view();
}

/// Sets (or replaces) the envelope's schema URI.
inline void set_schema(envelope& env, std::string_view uri) {
    for (header& h : env.headers) {
        if (h.name == schema_header) {
            h.value = uri;
            return;
        }
    }
    env.headers.push_back(header{std::string(schema_header), std::string(uri)});
}

}  // namespace weft::bus
