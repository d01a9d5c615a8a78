#pragma once

// The mapping between a weft envelope and a CloudEvent (CloudEvents 1.0), for the NATS and
// Kafka backends. One to one, both ways:
//
//     envelope            CloudEvent attribute        NATS header (binary)   Kafka (binary)
//     id (UUID text)      id                          ce-id                  ce_id
//     type                type                        ce-type                ce_type
//     time (RFC 3339)     time                        ce-time                ce_time
//     key                 subject (when not empty)    ce-subject             ce_subject + record
//     key header "source"     source (else the option)    ce-source              ce_source header
//     "datacontenttype"  datacontenttype       ce-datacontenttype     content-type header <name>
//     extension <name>            ce-<name>              ce_<name> payload             data body
//     value topic               (the subject / topic the message is on)
//
// An envelope that cannot be expressed is refused, never altered: a header name that is not a
// valid attribute name (lower-case a-z and 0-9, at most 20 characters: the spec's MUST and
// SHOULD), a name the envelope itself fills (specversion id type time subject data), a name
// given twice, an empty type (REQUIRED, non-empty), or text that is not UTF-8.
// A received CloudEvent must be complete (specversion 1.0, id, source, type; time, when
// present, RFC 3339); its id must be a UUID, which the envelope's id is. Anything else is a
// malformed event, reported with the mode and the defect.

#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "weft/bus/envelope.hpp"
#include "weft/bus/wire_format.hpp"
#include "weft/core/result.hpp"

namespace weft::bus::cloudevents {

/// Which protocol binding: the header prefix and how values are written.
enum class binding {
    nats,   ///< "ce-" + name; values percent-encoded; datacontenttype as ce-datacontenttype
    kafka,  ///< "ce_" + name; values as UTF-8; datacontenttype as "content-type"
};

/// The media type that marks a structured-mode message (matched case-insensitively as a
/// prefix of the content-type header).
inline constexpr std::string_view structured_media_type = "application/cloudevents";
/// NUL-terminated (a literal), for cnats.
inline constexpr std::string_view structured_content_type = "application/cloudevents+json";

/// Whether `env` can be sent as a CloudEvent; when not, `bus_errc::not_expressible` with the
/// defect in `why` ("header 'Trace-Id': an attribute name is lower-case a-z and 0-9").
[[nodiscard]] auto check(const envelope& env, std::string& why) -> std::error_code;

/// One message header as a binding writes or reads it.
struct wire_header {
    std::string_view name;
    std::string_view value;
};

/// The headers of `env` in binary mode (env already passed check). `buffer` holds the names
/// and encoded values the views point into, each followed by a NUL (not in the view) for C
/// clients that take C strings; both are reused by the caller per message.
void to_binary(const envelope& env,
               std::string_view default_source,
               binding b,
               std::vector<wire_header>& out,
               std::string& buffer);

/// The JSON event format of `env` (env already passed check), appended to `out`.
void to_structured(const envelope& env, std::string_view default_source, std::string& out);

/// Reads a received message in whichever mode its headers say (structured: a content-type
/// of application/cloudevents...; binary: any ce- / ce_ header; else weft's encoding).
/// `record_key` is Kafka's record key (the envelope key when there is no subject). On
/// failure `bus_errc::malformed_event` (or the weft codec's error) with `why` naming the mode
/// and the defect ("CloudEvents binary: no ce-specversion header").
[[nodiscard]] auto read(std::span<const wire_header> headers,
                        std::string_view body,
                        std::string_view topic,
                        std::string_view record_key,
                        binding b,
                        std::string& why) -> result<envelope>;

/// Percent-encoding of a NATS header value (the NATS binding, 3.1.3.2): space, '"', '%' and
/// every byte outside 0x21-0x7E as %XY, upper-case. decode_percent reverses it and also reads
/// a double-quoted value; false for a bad escape or bytes that are not UTF-8.
void encode_percent(std::string_view in, std::string& out);
[[nodiscard]] auto decode_percent(std::string_view in, std::string& out) -> bool;

/// RFC 3339 UTC with nanoseconds ("2026-12-02T01:23:45.123456789Z"), and its reader, which
/// takes any RFC 3339 date-time (a fraction of 1 to 9 digits, 'Z' or an offset).
void write_time(std::chrono::system_clock::time_point t, std::string& out);
[[nodiscard]] auto parse_time(std::string_view s, std::chrono::system_clock::time_point& t) -> bool;

}  // namespace weft::bus::cloudevents
