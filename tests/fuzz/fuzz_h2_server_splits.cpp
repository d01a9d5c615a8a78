// libFuzzer: weft's HTTP/2 server (src/http/h2_connection.cpp on nghttp2, with the routes,
// handlers and runtime under it) over loopback, fed the client preface and then a frame stream
// the fuzzer writes, cut where it chooses: each cut ends a piece that reaches the server as a
// receive of its own (tests/http/paced_sender.hpp). The server must neither crash nor trip a
// sanitizer, and must close the connection once the client has half-closed. Unlike the
// HTTP/1.1 target it does not compare the split run with the whole one: streams are answered
// concurrently (their frames interleave in any order) and HPACK codes the Date field into the
// connection's dynamic table, so two runs may differ in their bytes while both are right.
//
// Input: byte 0 is the number of cuts (bits 0-4, up to 31); then two bytes per cut
// (little-endian, taken modulo the stream's length); the rest follows the preface. Limits are
// small so that short inputs reach them.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "http/echo_routes.hpp"
#include "http/paced_sender.hpp"
#include "weft/core/scope.hpp"
#include "weft/http/server.hpp"
#include "weft/io/reactor.hpp"
#include "weft/io/tcp_listener.hpp"
#include "weft/sched/runtime.hpp"

namespace {

using namespace weft;
using namespace weft::http;

constexpr std::string_view preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// One runtime and one server for the whole run, made on first use and never destroyed (the
// fuzzer exits with them running): each input is one connection to it.
struct harness {
    harness() : rt(io_runtime_options(2)) {
        http::detail::receive_counts_for_test.store(&counts, std::memory_order_relaxed);
        server_options o;
        o.limits.body = 1024;
        o.http2.max_concurrent_streams = 8;
        o.http2.max_header_list_size = 1024;
        o.http2.initial_window_size = 256;
        o.http2.reset_burst = 8;
        // A stream that waits on the client (a window never opened, a body never ended) ends
        // the connection soon; the fuzzer's half-close ends the rest.
        o.send_timeout = std::chrono::milliseconds{200};
        o.body_timeout = std::chrono::milliseconds{200};
        o.min_rate_grace = std::chrono::milliseconds{200};
        srv = std::make_unique<server>(std::move(o));
        test::echo_routes(*srv);
        l = std::make_unique<tcp_listener>(
            tcp_listener::bind(socket_address::parse("127.0.0.1", 0).value()).value());
        addr = l->local_address().value();
        serving = rt.spawn(srv->serve(*l));
    }
    http::detail::receive_counts counts;
    runtime rt;
    std::unique_ptr<server> srv;
    std::unique_ptr<tcp_listener> l;
    socket_address addr;
    std::optional<join_handle<void>> serving;
};

auto the_harness() -> harness& {
    static harness* h = new harness;  // NOLINT: lives until exit, on purpose
    return *h;
}

}  // namespace

extern "C" auto LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) -> int {
    if (size < 1) {
        return 0;
    }
    const std::size_t ncuts = data[0] & 31U;
    if (size < 1 + 2 * ncuts) {
        return 0;
    }
    std::string stream{preface};
    stream.append(reinterpret_cast<const char*>(data) + 1 + 2 * ncuts, size - 1 - 2 * ncuts);
    std::vector<std::size_t> cuts;
    for (std::size_t i = 0; i < ncuts; ++i) {
        const std::size_t v = data[1 + 2 * i] | (std::size_t{data[2 + 2 * i]} << 8U);
        cuts.push_back(1 + v % (stream.size() - 1));
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());

    harness& h = the_harness();
    const test::paced_exchange got = h.rt.block_on(test::exchange(h.addr, stream, cuts));
    if (!got.connected) {
        std::fprintf(stderr, "fuzz_h2_server_splits: no connection\n");
        std::abort();
    }
    return 0;
}
