// ws_echo: weft's server in weft-bench's websocket suite. A WebSocket echo server on
// 127.0.0.1:PORT/echo: each connection's handler receives a message and sends it back.
//
//   ws_echo --port N [--workers N]
//
// Serves until SIGINT or SIGTERM, then drains (every client gets close 1001). Prints
// "listening on HOST:PORT" once ready. WEFT_IO_BACKEND=io_uring|epoll picks the backend.

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <weft/http.hpp>
#include <weft/weft.hpp>

namespace {

namespace http = weft::http;

auto echo(http::websocket& ws) -> weft::task<void> {
    for (;;) {
        auto m = co_await ws.receive();
        if (!m) {
            co_return;
        }
        auto sent = co_await ws.send(m->data, m->text);
        if (!sent) {
            co_return;
        }
    }
}

auto serve(std::uint16_t port) -> weft::task<int> {
    http::server srv{{.on_listening = [](const weft::socket_address& a) {
        std::printf("listening on %s\n", a.to_string().c_str());
        std::fflush(stdout);
    }}};
    srv.websocket("/echo", [](http::websocket& ws) { return echo(ws); });
    int status = 0;
    co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
        s.spawn([&]() -> weft::task<void> {
            auto r = co_await srv.listen(weft::socket_address::parse("127.0.0.1", port).value());
            if (!r) {
                std::fprintf(stderr, "ws_echo: %s\n", r.error().message().c_str());
                status = 1;
                s.request_stop();
            }
        });
        auto sig = co_await weft::wait_for_signal({SIGINT, SIGTERM});
        if (sig) {
            co_await srv.shutdown();
        }
    });
    co_return status;
}

}  // namespace

auto main(int argc, char** argv) -> int {
    unsigned port = 0;
    unsigned workers = 2;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string_view a = argv[i];
        if (a == "--port") {
            port = static_cast<unsigned>(std::stoul(argv[i + 1]));
        } else if (a == "--workers") {
            workers = static_cast<unsigned>(std::stoul(argv[i + 1]));
        } else {
            std::fprintf(stderr, "usage: ws_echo --port N [--workers N]\n");
            return 2;
        }
    }
    weft::runtime rt{weft::io_runtime_options(workers)};
    return rt.block_on(serve(static_cast<std::uint16_t>(port)));
}
