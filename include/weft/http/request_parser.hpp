#pragma once

// weft parses HTTP/1.1 itself: of the parsers one could package, none is both maintained and as
// strict as RFC 9112 asks of a server (picohttpparser accepts obs-fold and leaves framing to
// the caller; http-parser is unmaintained; llhttp is C generated from TypeScript with lenient
// flags). Request smuggling lives in those leniencies, so this one rejects them, and names the
// status for each (parse_error.hpp).

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "weft/http/parse_error.hpp"
#include "weft/http/request_head.hpp"
#include "weft/http/request_limits.hpp"

namespace weft::http {

enum class parse_status : std::uint8_t {
    incomplete,  ///< more bytes are needed; call parse() again once they are received
    complete,    ///< head() holds the request; its body (if any) starts at head().size()
    error,       ///< error() says why; respond with status_of(error()) and close
};

/// An incremental, zero-copy parser of one request head (request line and header fields),
/// strict to RFC 9112 / 9110. It validates the framing fields too (Host, Content-Length,
/// Transfer-Encoding, Connection, Expect), so that once parse() says `complete`,
/// head().framing() is trustworthy: body_decoder reads the body from there.
///
/// Incremental: give parse() all the bytes of this request received so far, starting at its
/// first byte; when it says `incomplete`, receive more, append them, and call it again with the
/// longer buffer (which may have moved: the parser keeps offsets, not pointers). It resumes
/// where it stopped: every byte is examined once, however the request was split across reads,
/// and a request split at any byte gives the same result as one read.
///
/// Limits (request_limits) are checked as bytes arrive, so an over-long request line or header
/// section is rejected as soon as it crosses the limit, without waiting for its end.
///
/// Pipelining: after `complete` and the body, call reset() and parse the next request from the
/// byte after the body.
///
/// One parser per connection; not thread-safe. Allocates nothing unless a request has more than
/// request_head::inline_fields fields.
///
///     weft::http::request_parser p;
///     std::string_view buf = ...;             // bytes received so far for this request
///     switch (p.parse(buf)) {
///     case parse_status::incomplete: /* read more, parse(buf + more) */ break;
///     case parse_status::complete:   /* p.head(); body from buf.substr(p.head().size()) */ break;
///     case parse_status::error:      /* respond status_of(p.error()), close */ break;
///     }
class request_parser {
public:
    explicit request_parser(const request_limits& limits = {}) noexcept;

    /// Continues parsing; `input` is this request's bytes received so far (the bytes given to
    /// the previous call, unchanged, followed by any new ones). Once `complete` or `error`, it
    /// returns the same again until reset(). Sets head().data() to input.data().
    [[nodiscard]] auto parse(std::string_view input) -> parse_status;

    /// The request; complete once parse() returned `complete` (partial before: do not use).
    [[nodiscard]] auto head() const noexcept -> const request_head& { return head_; }
    /// Mutable, for request_head::rebase.
    [[nodiscard]] auto head() noexcept -> request_head& { return head_; }

    /// Why parse() returned `error`; `none` otherwise.
    [[nodiscard]] auto error() const noexcept -> parse_error { return error_; }

    /// Bytes of the input examined so far (the resume position).
    [[nodiscard]] auto scanned() const noexcept -> std::size_t { return pos_; }

    /// Ready for the next request (keeps the limits and the memory of any overflow fields).
    void reset() noexcept;
    /// Ready for the next request, held to `limits` from now on (a parser reused by another
    /// server).
    void reset(const request_limits& limits) noexcept;

    [[nodiscard]] auto limits() const noexcept -> const request_limits& { return limits_; }

private:
    enum class state : std::uint8_t {
        lead,       // before the request line: empty lines are skipped (RFC 9112 2.2)
        lead_lf,    // after a CR of an empty line before the request line
        method,     // in the method
        target,     // in the request-target
        version,    // in "HTTP/x.y"; vpos_ bytes matched
        line_cr,    // after the version
        line_lf,    // after the CR that ends the request line
        field,      // at the start of a header line (or of the empty line)
        name,       // in a field name
        value_ows,  // after the colon, in leading whitespace
        value,      // in a field value
        value_lf,   // after the CR that ends a field line
        end_lf,     // after the CR of the empty line
        done,
        failed,
    };

    auto fail(parse_error e) noexcept -> parse_status;
    auto finish_request_line(const char* base) noexcept -> parse_error;
    auto finish_field(const char* base, request_head::piece name, request_head::piece value)
        -> parse_error;
    auto finish_head() noexcept -> parse_error;

    request_limits limits_;
    request_head head_;
    state state_ = state::lead;
    std::uint8_t vpos_ = 0;
    parse_error error_ = parse_error::none;
    std::uint32_t pos_ = 0;           // next byte to examine
    std::uint32_t mark_ = 0;          // start of the token being scanned
    std::uint32_t aux_ = 0;           // the colon (value states); the first '?' (target)
    std::uint32_t vstart_ = 0;        // the current field value's first byte
    std::uint32_t fields_start_ = 0;  // first byte after the request line
    std::uint32_t line_limit_;        // offset the request line must end by
    std::uint32_t block_limit_;       // header section size limit

    // What the fields said so far (checked field by field, and as a whole in finish_head).
    std::uint64_t content_length_ = 0;
    std::uint8_t hosts_ = 0;
    bool has_content_length_ = false;
    bool has_transfer_encoding_ = false;
    bool chunked_seen_ = false;  // chunked was named
    bool chunked_last_ = false;  // the last transfer coding so far is chunked
    bool other_coding_ = false;  // a transfer coding other than chunked was named
    bool connection_close_ = false;
    bool connection_keep_alive_ = false;
};

}  // namespace weft::http
