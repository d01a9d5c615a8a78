// A TCP echo server and its clients in one program. The server accepts in a scope (on io_uring
// one multishot accept serves every connection) and echoes what each connection receives (one
// multishot receive per connection, into the worker's provided buffers, handed on without a
// copy). 100 clients send 200 numbered lines each and check every reply; then the server is
// cancelled. WEFT_IO_BACKEND=io_uring|epoll picks the backend (default: io_uring if the kernel
// has it). Build: part of the default build (examples/); run: ./build/.../examples/echo

#include <atomic>
#include <cstdio>
#include <string>
#include <weft/weft.hpp>

namespace {

constexpr int clients = 100;
constexpr int lines_per_client = 200;

auto serve(weft::tcp_stream c) -> weft::task<void> {
    for (;;) {
        auto data = co_await c.receive();  // weft::bytes: shared, not copied
        if (!data) {
            co_return;  // eof (the client is done), a reset, or cancellation
        }
        if (!co_await c.write_all(data->span())) {
            co_return;
        }
    }
}

auto accept_loop(weft::tcp_listener& l) -> weft::task<void> {
    co_await weft::with_scope([&](weft::scope& conns) -> weft::task<void> {
        for (;;) {
            auto c = co_await l.accept();
            if (!c) {
                co_return;  // cancelled: the scope cancels and awaits every connection
            }
            conns.spawn(serve(std::move(*c)));
        }
    });
}

// One client: send a line, read until the whole echo is back, compare.
auto client(weft::socket_address addr, int id, std::atomic<int>& good) -> weft::task<void> {
    auto c = (co_await weft::tcp_stream::connect(addr)).value();
    for (int i = 0; i < lines_per_client; ++i) {
        const std::string line = std::to_string(id) + ":" + std::to_string(i) + "\n";
        (co_await c.write_all(std::as_bytes(std::span{line}))).value();
        std::string back(line.size(), '\0');
        (co_await c.read_exact(std::as_writable_bytes(std::span{back}))).value();
        if (back == line) {
            good.fetch_add(1, std::memory_order_relaxed);
        }
    }
}

auto program() -> weft::task<int> {
    auto l = weft::tcp_listener::bind(weft::socket_address::parse("127.0.0.1", 0).value());
    if (!l) {
        std::fprintf(stderr, "bind: %s\n", l.error().message().c_str());
        co_return 1;
    }
    const auto addr = l->local_address().value();
    std::atomic<int> good{0};
    co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
        s.spawn(accept_loop(*l));
        co_await weft::with_scope([&](weft::scope& cs) -> weft::task<void> {
            for (int id = 0; id < clients; ++id) {
                cs.spawn(client(addr, id, good));
            }
            co_return;
        });
        s.request_stop();  // every client is done: cancel the server (with_scope awaits it)
    });
    std::printf("%s: %d of %d echoes correct\n",
                std::string(weft::to_string(weft::current_io_backend())).c_str(), good.load(),
                clients * lines_per_client);
    co_return good.load() == clients* lines_per_client ? 0 : 1;
}

}  // namespace

auto main() -> int {
    weft::runtime rt;
    return rt.block_on(program());
}
