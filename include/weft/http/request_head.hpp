#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string_view>
#include <vector>

namespace weft::http {

/// The request method; `other` for any other token (method_name() has it).
enum class method : std::uint8_t {
    get,
    head,
    post,
    put,
    delete_,
    connect,
    options,
    trace,
    patch,
    other
};

/// The four forms of request-target (RFC 9112 3.2). Which one a request may use depends on its
/// method: authority-form only for CONNECT (and CONNECT only with it), asterisk-form only for
/// OPTIONS; origin-form and absolute-form for the rest.
enum class target_form : std::uint8_t {
    origin,     ///< `/path?query`
    absolute,   ///< `http://host:port/path?query` (to proxies; servers must accept it)
    authority,  ///< `host:port` (CONNECT)
    asterisk,   ///< `*` (OPTIONS)
};

/// How the body after the head is delimited (RFC 9112 6.3).
enum class body_kind : std::uint8_t {
    none,            ///< no body (neither Content-Length nor Transfer-Encoding)
    content_length,  ///< exactly `length` bytes
    chunked,         ///< Transfer-Encoding: chunked; decode with body_decoder
};

struct body_framing {
    body_kind kind = body_kind::none;
    std::uint64_t length = 0;  ///< for content_length
};

/// One header field: views into the received bytes. `value` has no leading or trailing
/// whitespace; the name keeps the client's case.
struct header_field {
    std::string_view name;
    std::string_view value;
};

/// The parsed head of one request (request line and header fields), as request_parser leaves
/// it once parse() said `complete`.
///
/// Zero-copy: every string_view it gives (method, target, path, query, field names and values)
/// points into the caller's buffer the request was parsed from; nothing is copied, and the
/// first 32 fields are kept in an inline array, so parsing allocates nothing unless a request
/// has more fields than that. The head stores offsets from the request's first byte and one
/// base pointer, so:
///
/// LIFETIME: the views are valid while the request's bytes stay where they were at the last
/// parse() (or rebase()). A server that compacts or grows its buffer, moving those bytes, calls
/// rebase() with their new address and may go on using the head; one that reuses the memory for
/// something else must be done with the views first (or copy what it keeps).
///
/// Not thread-safe for writers (rebase); const member functions may be called concurrently.
///
///     if (p.parse(buf) == weft::http::parse_status::complete) {
///         const auto& h = p.head();
///         if (h.method() == weft::http::method::get && h.path() == "/") { ... }
///         for (auto v : h.values("accept")) { ... }
///     }
class request_head {
public:
    /// Fields kept inline: more than this many allocate (once per doubling).
    static constexpr std::size_t inline_fields = 32;

    [[nodiscard]] auto method() const noexcept -> http::method { return method_; }
    /// The method token as sent (methods are case-sensitive: `get` is not GET).
    [[nodiscard]] auto method_name() const noexcept -> std::string_view {
        return view(method_name_);
    }
    /// The request-target as sent.
    [[nodiscard]] auto target() const noexcept -> std::string_view { return view(target_); }
    [[nodiscard]] auto form() const noexcept -> target_form { return form_; }
    /// The path: for origin-form and absolute-form the part before `?` (still percent-encoded;
    /// "/" when an absolute-form target has none); `*` for asterisk-form; empty for
    /// authority-form.
    [[nodiscard]] auto path() const noexcept -> std::string_view {
        return form_ == target_form::absolute && path_.len == 0 ? std::string_view{"/"}
                                                                : view(path_);
    }
    /// After the first `?` (without it), empty when there is none; has_query() tells an empty
    /// query (`/a?`) from none.
    [[nodiscard]] auto query() const noexcept -> std::string_view { return view(query_); }
    [[nodiscard]] auto has_query() const noexcept -> bool { return has_query_; }
    /// host[:port] of an absolute-form or authority-form target; empty for the other forms (the
    /// Host field has it then).
    [[nodiscard]] auto authority() const noexcept -> std::string_view { return view(authority_); }

    /// 0 for HTTP/1.0, 1 for HTTP/1.1 (and for 1.2 .. 1.9, which RFC 9110 2.5 says to treat as
    /// the highest minor version implemented).
    [[nodiscard]] auto version_minor() const noexcept -> int { return version_minor_; }
    /// Whether the connection may carry another request after this one: HTTP/1.1 unless
    /// `Connection: close`; HTTP/1.0 only with `Connection: keep-alive` (and no close).
    [[nodiscard]] auto keep_alive() const noexcept -> bool { return keep_alive_; }
    /// `Expect: 100-continue` in an HTTP/1.1 request (ignored in 1.0, RFC 9110 10.1.1).
    [[nodiscard]] auto expect_continue() const noexcept -> bool { return expect_continue_; }
    [[nodiscard]] auto framing() const noexcept -> body_framing { return framing_; }
    /// The value of Host ("" when absent, as HTTP/1.0 allows).
    [[nodiscard]] auto host() const noexcept -> std::string_view { return view(host_); }

    /// Bytes of the head: request line, fields and the empty line, and any empty lines before
    /// the request line. The body (or the next request) starts at this offset.
    [[nodiscard]] auto size() const noexcept -> std::size_t { return size_; }

    [[nodiscard]] auto field_count() const noexcept -> std::size_t { return count_; }
    /// The i-th field in the order received; i < field_count().
    [[nodiscard]] auto field(std::size_t i) const noexcept -> header_field {
        const field_rec& f = i < inline_fields ? inline_[i] : more_[i - inline_fields];
        return {view(f.name), view(f.value)};
    }

    class field_iterator;
    class field_range;
    class value_iterator;
    class value_range;

    /// Every field in order.
    [[nodiscard]] auto fields() const noexcept -> field_range;
    /// The value of the first field named `name` (ASCII case-insensitive); nullopt if none.
    [[nodiscard]] auto find(std::string_view name) const noexcept
        -> std::optional<std::string_view>;
    /// The values of every field named `name` (ASCII case-insensitive), in order. A field whose
    /// value is a comma-separated list is one value here; splitting is the caller's.
    [[nodiscard]] auto values(std::string_view name) const noexcept -> value_range;

    /// The address the request's first byte has moved to; every view is given from there on.
    void rebase(const char* new_base) noexcept { base_ = new_base; }
    /// The request's first byte as last given to parse() or rebase().
    [[nodiscard]] auto data() const noexcept -> const char* { return base_; }

private:
    friend class request_parser;

    // A piece of the request: offset from base_ and length. 32 bits: the limits keep a head
    // far below 4 GiB (request_parser caps them).
    struct piece {
        std::uint32_t off = 0;
        std::uint32_t len = 0;
    };
    struct field_rec {
        piece name;
        piece value;
    };

    [[nodiscard]] auto view(piece p) const noexcept -> std::string_view {
        return {base_ + p.off, p.len};
    }
    void clear() noexcept;
    void add_field(piece name, piece value);

    const char* base_ = nullptr;
    piece method_name_;
    piece target_;
    piece path_;
    piece query_;
    piece authority_;
    piece host_;
    body_framing framing_;
    std::uint32_t size_ = 0;
    std::uint32_t count_ = 0;
    http::method method_ = http::method::other;
    target_form form_ = target_form::origin;
    std::uint8_t version_minor_ = 1;
    bool has_query_ = false;
    bool keep_alive_ = false;
    bool expect_continue_ = false;
    std::array<field_rec, inline_fields> inline_;
    std::vector<field_rec> more_;  // fields past inline_fields; empty unless a request has them
};

class request_head::field_iterator {
public:
    using value_type = header_field;
    using difference_type = std::ptrdiff_t;
    field_iterator() noexcept = default;
    field_iterator(const request_head* h, std::size_t i) noexcept : h_(h), i_(i) {}
    auto operator*() const noexcept -> header_field { return h_->field(i_); }
    auto operator++() noexcept -> field_iterator& {
        ++i_;
        return *this;
    }
    auto operator++(int) noexcept -> field_iterator {
        auto t = *this;
        ++i_;
        return t;
    }
    auto operator==(const field_iterator& o) const noexcept -> bool { return i_ == o.i_; }

private:
    const request_head* h_ = nullptr;
    std::size_t i_ = 0;
};

class request_head::field_range {
public:
    explicit field_range(const request_head* h) noexcept : h_(h) {}
    [[nodiscard]] auto begin() const noexcept -> field_iterator { return {h_, 0}; }
    [[nodiscard]] auto end() const noexcept -> field_iterator { return {h_, h_->field_count()}; }
    [[nodiscard]] auto size() const noexcept -> std::size_t { return h_->field_count(); }

private:
    const request_head* h_;
};

class request_head::value_iterator {
public:
    using value_type = std::string_view;
    using difference_type = std::ptrdiff_t;
    value_iterator() noexcept = default;
    value_iterator(const request_head* h, std::string_view name, std::size_t i) noexcept
        : h_(h), name_(name), i_(i) {
        skip();
    }
    auto operator*() const noexcept -> std::string_view { return h_->field(i_).value; }
    auto operator++() noexcept -> value_iterator& {
        ++i_;
        skip();
        return *this;
    }
    auto operator++(int) noexcept -> value_iterator {
        auto t = *this;
        ++*this;
        return t;
    }
    auto operator==(const value_iterator& o) const noexcept -> bool { return i_ == o.i_; }

private:
    void skip() noexcept;
    const request_head* h_ = nullptr;
    std::string_view name_;
    std::size_t i_ = 0;
};

class request_head::value_range {
public:
    value_range(const request_head* h, std::string_view name) noexcept : h_(h), name_(name) {}
    [[nodiscard]] auto begin() const noexcept -> value_iterator { return {h_, name_, 0}; }
    [[nodiscard]] auto end() const noexcept -> value_iterator {
        return {h_, name_, h_->field_count()};
    }
    [[nodiscard]] auto empty() const noexcept -> bool { return begin() == end(); }

private:
    const request_head* h_;
    std::string_view name_;
};

inline auto request_head::fields() const noexcept -> field_range { return field_range{this}; }

inline auto request_head::values(std::string_view name) const noexcept -> value_range {
    return {this, name};
}

}  // namespace weft::http
