#include "weft/http/client.hpp"

#include <charconv>

#include "char_class.hpp"
#include "weft/http/body_decoder.hpp"
#include "weft/io/error.hpp"

namespace weft::http {

namespace {

auto as_bytes(std::string_view s) -> std::span<const std::byte> {
    return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

auto trim(std::string_view s) -> std::string_view {
    while (!s.empty() && detail::is_ows(s.front())) {
        s.remove_prefix(1);
    }
    while (!s.empty() && detail::is_ows(s.back())) {
        s.remove_suffix(1);
    }
    return s;
}

auto bad_response() -> std::error_code { return std::make_error_code(std::errc::bad_message); }

}  // namespace

auto client_response::header(std::string_view name) const -> std::optional<std::string_view> {
    for (const auto& [n, v] : headers) {
        if (detail::iequals(n, name)) {
            return std::string_view{v};
        }
    }
    return std::nullopt;
}

auto client::connect(socket_address addr) -> task<result<client>> {
    auto s = co_await tcp_stream::connect(addr);
    if (!s) {
        co_return s.error();
    }
    co_return client{std::move(*s)};
}

auto client::send(std::string_view method,
                  std::string_view target,
                  std::string_view body,
                  std::vector<std::string> headers) -> task<result<void>> {
    std::string req;
    req.reserve(64 + target.size() + body.size());
    req.append(method).append(" ").append(target).append(" HTTP/1.1\r\nHost: weft\r\n");
    for (const auto& h : headers) {
        req.append(h).append("\r\n");
    }
    if (!body.empty() || method == "POST" || method == "PUT") {
        req.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n");
    }
    req.append("\r\n").append(body);
    co_return co_await s_.write_all(as_bytes(req));
}

auto client::send_raw(std::string_view bytes) -> task<result<void>> {
    co_return co_await s_.write_all(as_bytes(bytes));
}

auto client::fill() -> task<result<void>> {
    char tmp[16384];
    auto n = co_await s_.read_some(std::as_writable_bytes(std::span{tmp}));
    if (!n) {
        co_return n.error();
    }
    buf_.append(tmp, *n);
    co_return result<void>{};
}

auto client::read_response(bool head_request) -> task<result<client_response>> {
    std::size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
        if (auto r = co_await fill(); !r) {
            co_return r.error();
        }
    }
    client_response out;
    std::string_view head{buf_.data(), end + 2};
    // Status line: HTTP/1.x SP 3DIGIT SP reason
    const std::size_t eol = head.find("\r\n");
    std::string_view line = head.substr(0, eol);
    if (line.size() < 12 || line.substr(0, 7) != "HTTP/1." || line[8] != ' ') {
        co_return bad_response();
    }
    out.version_minor = line[7] - '0';
    if (std::from_chars(line.data() + 9, line.data() + 12, out.status).ec != std::errc{}) {
        co_return bad_response();
    }
    out.keep_alive = out.version_minor == 1;
    std::optional<std::uint64_t> length;
    for (std::size_t at = eol + 2; at < head.size();) {
        const std::size_t e = head.find("\r\n", at);
        const std::string_view field = head.substr(at, e - at);
        at = e + 2;
        const std::size_t colon = field.find(':');
        if (colon == std::string_view::npos) {
            co_return bad_response();
        }
        const std::string_view name = field.substr(0, colon);
        const std::string_view value = trim(field.substr(colon + 1));
        if (detail::iequals(name, "content-length")) {
            std::uint64_t v = 0;
            if (std::from_chars(value.data(), value.data() + value.size(), v).ec != std::errc{}) {
                co_return bad_response();
            }
            length = v;
        } else if (detail::iequals(name, "transfer-encoding")) {
            out.chunked = detail::iequals(value, "chunked");
        } else if (detail::iequals(name, "connection")) {
            if (detail::iequals(value, "close")) {
                out.keep_alive = false;
            } else if (detail::iequals(value, "keep-alive")) {
                out.keep_alive = true;
            }
        }
        out.headers.emplace_back(name, value);
    }
    buf_.erase(0, end + 4);
    const bool no_body =
        head_request || out.status / 100 == 1 || out.status == 204 || out.status == 304;
    if (no_body) {
        co_return out;
    }
    if (out.chunked) {
        request_limits lim;
        lim.body = UINT64_MAX / 2;
        body_decoder d{{body_kind::chunked, 0}, lim};
        for (;;) {
            const body_step s = d.decode(buf_);
            if (s.status == body_status::data) {
                out.body.append(s.data);
            }
            buf_.erase(0, s.consumed);
            if (s.status == body_status::done) {
                co_return out;
            }
            if (s.status == body_status::error) {
                co_return bad_response();
            }
            if (s.status == body_status::need_more) {
                if (auto r = co_await fill(); !r) {
                    co_return r.error();
                }
            }
        }
    }
    if (length) {
        while (buf_.size() < *length) {
            if (auto r = co_await fill(); !r) {
                co_return r.error();
            }
        }
        out.body = buf_.substr(0, static_cast<std::size_t>(*length));
        buf_.erase(0, static_cast<std::size_t>(*length));
        co_return out;
    }
    // Delimited by the close.
    auto rest = co_await read_until_close();
    if (!rest) {
        co_return rest.error();
    }
    out.body = std::move(*rest);
    out.keep_alive = false;
    co_return out;
}

auto client::request(std::string_view method,
                     std::string_view target,
                     std::string_view body,
                     std::vector<std::string> headers) -> task<result<client_response>> {
    if (auto r = co_await send(method, target, body, std::move(headers)); !r) {
        co_return r.error();
    }
    co_return co_await read_response(method == "HEAD");
}

auto client::read_until_close() -> task<result<std::string>> {
    for (;;) {
        auto r = co_await fill();
        if (!r) {
            if (r.error() == io_errc::eof) {
                std::string all = std::move(buf_);
                buf_.clear();
                co_return all;
            }
            co_return r.error();
        }
    }
}

}  // namespace weft::http
