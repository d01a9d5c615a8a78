// libFuzzer: weft's HTTP server itself (src/http/connection.cpp and all below it: parser, body
// decoder, router, response writer, the runtime and its sockets) over loopback, fed a stream
// whose cuts the fuzzer chooses. Each cut ends a piece that reaches the server as a receive of
// its own (tests/http/paced_sender.hpp). The responses must be byte for byte those of the
// same stream sent whole (Date values blanked), under the scan path the input picks.
//
// Input: byte 0 picks the scan path (bits 0-1) and the number of cuts (bits 2-6, up to 31);
// then two bytes per cut (little-endian, taken modulo the stream's length); the rest is the
// stream. Limits are small so that short inputs reach them.

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
#include "weft/http/scan_path.hpp"
#include "weft/http/server.hpp"
#include "weft/io/reactor.hpp"
#include "weft/io/tcp_listener.hpp"
#include "weft/sched/runtime.hpp"

namespace {

using namespace weft;
using namespace weft::http;

// One runtime and one server for the whole run, made on first use and never destroyed (the
// fuzzer exits with them running): each input is one pair of connections to it.
struct harness {
    harness() : rt(io_runtime_options(2)) {
        http::detail::receive_counts_for_test.store(&counts, std::memory_order_relaxed);
        server_options o;
        o.limits.request_line = 256;
        o.limits.header_block = 512;
        o.limits.fields = 16;
        o.limits.body = 1024;
        o.limits.chunk_extensions = 64;
        o.linger_timeout = std::chrono::seconds{10};  // ended by the client's half-close
        // HTTP/1.1 only: whether a connection is HTTP/2 is decided on its first receive (one
        // that starts with "PRI "), so a split inside those four bytes answers differently by
        // design. The HTTP/2 server has its own target, fuzz_h2_server_splits.
        o.http2.enabled = false;
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

void check(bool ok, const char* what, const std::string& whole, const std::string& split) {
    if (!ok) {
        std::fprintf(stderr, "fuzz_server_splits: %s\n--- whole:\n%s\n--- split:\n%s\n", what,
                     whole.c_str(), split.c_str());
        std::abort();
    }
}

}  // namespace

extern "C" auto LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) -> int {
    if (size < 1) {
        return 0;
    }
    static constexpr scan_path paths[] = {scan_path::scalar, scan_path::sse2, scan_path::avx2,
                                          scan_path::scalar};
    const scan_path path = paths[data[0] & 3U];
    const std::size_t ncuts = (data[0] >> 2U) & 31U;
    if (size < 1 + 2 * ncuts) {
        return 0;
    }
    const std::string stream(reinterpret_cast<const char*>(data) + 1 + 2 * ncuts,
                             size - 1 - 2 * ncuts);
    std::vector<std::size_t> cuts;
    if (stream.size() > 1) {
        for (std::size_t i = 0; i < ncuts; ++i) {
            const std::size_t v = data[1 + 2 * i] | (std::size_t{data[2 + 2 * i]} << 8U);
            cuts.push_back(1 + v % (stream.size() - 1));
        }
        std::sort(cuts.begin(), cuts.end());
        cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    }

    harness& h = the_harness();
    // Whole with the portable path; cut with the chosen one (where the CPU has it). Between
    // inputs no connection is open, so the switch lands between requests.
    (void)set_scan_path(scan_path::scalar);
    const test::paced_exchange whole = h.rt.block_on(test::exchange(h.addr, stream, {}));
    if (!set_scan_path(path)) {
        (void)set_scan_path(scan_path::scalar);
    }
    const test::paced_exchange split = h.rt.block_on(test::exchange(h.addr, stream, cuts));
    check(whole.connected && split.connected, "no connection", whole.received, split.received);
    check(whole.received == split.received, "responses differ", whole.received, split.received);
    return 0;
}
