#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "weft/core/result.hpp"
#include "weft/core/task.hpp"
#include "weft/io/bytes.hpp"

namespace weft::http {

/// The standard reason phrase of `status` ("OK", "Not Found"); "Unknown" for codes it does not
/// know (the phrase carries no meaning: clients go by the number).
[[nodiscard]] auto reason_phrase(int status) noexcept -> std::string_view;

/// Writes a streamed response body (response::stream). With a length given up front the bytes
/// go out as they are (Content-Length); without one each write is one chunk of a chunked body
/// (HTTP/1.1) or the body is delimited by closing the connection (HTTP/1.0). Each write waits
/// until the socket took the bytes, so a slow client slows the producer instead of growing a
/// queue: memory stays bounded whatever the body's size.
class body_writer {
public:
    virtual ~body_writer() = default;
    /// Sends `data` (an empty one is ignored). An error (the client went away, the send timeout
    /// passed, the server is stopping) ends the stream: return it from the producer.
    [[nodiscard]] virtual auto write(std::string_view data) -> task<result<void>> = 0;
};

/// A file (or part of one) sent as the body: sendfile(2) from the page cache to the socket,
/// no copy through user space. The response owns the descriptor and closes it when sent.
struct file_body {
    int fd = -1;
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
};

/// A body produced while it is sent, by `fn` writing through a body_writer.
struct stream_body {
    std::function<task<result<void>>(body_writer&)> fn;
    std::optional<std::uint64_t> length;  ///< Content-Length if known; chunked otherwise
};

/// An HTTP response: status, header fields and a body. The server adds Date, Content-Length (or
/// Transfer-Encoding: chunked) and Connection; a handler sets any other field it needs
/// (Content-Type is set by the text/html helpers). For HEAD the server sends the head of the
/// GET response without its body.
///
///     co_return weft::http::response::text("Hello, World!");
///     co_return weft::http::response{404};
///     auto r = weft::http::response::text(json, 201, "application/json");
///     r.set_header("Location", "/items/7");
class response {
public:
    using header_list = std::vector<std::pair<std::string, std::string>>;
    using body_type = std::variant<std::monostate, std::string, bytes, file_body, stream_body>;

    response() = default;
    explicit response(int status) noexcept : status_(status) {}
    response(response&& o) noexcept;
    auto operator=(response&& o) noexcept -> response&;
    response(const response&) = delete;
    auto operator=(const response&) -> response& = delete;
    ~response();

    /// `body` with Content-Type `content_type`.
    [[nodiscard]] static auto text(std::string body,
                                   int status = 200,
                                   std::string_view content_type = "text/plain; charset=utf-8")
        -> response;
    /// The received `bytes`, sent without a copy.
    [[nodiscard]] static auto of_bytes(bytes body,
                                       int status = 200,
                                       std::string_view content_type = "application/octet-stream")
        -> response;
    /// `length` bytes of the open file `fd` from `offset`; the response takes the descriptor.
    [[nodiscard]] static auto file(int fd,
                                   std::uint64_t offset,
                                   std::uint64_t length,
                                   std::string_view content_type = "application/octet-stream")
        -> response;
    /// A body written by `fn` while it is sent (chunked unless `length` is given).
    [[nodiscard]] static auto stream(std::function<task<result<void>>(body_writer&)> fn,
                                     std::optional<std::uint64_t> length = std::nullopt,
                                     std::string_view content_type = "application/octet-stream")
        -> response;

    [[nodiscard]] auto status() const noexcept -> int { return status_; }
    void set_status(int s) noexcept { status_ = s; }

    /// Adds a field (a name may repeat, as Set-Cookie does). Names and values must not hold CR,
    /// LF or NUL: such a field is refused with std::invalid_argument (header injection).
    void add_header(std::string_view name, std::string_view value);
    /// Replaces every field named `name` (ASCII case-insensitive) by one with `value`.
    void set_header(std::string_view name, std::string_view value);
    /// The first value of `name`, if any.
    [[nodiscard]] auto header(std::string_view name) const noexcept
        -> std::optional<std::string_view>;
    /// Every field but Content-Type (content_type() has it).
    [[nodiscard]] auto headers() const noexcept -> const header_list& { return headers_; }
    /// Content-Type ("" when none). Kept apart from the other fields, inline up to 47 bytes,
    /// so the usual response allocates nothing for its fields.
    [[nodiscard]] auto content_type() const noexcept -> std::string_view {
        return type_len_ != 0 ? std::string_view{type_, type_len_} : std::string_view{long_type_};
    }
    void set_content_type(std::string_view type);

    [[nodiscard]] auto body() noexcept -> body_type& { return body_; }
    [[nodiscard]] auto body() const noexcept -> const body_type& { return body_; }
    void set_body(std::string b) { body_ = std::move(b); }

private:
    void close_file() noexcept;

    int status_ = 200;
    std::uint8_t type_len_ = 0;
    char type_[47];  // the first type_len_ bytes only are ever read (not zeroed per response)
    std::string long_type_;  // a Content-Type longer than type_ holds
    header_list headers_;
    body_type body_;
};

}  // namespace weft::http
