#include "weft/http/client_stream.hpp"

namespace weft::http {

client_stream::client_stream(client_response head,
                             std::unique_ptr<detail::client_body_source> body) noexcept
    : head_(std::move(head)), body_(std::move(body)) {}

client_stream::client_stream(client_stream&&) noexcept = default;
auto client_stream::operator=(client_stream&&) noexcept -> client_stream& = default;
client_stream::~client_stream() = default;

auto client_stream::read() -> task<result<std::string_view>> {
    if (!body_) {
        co_return std::string_view{};
    }
    auto piece = co_await body_->read();
    if (!piece || piece->empty()) {
        body_.reset();  // over: an HTTP/1.1 connection goes back or is closed now
    }
    co_return piece;
}

auto client_stream::read_all() -> task<result<std::string>> {
    std::string all;
    for (;;) {
        auto piece = co_await read();
        if (!piece) {
            co_return piece.error();
        }
        if (piece->empty()) {
            co_return all;
        }
        all.append(*piece);
    }
}

}  // namespace weft::http
