#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "weft/core/result.hpp"
#include "weft/core/task.hpp"
#include "weft/http/request_head.hpp"
#include "weft/io/socket_address.hpp"
#include "weft/trace/context.hpp"

namespace weft::http {

namespace detail {
class connection;
class h2_connection;
struct h2_stream;
}  // namespace detail

/// The body of a request, read as it arrives: `read()` gives the next piece (a view into the
/// connection's receive buffer, valid until the next read), an empty view at the end. Chunked
/// bodies come back decoded. A framing error or a body over the route's limit is an error
/// value (weft::http::parse_error: the server answers it with 400 / 413 and closes).
///
/// With `Expect: 100-continue` the interim `100 Continue` goes out on the first read, so a
/// handler that answers without reading (a 401, a 413) spares the client the upload.
///
///     std::string all = (co_await req.body().read_all()).value();     // whole, within the limit
///     for (;;) {                                                      // or piece by piece
///         auto piece = (co_await req.body().read()).value();
///         if (piece.empty()) break;
///         consume(piece);
///     }
class body_reader {
public:
    /// The next piece of the body; empty at its end.
    [[nodiscard]] auto read() -> task<result<std::string_view>>;
    /// The whole body (at most the route's body limit, which decides 413 before reading when
    /// Content-Length says more).
    [[nodiscard]] auto read_all() -> task<result<std::string>>;
    /// Body bytes delivered so far.
    [[nodiscard]] auto received() const noexcept -> std::uint64_t;
    /// Whether read() has reached the end.
    [[nodiscard]] auto done() const noexcept -> bool;

private:
    friend class detail::connection;
    friend class detail::h2_connection;
    friend class request;
    explicit body_reader(detail::connection* c) noexcept : c_(c) {}
    // At most one of them: the HTTP/1.1 connection, or the HTTP/2 stream, the body comes from.
    detail::connection* c_;
    detail::h2_stream* h2_ = nullptr;
};

/// One request, as a handler sees it: the parsed head (views into the received bytes, valid
/// while the handler runs), the route's path parameters, the peer, and the body.
class request {
public:
    /// A request with the given head and no body, outside any connection: for calling
    /// handlers, middleware and routers directly in tests. `h` and `peer` must outlive it.
    request(const request_head& h, const socket_address& peer) noexcept
        : head_(&h), peer_(&peer), body_(nullptr) {}

    [[nodiscard]] auto method() const noexcept -> http::method { return head_->method(); }
    [[nodiscard]] auto method_name() const noexcept -> std::string_view {
        return head_->method_name();
    }
    [[nodiscard]] auto target() const noexcept -> std::string_view { return head_->target(); }
    /// The path (percent-encoded, as sent) and the query (after `?`).
    [[nodiscard]] auto path() const noexcept -> std::string_view { return head_->path(); }
    [[nodiscard]] auto query() const noexcept -> std::string_view { return head_->query(); }
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    [[nodiscard]] auto version_minor() const noexcept -> int { return head_->version_minor(); }
    /// The first value of a header field (ASCII case-insensitive name); head().values(name)
    /// gives every value of a repeated one.
    [[nodiscard]] auto header(std::string_view name) const noexcept
        -> std::optional<std::string_view> {
        return head_->find(name);
    }
    [[nodiscard]] auto head() const noexcept -> const request_head& { return *head_; }
    /// A path parameter of the route (`{id}` in "/items/{id}", `{*rest}`); empty if none.
    [[nodiscard]] auto param(std::string_view name) const noexcept -> std::string_view;
    /// The client's address (on a server connection, asked of the kernel on the first call).
    [[nodiscard]] auto peer() const noexcept -> const socket_address&;
    /// Whether the connection stays open after the response (the server may still close it
    /// while draining or after an error).
    [[nodiscard]] auto keep_alive() const noexcept -> bool { return head_->keep_alive(); }
    [[nodiscard]] auto body() noexcept -> body_reader& { return body_; }
    /// The trace context to continue (pass it to the client, put it in an envelope): the
    /// server's span for this request when server_options::tracer is set, else the context
    /// the client sent (traceparent and tracestate; invalid when absent or malformed).
    [[nodiscard]] auto trace_context() const -> trace::context {
        return trace_ != nullptr ? *trace_
                                 : trace::extract(header("traceparent"), header("tracestate"));
    }

    /// Path parameters, in pattern order (at most max_params).
    static constexpr std::size_t max_params = 8;

private:
    friend class detail::connection;
    friend class detail::h2_connection;
    friend class router;
    request(const request_head* h, const socket_address* peer, detail::connection* c) noexcept
        : head_(h), peer_(peer), body_(c) {}

    const request_head* head_;
    const socket_address* peer_;
    body_reader body_;
    const trace::context* trace_ = nullptr;  // the server span's, while it records
    // The path parameters: [0, param_count_) set by the router. Trivially constructible, so a
    // request (one per request served) does not zero the eight slots it rarely uses.
    struct param_slot {
        const char* name;
        const char* value;
        std::uint32_t name_len;
        std::uint32_t value_len;
    };
    param_slot params_[max_params];
    std::size_t param_count_ = 0;
};

}  // namespace weft::http
