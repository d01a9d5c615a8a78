#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "weft/http/parse_error.hpp"
#include "weft/http/request_head.hpp"
#include "weft/http/request_limits.hpp"

namespace weft::http {

enum class body_status : std::uint8_t {
    need_more,  ///< every byte given was used or kept (see body_step::consumed); receive more
    data,       ///< body_step::data is body bytes
    trailer,    ///< body_step::data / value are one trailer field (chunked only)
    done,       ///< the body ended; the bytes after `consumed` are the next request
    error,      ///< body_decoder::error() says why; respond with status_of() and close
};

/// One step of decoding. The caller drops `consumed` bytes from the front of its input before
/// the next call; the views point into the input it gave and live as long as those bytes.
struct body_step {
    body_status status = body_status::need_more;
    std::size_t consumed = 0;
    std::string_view data;   ///< data: body bytes; trailer: the field name
    std::string_view value;  ///< trailer: the field value (no surrounding whitespace)
};

/// Delimits (Content-Length) or decodes (chunked, RFC 9112 7.1) the body of one request,
/// incrementally and without copying: body bytes come back as views into the caller's input.
///
/// Each decode() call takes the bytes not consumed yet (those the previous steps left, followed
/// by any new ones) and makes one step. A chunked body's framing (sizes, extensions, CRLFs) is
/// consumed as it is read and never examined again; a trailer field line that has only partly
/// arrived is kept unconsumed (it must reach the caller whole, as one view) but is not examined
/// again either: the decoder remembers how far into it it got.
///
/// Chunked: sizes are 1*HEXDIG (no sign, no whitespace before CRLF, at most 64 bits); the
/// sizes together may not pass the body limit (413, known before the chunk's data is read);
/// chunk extensions are checked against their grammar and their total size limit, then
/// skipped; data must be followed by CRLF; trailer fields are checked as header fields are
/// (and held to the header limits) and handed over one by one.
///
/// Not thread-safe; one per request.
///
///     weft::http::body_decoder body{p.head().framing(), limits};
///     for (;;) {
///         auto s = body.decode(rest);
///         rest.remove_prefix(s.consumed);
///         if (s.status == body_status::data) { use(s.data); }
///         else if (s.status == body_status::need_more) { /* receive, append to rest */ }
///         else if (s.status == body_status::done || s.status == body_status::error) { break; }
///     }
class body_decoder {
public:
    /// No body: done at once.
    body_decoder() noexcept = default;
    /// The body framed as `framing` says, held to `limits` (body, chunk_extensions, and for
    /// trailers header_block and fields). A server passes a route's own body limit here.
    body_decoder(body_framing framing, const request_limits& limits) noexcept;

    /// One step over `input` (the bytes not consumed yet, starting at the first).
    [[nodiscard]] auto decode(std::string_view input) noexcept -> body_step;

    /// Content-Length: body bytes still to come. Chunked: bytes left of the current chunk.
    [[nodiscard]] auto remaining() const noexcept -> std::uint64_t { return remaining_; }
    /// Body bytes delivered so far.
    [[nodiscard]] auto received() const noexcept -> std::uint64_t { return received_; }
    [[nodiscard]] auto done() const noexcept -> bool { return state_ == state::done; }
    [[nodiscard]] auto error() const noexcept -> parse_error { return error_; }

private:
    enum class state : std::uint8_t {
        length,           // Content-Length: remaining_ bytes to deliver
        size,             // in a chunk size (digits_ read so far)
        ext_bws,          // whitespace after the size or a value, before ';'
        ext_name_start,   // after ';'
        ext_name,         // in an extension name
        ext_after_name,   // whitespace after a name
        ext_value_start,  // after '='
        ext_token,        // in a token value
        ext_quoted,       // in a quoted-string value
        ext_escape,       // after '\' in a quoted string
        ext_end,          // after a value (or a name): ';', whitespace or CR
        size_lf,          // after the CR of a size line
        data,             // in chunk data
        data_cr,          // after chunk data
        data_lf,
        trailer,  // at the start of a trailer line (or the final empty line)
        trailer_name,
        trailer_ows,
        trailer_value,
        trailer_lf,
        end_lf,  // after the CR of the final empty line
        done,
        failed,
    };

    auto fail(parse_error e) noexcept -> body_step;

    state state_ = state::done;
    parse_error error_ = parse_error::none;
    std::uint8_t digits_ = 0;
    std::uint64_t remaining_ = 0;
    std::uint64_t received_ = 0;
    std::uint64_t size_ = 0;   // the chunk size being read
    std::uint64_t sizes_ = 0;  // the sizes read so far, added
    std::uint64_t body_limit_ = 0;
    std::size_t ext_limit_ = 0;
    std::size_t ext_bytes_ = 0;
    std::size_t block_limit_ = 0;
    std::size_t field_limit_ = 0;
    std::size_t trailer_bytes_ = 0;  // trailer lines consumed so far
    std::size_t trailer_fields_ = 0;
    // Within the trailer line being read, offsets from its first byte (which is the first byte
    // of the input while the line is incomplete): bytes examined, the colon, the value's first.
    std::uint32_t line_scanned_ = 0;
    std::uint32_t colon_ = 0;
    std::uint32_t vstart_ = 0;
};

}  // namespace weft::http
