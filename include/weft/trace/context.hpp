#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace weft::trace {

/// A W3C trace id: 16 bytes; all zero is invalid (the spec's "no trace").
struct trace_id {
    std::array<std::uint8_t, 16> bytes{};

    [[nodiscard]] auto valid() const noexcept -> bool;
    /// 32 lowercase hex digits.
    [[nodiscard]] auto hex() const -> std::string;
    friend auto operator==(const trace_id&, const trace_id&) -> bool = default;
};

/// A W3C span (parent) id: 8 bytes; all zero is invalid.
struct span_id {
    std::array<std::uint8_t, 8> bytes{};

    [[nodiscard]] auto valid() const noexcept -> bool;
    /// 16 lowercase hex digits.
    [[nodiscard]] auto hex() const -> std::string;
    friend auto operator==(const span_id&, const span_id&) -> bool = default;
};

/// Where a unit of work sits in a distributed trace: the W3C trace context (traceparent's
/// trace id, parent id and flags, and tracestate's text). A plain value, passed explicitly:
/// a handler reads it from its request (weft::http::request::trace_context) and hands it to
/// what it calls (the client, an envelope's headers).
///
///     auto ctx = weft::trace::extract(req.header("traceparent"), req.header("tracestate"));
///     if (ctx.valid()) { headers.emplace_back("traceparent", weft::trace::traceparent(ctx)); }
struct context {
    trace_id trace{};
    span_id span{};
    /// Bit 0: sampled. Other bits are not kept (W3C trace context: a vendor propagates only
    /// the flags it understands, as version 00).
    std::uint8_t flags = 0;
    /// The tracestate header as received (surrounding blanks trimmed) when it was valid;
    /// empty when absent or invalid.
    std::string state{};

    /// Both ids valid (not all zero).
    [[nodiscard]] auto valid() const noexcept -> bool { return trace.valid() && span.valid(); }
    [[nodiscard]] auto sampled() const noexcept -> bool { return (flags & 1U) != 0; }
    friend auto operator==(const context&, const context&) -> bool = default;
};

/// The traceparent header, strictly per W3C Trace Context: `version-traceid-parentid-flags`
/// in lowercase hex (upper case refused). Version 00 is exactly 55 characters. A higher
/// version (not ff, which is invalid) is read as its first 55 characters when they have the
/// version-00 layout and the text ends there or continues with `-` (the spec's forward
/// compatibility rule). All-zero trace or parent ids are invalid. nullopt: invalid, in which
/// case the caller starts a new trace and ignores tracestate.
[[nodiscard]] auto parse_traceparent(std::string_view text) -> std::optional<context>;

/// Whether `text` is a valid tracestate: at most 32 list members separated by commas (with
/// optional blanks around them; empty members allowed and not counted), each `key=value` with
/// the spec's key grammar (`lcalpha 0*255(lcalpha / DIGIT / _ / - / * / /)`, or
/// `tenant@system` with 241 and 14 characters at most) and value (1 to 256 printable ASCII
/// characters other than `,` and `=`, not ending in a space), no key twice.
[[nodiscard]] auto valid_tracestate(std::string_view text) noexcept -> bool;

/// The context carried by a pair of headers (either may be absent): invalid (all zero) when
/// traceparent is absent or invalid; tracestate kept verbatim (trimmed) only when valid.
[[nodiscard]] auto extract(std::optional<std::string_view> traceparent,
                           std::optional<std::string_view> tracestate) -> context;

/// The traceparent header of `ctx` as version 00 (`00-<32 hex>-<16 hex>-<2 hex>`).
[[nodiscard]] auto traceparent(const context& ctx) -> std::string;

/// New random ids from a generator of the calling thread (seeded once per thread from
/// std::random_device); never all zero.
[[nodiscard]] auto random_trace_id() noexcept -> trace_id;
[[nodiscard]] auto random_span_id() noexcept -> span_id;

}  // namespace weft::trace
