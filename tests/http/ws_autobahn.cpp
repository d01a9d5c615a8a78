// The peer of the Autobahn|Testsuite conformance run (scripts/autobahn.sh):
//   ws_autobahn server PORT   an echo server on 127.0.0.1:PORT, for the fuzzing client
//   ws_autobahn client PORT   runs every case of the fuzzing server on 127.0.0.1:PORT, echoing
// The limits are raised to the suite's largest messages (16 MiB in one frame, cases 9.*).
// permessage-deflate is accepted and offered (cases 12.* and 13.*): the server with context
// takeover both ways where the offer allows it, the client with the takeover of the server's
// window only (13.* accept only offers that announce client_no_context_takeover), so each
// direction runs once with a state per connection and once with the thread's.

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "weft/http/server.hpp"
#include "weft/http/websocket.hpp"
#include "weft/io/reactor.hpp"
#include "weft/sched/runtime.hpp"

namespace {

using namespace std::chrono_literals;
using weft::task;
namespace http = weft::http;

auto conformance_options(bool server) -> http::websocket_options {
    http::websocket_options o;
    o.max_frame = 64 << 20;
    o.max_message = 64 << 20;
    o.ping_interval = 0ms;
    o.idle_timeout = 60s;
    o.close_timeout = 2s;
    o.deflate.enabled = true;
    o.deflate.send_context_takeover = server;
    o.deflate.receive_context_takeover = true;
    return o;
}

auto echo(http::websocket& ws) -> task<void> {
    for (;;) {
        auto m = co_await ws.receive();
        if (!m) {
            co_return;
        }
        auto w = co_await ws.send(m->data, m->text);
        if (!w) {
            co_return;
        }
    }
}

auto run_server(std::uint16_t port) -> task<void> {
    http::server srv;
    srv.websocket(
        "/", [](http::websocket& ws) { return echo(ws); }, conformance_options(true));
    auto r = co_await srv.listen(weft::socket_address::parse("127.0.0.1", port).value());
    if (!r) {
        std::fprintf(stderr, "listen: %s\n", r.error().message().c_str());
        std::exit(1);
    }
}

auto run_client(std::uint16_t port) -> task<int> {
    const auto addr = weft::socket_address::parse("127.0.0.1", port).value();
    auto count_ws = co_await http::websocket::connect(addr, "127.0.0.1", "/getCaseCount",
                                                      conformance_options(false));
    if (!count_ws) {
        std::fprintf(stderr, "getCaseCount: %s\n", count_ws.error().message().c_str());
        co_return 1;
    }
    auto count = co_await count_ws->receive();
    if (!count) {
        co_return 1;
    }
    const int cases = std::atoi(count->data.c_str());
    (void)co_await count_ws->receive();  // the server's close
    for (int i = 1; i <= cases; ++i) {
        auto ws = co_await http::websocket::connect(
            addr, "127.0.0.1", "/runCase?case=" + std::to_string(i) + "&agent=weft",
            conformance_options(false));
        if (ws) {
            co_await echo(*ws);
        }
    }
    auto report = co_await http::websocket::connect(addr, "127.0.0.1", "/updateReports?agent=weft",
                                                    conformance_options(false));
    if (report) {
        (void)co_await report->receive();
    }
    std::printf("ran %d cases\n", cases);
    co_return 0;
}

}  // namespace

auto main(int argc, char** argv) -> int {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s server|client PORT\n", argv[0]);
        return 2;
    }
    const std::string_view mode = argv[1];
    const auto port = static_cast<std::uint16_t>(std::atoi(argv[2]));
    weft::runtime rt{weft::io_runtime_options(2)};
    if (mode == "server") {
        rt.block_on(run_server(port));
        return 0;
    }
    return rt.block_on(run_client(port));
}
