#pragma once

// JSON text as weft's encoders write it: the bus's envelopes, log lines, OTLP spans.

#include <string>
#include <string_view>

namespace weft::detail {

/// Well-formed UTF-8 (RFC 3629: no overlongs, no surrogates, at most U+10FFFF)?
[[nodiscard]] auto valid_utf8(std::string_view s) noexcept -> bool;

/// Appends `s` as the inside of a JSON string (RFC 8259), without the quotes: quote and
/// backslash escaped, \n \r \t by name and the other control characters as \u00XX. Text that
/// is not valid UTF-8 has its bytes above 0x7F written as \u00XX too (read as Latin-1), so the
/// output is valid JSON whatever the input: a log shipper or a collector refuses a whole line
/// or batch for one malformed string, and such strings come from clients (a request path).
void append_json_escaped(std::string& out, std::string_view s);

/// `s` escaped as above, between quotes.
void append_json_string(std::string& out, std::string_view s);

}  // namespace weft::detail
