#pragma once

#include <cstdint>
#include <string_view>
#include <system_error>
#include <type_traits>

namespace weft::http {

/// Why a request was rejected (category "weft.http"). Every error closes the connection after
/// the response: once the framing of one request is in doubt, nothing after it on the
/// connection can be trusted (request smuggling). `status_of` gives the response status.
enum class parse_error : std::uint8_t {
    none = 0,
    // 400 Bad Request
    bad_request_line,  ///< leading whitespace, a missing part, or a control byte in the line
    bad_method,        ///< the method is empty or not a token
    bad_target,        ///< not a valid request-target for the method, or has a fragment
    bad_version,       ///< not `HTTP/` DIGIT `.` DIGIT followed by CRLF
    bare_cr,           ///< a CR not followed by LF
    bare_lf,           ///< a LF not preceded by CR
    whitespace_before_first_field,  ///< SP/HT at the start of the first header line
    obs_fold,                       ///< a header line continued on the next (obsolete folding)
    bad_field_name,                 ///< not a token, or a line without a colon
    whitespace_before_colon,        ///< `Name :` (RFC 9112 5.1: must be rejected)
    bad_field_value,                ///< NUL or another control character in a value
    missing_host,                   ///< HTTP/1.1 without Host
    repeated_host,                  ///< two Host fields
    bad_host,                       ///< Host is not uri-host [ ":" port ]
    bad_content_length,             ///< Content-Length is not 1*DIGIT or overflows 64 bits
    conflicting_content_length,     ///< two Content-Lengths that differ
    content_length_with_transfer_encoding,  ///< both framings present
    transfer_encoding_in_http10,            ///< Transfer-Encoding in an HTTP/1.0 request
    bad_transfer_encoding,       ///< an empty list, a coding that is not a token, chunked twice
    chunked_not_last,            ///< the last transfer coding is not chunked: length unknowable
    bad_chunk_size,              ///< a chunk size that is not 1*HEXDIG
    chunk_size_overflow,         ///< a chunk size over 64 bits
    bad_chunk_extension,         ///< a chunk extension that is not `;token[=token|quoted]`
    chunk_extensions_too_large,  ///< chunk extensions over request_limits::chunk_extensions
    missing_chunk_crlf,          ///< chunk data not followed by CRLF
    // 413 Content Too Large
    body_too_large,  ///< Content-Length, or the chunk sizes so far, over request_limits::body
    // 414 URI Too Long
    request_line_too_long,  ///< over request_limits::request_line
    // 417 Expectation Failed
    unsupported_expectation,  ///< an Expect other than 100-continue
    // 431 Request Header Fields Too Large
    header_block_too_large,  ///< header (or trailer) section over request_limits::header_block
    too_many_fields,         ///< more fields than request_limits::fields
    // 501 Not Implemented
    unsupported_transfer_coding,  ///< a coding other than chunked before the final chunked
    // 505 HTTP Version Not Supported
    unsupported_version,  ///< a well-formed version other than HTTP/1.x
    // 500 Internal Server Error
    input_shrank,  ///< the caller gave fewer bytes than were already examined (a caller bug)
};

/// The response status for `e` (400, 413, 414, 417, 431, 500, 501, 505); 0 for `none`.
[[nodiscard]] auto status_of(parse_error e) noexcept -> int;

/// A short English reason, for logs and the body of the error response.
[[nodiscard]] auto describe(parse_error e) noexcept -> std::string_view;

[[nodiscard]] auto http_category() noexcept -> const std::error_category&;

[[nodiscard]] inline auto make_error_code(parse_error e) noexcept -> std::error_code {
    return {static_cast<int>(e), http_category()};
}

}  // namespace weft::http

template <>
struct std::is_error_code_enum<weft::http::parse_error> : std::true_type {};
