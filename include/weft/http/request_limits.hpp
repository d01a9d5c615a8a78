#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::http {

/// The sizes a request is held to while it is parsed; going over one rejects the request with
/// the status named (and the connection closes). The defaults are nginx's and Go's orders of
/// magnitude: big enough for any browser, small enough that a hostile client cannot make a
/// connection hold much memory.
///
///     weft::http::request_parser p{{.header_block = 32 * 1024}};
struct request_limits {
    /// The request line (method, target, version; not its CRLF), plus any empty lines before
    /// it: over this, 414 URI Too Long.
    std::size_t request_line = 8 * 1024;
    /// The header section after the request line, up to and including the empty line that ends
    /// it: over this, 431. The trailer section of a chunked body is held to the same size.
    std::size_t header_block = 16 * 1024;
    /// Header fields (and, separately, trailer fields): over this, 431.
    std::size_t fields = 100;
    /// The body: a Content-Length over this is 413 before any of the body is read; a chunked
    /// body whose chunk sizes add up to more is 413 when the size that crosses it is read.
    std::uint64_t body = 1024 * 1024;
    /// All chunk extensions of one chunked body together (the `;name=value` after the sizes):
    /// over this, 400. They carry nothing weft uses, so they are only validated and skipped.
    std::size_t chunk_extensions = 4 * 1024;
};

}  // namespace weft::http
