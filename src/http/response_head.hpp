#pragma once

// The serializer of HTTP/1.1 response heads. Internal to weft::http.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "output_buffer.hpp"
#include "weft/http/response.hpp"

namespace weft::http::detail {

/// How a head frames its body and the connection.
struct head_framing {
    std::uint64_t length = 0;   // the body's length; UINT64_MAX: unknown (no Content-Length)
    bool chunked = false;       // Transfer-Encoding: chunked instead of a length
    bool keep = true;           // the connection stays open after this response
    bool head_request = false;  // the response answers a HEAD
    int version_minor = 1;      // the request's HTTP/1.x
};

/// Appends the head of `r` to `out`, then `small_body` (copied right after it), built in place
/// in room that is not zero-filled first; returns the bytes appended. The framing
/// (response.hpp): none for 1xx and 204 (RFC 9110 8.6); the handler's stated length where no
/// body is measured (a 304, a HEAD answered with no body); else the body's. `server_name`:
/// the Server field, none when empty.
auto append_response_head(output_buffer& out,
                          const response& r,
                          std::string_view server_name,
                          const head_framing& framing,
                          std::string_view small_body) -> std::size_t;

}  // namespace weft::http::detail
