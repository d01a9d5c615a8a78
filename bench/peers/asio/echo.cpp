// Asio peer for weft-bench's TCP echo benchmark (see ../README.md).
//
//   asio-echo [-h HOST] [-p PORT] [-t THREADS] [--per-core]
//
// Flags, threads, listeners and signals as server.hpp describes. Every accepted connection gets
// its own coroutine that reads up to 4096 bytes and writes back exactly what it read until the
// peer closes.
#include <array>
#include <asio/write.hpp>

#include "server.hpp"

namespace {

using asio::ip::tcp;

constexpr std::size_t kBufSize = 4096;

// Echoes until EOF or any error (reset etc.); the socket is closed when the frame goes away.
// async_write loops over partial writes. Errors come back through redirect_error, not as
// exceptions, so ending a connection costs no throw.
asio::awaitable<void> echo(tcp::socket sock) {
    std::error_code ec;
    sock.set_option(tcp::no_delay(true), ec);
    std::array<char, kBufSize> buf;  // lives in the coroutine frame
    for (;;) {
        std::size_t n = co_await sock.async_read_some(
            asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
        if (ec) {
            co_return;
        }
        co_await asio::async_write(sock, asio::buffer(buf.data(), n),
                                   asio::redirect_error(asio::use_awaitable, ec));
        if (ec) {
            co_return;
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    return peer::run("asio-echo", peer::parse_args("asio-echo", argc, argv), echo);
}
