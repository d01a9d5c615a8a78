#pragma once

#include <cstdint>

namespace weft::http {

/// HTTP/2 on a weft::http::server (server_options::http2): the same routes, middleware and
/// handlers serve it. h2c with prior knowledge: a plaintext connection whose first receive
/// starts with the client preface ("PRI * HTTP/2.0") is served as HTTP/2. h2 over TLS: when
/// the client chose "h2" by ALPN (the tls_context must offer "h2": tls_server_options::alpn).
/// The defaults are nghttp2's, Go's and nginx's orders of magnitude.
///
///     weft::http::server srv{{.http2 = {.max_concurrent_streams = 250}}};
struct http2_options {
    /// Off: no h2c (the preface is answered as a malformed HTTP/1.1 request), and a TLS
    /// client that chose "h2" is closed at once.
    bool enabled = true;
    /// SETTINGS_MAX_CONCURRENT_STREAMS. Streams past it are refused (RST_STREAM
    /// REFUSED_STREAM); a stream the client reset still counts while its handler runs, so
    /// resetting streams never buys more concurrent handlers than this.
    std::uint32_t max_concurrent_streams = 100;
    /// SETTINGS_MAX_HEADER_LIST_SIZE: the decoded header list of a request (each field's name
    /// and value plus 32, RFC 9113 6.5.2); over it the request is answered 431 and its
    /// handler never runs, however small the compressed block was (an HPACK bomb).
    std::uint32_t max_header_list_size = 16 * 1024;
    /// SETTINGS_MAX_FRAME_SIZE: the largest frame payload the server accepts (16 KiB to
    /// 16 MiB - 1).
    std::uint32_t max_frame_size = 16 * 1024;
    /// SETTINGS_INITIAL_WINDOW_SIZE: request body bytes a stream may send before its handler
    /// reads them; the server opens the window (WINDOW_UPDATE) as the handler consumes. Also
    /// what a stream's unread body holds in memory at most.
    std::uint32_t initial_window_size = 64 * 1024;
    /// RST_STREAM frames a client may send in a burst, refilled at resets_per_second: past
    /// them the connection is closed with GOAWAY ENHANCE_YOUR_CALM (the rapid reset attack,
    /// CVE-2023-44487).
    std::uint32_t reset_burst = 200;
    std::uint32_t resets_per_second = 33;
};

}  // namespace weft::http
