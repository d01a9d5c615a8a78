#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
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

/// What a response's body is (response::form()).
enum class body_form : std::uint8_t { none, text, bytes, file, stream };

/// An HTTP response: status, header fields and a body. The server adds Date, Content-Length (or
/// Transfer-Encoding: chunked) and Connection; a handler sets any other field it needs
/// (Content-Type is set by the text/html helpers). For HEAD the server sends the head of the
/// GET response without its body.
///
/// The framing is the server's, so no response is framed twice and no body goes where the
/// client expects none (a pipelined client would read the next response from the wrong byte):
/// - Content-Length set here must be 1*DIGIT (std::invalid_argument otherwise) and is kept
///   apart from headers(). The server sends the body's own length (a string's, the bytes', a
///   file range's, a stream's given length) in its place; it sends the value set here only
///   where there is no body to measure: with a 304 (the length a 200 would have had) and in
///   answer to HEAD when the body is none (the length the GET would have had; a HEAD answered
///   with a body gets that body's length, as the GET does: RFC 9110 9.3.2).
/// - Transfer-Encoding is refused (std::invalid_argument): a stream without a length is sent
///   chunked by the server.
/// - Connection set here is not sent and kept apart from headers(); a `close` token in it
///   makes the server close the connection after this response (its own `Connection: close`
///   says so). Other tokens have no effect: keep-alive is the server's to decide, and it has
///   no protocol upgrade.
/// - 1xx, 204 and 304 responses and responses to HEAD carry no body bytes, whatever the body
///   (a stream's producer is not run, a file is not read); 1xx and 204 carry neither
///   Content-Length nor Transfer-Encoding (RFC 9110 8.6, 6.4.1). A 1xx is interim, never an
///   answer: a handler's status below 200 (or over 999) is answered 500 and the connection
///   closed, as a handler's exception is.
///
///     co_return weft::http::response::text("Hello, World!");
///     co_return weft::http::response{404};
///     auto r = weft::http::response::text(json, 201, "application/json");
///     r.set_header("Location", "/items/7");
///
/// Layout: what nearly every response has (status, a Content-Type of up to 50 bytes, a string
/// body) is held inline; the rest (other fields, a longer Content-Type, a bytes, file or stream
/// body) in one block allocated when first needed. A response is moved twice on its way from a
/// handler to the connection (into the handler's promise, out of it), so a move copies a few
/// words and a destruction checks two pointers.
class response {
public:
    using header_list = std::vector<std::pair<std::string, std::string>>;

    response() = default;
    explicit response(int status) noexcept { in_.status = status; }
    response(response&& o) noexcept
        : in_(o.in_), text_(std::move(o.text_)), rest_(std::move(o.rest_)) {
        o.in_.form = body_form::none;
    }
    auto operator=(response&& o) noexcept -> response& {
        if (this != &o) {
            in_ = o.in_;
            text_ = std::move(o.text_);
            rest_ = std::move(o.rest_);  // the old one's file (if any) closed
            o.in_.form = body_form::none;
        }
        return *this;
    }
    response(const response&) = delete;
    auto operator=(const response&) -> response& = delete;
    ~response() = default;

    /// `body` with Content-Type text/plain; charset=utf-8 (not checked per response: a
    /// constant).
    [[nodiscard]] static auto text(std::string body, int status = 200) -> response;
    /// `body` with Content-Type `content_type`.
    [[nodiscard]] static auto text(std::string body, int status, std::string_view content_type)
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

    [[nodiscard]] auto status() const noexcept -> int { return in_.status; }
    void set_status(int s) noexcept { in_.status = s; }

    /// Adds a field (a name may repeat, as Set-Cookie does; Content-Type and Content-Length
    /// keep one value, the last set; Connection values join into one list). Names and values
    /// must not hold CR, LF or NUL: such a field is refused with std::invalid_argument (header
    /// injection), as are Transfer-Encoding and a Content-Length that is not 1*DIGIT (the
    /// framing rules above).
    void add_header(std::string_view name, std::string_view value);
    /// Replaces every field named `name` (ASCII case-insensitive) by one with `value`.
    void set_header(std::string_view name, std::string_view value);
    /// The first value of `name`, if any.
    [[nodiscard]] auto header(std::string_view name) const noexcept
        -> std::optional<std::string_view>;
    /// Every field but Content-Type, Content-Length and Connection (content_type(),
    /// declared_length() and closes_connection() have them; header() gives each as set): the
    /// fields the server writes as they are.
    [[nodiscard]] auto headers() const noexcept -> const header_list&;
    /// The Content-Length set on this response, if any (where it is sent: the framing rules).
    [[nodiscard]] auto declared_length() const noexcept -> std::optional<std::uint64_t>;
    /// Whether a Connection set on this response holds `close`.
    [[nodiscard]] auto closes_connection() const noexcept -> bool {
        return rest_ != nullptr && rest_closes();
    }
    /// Content-Type ("" when none).
    [[nodiscard]] auto content_type() const noexcept -> std::string_view {
        return in_.type_len != 0 ? std::string_view{in_.type, in_.type_len} : long_type();
    }
    void set_content_type(std::string_view type);

    /// What the body is; the accessor of that form gives it (the others must not be called).
    [[nodiscard]] auto form() const noexcept -> body_form { return in_.form; }
    [[nodiscard]] auto body_text() noexcept -> std::string& { return text_; }
    [[nodiscard]] auto body_bytes() noexcept -> bytes&;
    [[nodiscard]] auto body_file() noexcept -> file_body&;
    [[nodiscard]] auto body_stream() noexcept -> stream_body&;
    /// Makes `b` the body (a string body).
    void set_body(std::string b) noexcept {
        text_ = std::move(b);
        if (in_.form != body_form::text) {
            drop_body();
            in_.form = body_form::text;
        }
    }

private:
    struct rest;  // the fields, a long Content-Type, a body other than a string
    struct rest_deleter {
        void operator()(rest* p) const noexcept;  // out of line: rest is complete there only
    };
    auto get_rest() -> rest&;
    [[nodiscard]] auto long_type() const noexcept -> std::string_view;
    [[nodiscard]] auto rest_closes() const noexcept -> bool;
    // Content-Length, Connection (kept apart) and Transfer-Encoding (refused): true when
    // `name` is one of them and was handled.
    auto framing_field(std::string_view name, std::string_view value, bool add) -> bool;
    void drop_body() noexcept;  // a bytes, file (closed) or stream body, if any

    // Copied whole by a move (a fixed-size copy of a few words, no call to memcpy with the
    // length), so its bytes are all initialised, though only type[0, type_len) is meaningful.
    struct inline_part {
        int status = 200;
        body_form form = body_form::none;
        std::uint8_t type_len = 0;
        char type[50] = {};
    };
    inline_part in_;
    std::string text_;                          // the body when in_.form == text
    std::unique_ptr<rest, rest_deleter> rest_;  // null until something needs it
};

}  // namespace weft::http
