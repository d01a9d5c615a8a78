#include "weft/http/response.hpp"

#include <unistd.h>

#include <cstring>
#include <stdexcept>

#include "char_class.hpp"
#include "swar.hpp"

namespace weft::http {

auto reason_phrase(int status) noexcept -> std::string_view {
    switch (status) {
        case 100:
            return "Continue";
        case 101:
            return "Switching Protocols";
        case 200:
            return "OK";
        case 201:
            return "Created";
        case 202:
            return "Accepted";
        case 204:
            return "No Content";
        case 206:
            return "Partial Content";
        case 301:
            return "Moved Permanently";
        case 302:
            return "Found";
        case 303:
            return "See Other";
        case 304:
            return "Not Modified";
        case 307:
            return "Temporary Redirect";
        case 308:
            return "Permanent Redirect";
        case 400:
            return "Bad Request";
        case 401:
            return "Unauthorized";
        case 403:
            return "Forbidden";
        case 404:
            return "Not Found";
        case 405:
            return "Method Not Allowed";
        case 408:
            return "Request Timeout";
        case 409:
            return "Conflict";
        case 411:
            return "Length Required";
        case 412:
            return "Precondition Failed";
        case 413:
            return "Content Too Large";
        case 414:
            return "URI Too Long";
        case 415:
            return "Unsupported Media Type";
        case 416:
            return "Range Not Satisfiable";
        case 417:
            return "Expectation Failed";
        case 426:
            return "Upgrade Required";
        case 429:
            return "Too Many Requests";
        case 431:
            return "Request Header Fields Too Large";
        case 500:
            return "Internal Server Error";
        case 501:
            return "Not Implemented";
        case 502:
            return "Bad Gateway";
        case 503:
            return "Service Unavailable";
        case 504:
            return "Gateway Timeout";
        case 505:
            return "HTTP Version Not Supported";
        default:
            return "Unknown";
    }
}

namespace {

using detail::iequals;

// Header injection: a CR or LF in a name or value would let a handler's data start a new
// field or a new response; NUL is refused by every client.
void check_value_bytes(std::string_view value) {
    for (char c : value) {
        // One compare for nearly every byte: CR, LF and NUL are all <= '\r'.
        if (static_cast<unsigned char>(c) <= '\r' && (c == '\r' || c == '\n' || c == '\0')) {
            throw std::invalid_argument("weft::http::response: CR, LF or NUL in a header value");
        }
    }
}

// Eight bytes at a time (every response's Content-Type passes here): a word with no byte below
// 0x0E holds none of CR, LF and NUL (swar::below flags none exactly then); a word that may hold
// one is looked at byte by byte.
void check_value(std::string_view value) {
    std::size_t i = 0;
    for (; i + 8 <= value.size(); i += 8) {
        if (detail::swar::below(detail::swar::load(value.data() + i), 0x0E) != 0) {
            check_value_bytes(value.substr(i, 8));
        }
    }
    check_value_bytes(value.substr(i));
}

void check_field(std::string_view name, std::string_view value) {
    if (name.empty()) {
        throw std::invalid_argument("weft::http::response: empty header name");
    }
    for (char c : name) {
        if (!detail::is_tchar(c)) {
            throw std::invalid_argument("weft::http::response: header name is not a token");
        }
    }
    check_value(value);
}

}  // namespace

response::response(response&& o) noexcept
    : status_(o.status_),
      type_len_(o.type_len_),
      long_type_(std::move(o.long_type_)),
      headers_(std::move(o.headers_)),
      body_(std::move(o.body_)) {
    std::memcpy(type_, o.type_, type_len_);
    o.body_ = std::monostate{};
}

auto response::operator=(response&& o) noexcept -> response& {
    if (this != &o) {
        close_file();
        status_ = o.status_;
        type_len_ = o.type_len_;
        std::memcpy(type_, o.type_, type_len_);
        long_type_ = std::move(o.long_type_);
        headers_ = std::move(o.headers_);
        body_ = std::move(o.body_);
        o.body_ = std::monostate{};
    }
    return *this;
}

response::~response() { close_file(); }

void response::close_file() noexcept {
    if (auto* f = std::get_if<file_body>(&body_); f != nullptr && f->fd >= 0) {
        ::close(f->fd);
        f->fd = -1;
    }
}

auto response::text(std::string body, int status, std::string_view content_type) -> response {
    response r{status};
    r.set_content_type(content_type);
    r.body_ = std::move(body);
    return r;
}

auto response::of_bytes(bytes body, int status, std::string_view content_type) -> response {
    response r{status};
    r.set_content_type(content_type);
    r.body_ = std::move(body);
    return r;
}

auto response::file(int fd,
                    std::uint64_t offset,
                    std::uint64_t length,
                    std::string_view content_type) -> response {
    response r{200};
    r.set_content_type(content_type);
    r.body_ = file_body{fd, offset, length};
    return r;
}

auto response::stream(std::function<task<result<void>>(body_writer&)> fn,
                      std::optional<std::uint64_t> length,
                      std::string_view content_type) -> response {
    response r{200};
    r.set_content_type(content_type);
    r.body_ = stream_body{std::move(fn), length};
    return r;
}

void response::set_content_type(std::string_view type) {
    check_value(type);
    if (type.size() <= sizeof type_) {
        std::memcpy(type_, type.data(), type.size());
        type_len_ = static_cast<std::uint8_t>(type.size());
        long_type_.clear();
    } else {
        type_len_ = 0;
        long_type_ = type;
    }
}

void response::add_header(std::string_view name, std::string_view value) {
    if (iequals(name, "content-type")) {
        set_content_type(value);  // one Content-Type only
        return;
    }
    check_field(name, value);
    headers_.emplace_back(name, value);
}

void response::set_header(std::string_view name, std::string_view value) {
    if (iequals(name, "content-type")) {
        set_content_type(value);
        return;
    }
    check_field(name, value);
    std::erase_if(headers_, [&](const auto& h) { return iequals(h.first, name); });
    headers_.emplace_back(name, value);
}

auto response::header(std::string_view name) const noexcept -> std::optional<std::string_view> {
    if (iequals(name, "content-type")) {
        const std::string_view t = content_type();
        return t.empty() ? std::nullopt : std::optional<std::string_view>{t};
    }
    for (const auto& [n, v] : headers_) {
        if (iequals(n, name)) {
            return std::string_view{v};
        }
    }
    return std::nullopt;
}

}  // namespace weft::http
