// A user's HTTP service built against the installed weft as a user debugging their own code
// builds it: run.cmake compiles this one with -fsanitize=address against a weft built without
// it. Coroutine frames are recycled per thread, so frames this program's code freed are reused
// by weft's compiled code and the other way round; both must agree on which memory is
// poisoned, whatever the includer's flags. The service first makes and drops coroutines of its
// own of every recycled frame size (as any service does over time), then serves POSTs with
// bodies on the same worker: each must come back whole, with no AddressSanitizer report.
#include <array>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>
#include <weft/http.hpp>
#include <weft/weft.hpp>

namespace http = weft::http;

namespace {

// The compiler must assume the bytes behind `p` are read and written here (Google Benchmark's
// DoNotOptimize): the array below then stays whole in the frame.
void escape(void* p) { asm volatile("" : : "g"(p) : "memory"); }

template <std::size_t N>
auto sized_frame() -> weft::task<void> {
    std::array<char, N> pad;  // lives across the co_await: part of the frame
    escape(pad.data());
    co_await weft::yield();
    escape(pad.data());
}

// Three frames of each size made, then freed by this program's code: a thread's free list
// takes the first slowly and the other two on the inline path. Kept in a vector, so that no
// compiler elides their allocation.
template <std::size_t... I>
void drop_frames_of_every_size(std::index_sequence<I...>) {
    std::vector<weft::task<void>> frames;
    auto three = [&](auto make) {
        for (int i = 0; i < 3; ++i) {
            frames.push_back(make());
        }
        while (!frames.empty()) {
            frames.pop_back();
        }
    };
    (three([] { return sized_frame<32 * I + 8>(); }), ...);
}

auto round_trips() -> weft::task<int> {
    drop_frames_of_every_size(std::make_index_sequence<64>{});
    http::server srv;
    srv.route(http::method::post, "/echo", [](http::request& req) -> weft::task<http::response> {
        auto body = (co_await req.body().read_all()).value();
        co_return http::response::text(std::move(body));
    });
    auto listener =
        weft::tcp_listener::bind(weft::socket_address::parse("127.0.0.1", 0).value()).value();
    const auto addr = listener.local_address().value();
    int failures = 0;
    co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
        s.spawn(srv.serve(listener));
        auto c = (co_await http::client::connect(addr)).value();
        for (const std::size_t size : {5U, 300'000U}) {
            std::string body(size, '\0');
            for (std::size_t i = 0; i < size; ++i) {
                body[i] = static_cast<char>('a' + i % 26);
            }
            auto r = (co_await c.request("POST", "/echo", body)).value();
            if (r.status != 200 || r.body != body) {
                std::fprintf(stderr, "POST of %zu bytes: status %d, %zu bytes back\n", size,
                             r.status, r.body.size());
                ++failures;
            }
        }
        co_await srv.shutdown();
    });
    co_return failures;
}

}  // namespace

auto main() -> int {
    weft::runtime rt{{.workers = 1}};  // one thread: one set of free lists
    return rt.block_on(round_trips()) == 0 ? 0 : 1;
}
