#include "weft/http/client.hpp"

#include "char_class.hpp"
#include "response_reader.hpp"
#include "weft/io/error.hpp"

namespace weft::http {

namespace {

auto as_bytes(std::string_view s) -> std::span<const std::byte> {
    return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

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
    co_return co_await write_all(as_bytes(req));
}

auto client::send_raw(std::string_view bytes) -> task<result<void>> {
    co_return co_await write_all(as_bytes(bytes));
}

auto client::fill() -> task<result<void>> {
    char tmp[16384];
    auto n = co_await read_some(std::as_writable_bytes(std::span{tmp}));
    if (!n) {
        co_return n.error();
    }
    buf_.append(tmp, *n);
    co_return result<void>{};
}

auto client::read_response(bool head_request) -> task<result<client_response>> {
    co_return co_await detail::read_response(buf_, [this] { return fill(); }, head_request,
                                             {.head = 1024 * 1024, .body = std::uint64_t{1} << 40});
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
