// sake_architectures: the three HTTP server architectures of the Sake report (seed 000) on
// weft, with hello_http's routes (GET / -> "Hello, World!", POST /echo -> the body back):
//
//   A  the handler runs in the connection's task (what hello_http does);
//   B  "channel coordination": each connection task sends its request into one channel; a
//      single coordinator task takes them and hands them to a worker_pool; the reply goes back
//      to the waiting connection task;
//   C  every request calls `pool.map` itself, from its connection task.
//
//   sake_architectures --arch A|B|C [--port N] [--workers N] [--per-core]
//
// With --port (0: any free port) it prints "listening on HOST:PORT" once ready, serves until SIGINT
// or SIGTERM, then drains and exits 0. Without --port it checks all three architectures
// (keep-alive, pipelining, 64 concurrent clients) and exits 0 if every answer is right.
// WEFT_IO_BACKEND=io_uring|epoll picks the backend.
//
// In the report, C lost 14.7x to B (544 vs 8,005 requests/s) because Sake's pool.map took a
// contended path per call. weft's map is an awaitable whose job lives in the caller's frame:
// one non-blocking channel send and one wait, so C should not pay that; B adds a channel hop
// and the coordinator. These are here to be measured side by side (weft-bench's sake suite),
// not to recommend B or C: A is the architecture to copy.

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <optional>
#include <ranges>
#include <string>
#include <string_view>
#include <utility>
#include <vector>
#include <weft/http.hpp>
#include <weft/weft.hpp>

namespace {

namespace http = weft::http;
using namespace std::string_view_literals;

enum class arch { a, b, c };

auto arch_name(arch a) -> const char* {
    switch (a) {
        case arch::a:
            return "A";
        case arch::b:
            return "B";
        case arch::c:
            return "C";
    }
    return "?";
}

/// What a pool worker computes: the reply body of one request.
struct work_item {
    bool echo = false;
    std::string body;
};

auto compute(work_item w) -> std::string {
    return w.echo ? std::move(w.body) : std::string("Hello, World!");
}

/// One request waiting in B's channel. Shared between the connection task and the coordinator:
/// a connection cancelled while its request is queued (drain timeout) leaves the job to the
/// coordinator, which completes it for no one.
struct pending {
    work_item in;
    std::string out;
    bool failed = false;
    weft::event done;
};

/// The routes, and the pool and coordinator behind them for B and C. Constructed on a runtime
/// worker (the pool spawns its tasks there); run() must be running (B) while requests are
/// served; close() after the server has drained.
class app {
public:
    app(arch a, std::size_t pool_size)
        : arch_(a), pool_(pool_size, [](work_item w) { return compute(std::move(w)); }) {}
    app(const app&) = delete;
    auto operator=(const app&) -> app& = delete;

    void add_routes(http::server& srv) {
        srv.route(http::method::get, "/", [this](http::request&) -> weft::task<http::response> {
            work_item w;  // named: g++ 12 may destroy a braced temporary in a co_await twice
            auto r = co_await reply(std::move(w));
            co_return r;
        });
        srv.route(http::method::post, "/echo",
                  [this](http::request& req) -> weft::task<http::response> {
                      auto body = (co_await req.body().read_all()).value();  // framing error: 4xx
                      work_item w;
                      w.echo = true;
                      w.body = std::move(body);
                      auto r = co_await reply(std::move(w));
                      co_return r;
                  });
    }

    /// B's coordinator: takes every request queued (up to 64 at a time) and hands them to the
    /// pool in one map_batch, so the pool works on them concurrently; then wakes each
    /// connection. (Sake's coordinator awaited one pool.map at a time, which serialises every
    /// request of the server behind one another.) Returns once the channel is closed and empty.
    auto run() -> weft::task<void> {
        if (arch_ != arch::b) {
            co_return;
        }
        std::vector<std::shared_ptr<pending>> batch;
        std::vector<work_item> items;
        for (;;) {
            batch.clear();
            auto n = co_await jobs_.recv_batch(batch, 64);
            if (!n) {
                break;  // closed and drained
            }
            items.clear();
            for (auto& p : batch) {
                items.push_back(std::move(p->in));
            }
            std::vector<std::string> outs;
            bool failed = false;
            try {
                auto moved = std::ranges::subrange(std::make_move_iterator(items.begin()),
                                                   std::make_move_iterator(items.end()));
                outs = co_await pool_.map_batch(moved);
            } catch (const std::system_error&) {
                failed = true;  // the pool is closing: the runtime is stopping
            }
            for (std::size_t i = 0; i < batch.size(); ++i) {
                if (failed) {
                    batch[i]->failed = true;
                } else {
                    batch[i]->out = std::move(outs[i]);
                }
                batch[i]->done.set();
            }
        }
    }

    /// Ends the coordinator and the pool (after the server has drained: no request left).
    auto close() -> weft::task<void> {
        jobs_.close();
        co_await pool_.close();
    }

private:
    auto reply(work_item w) -> weft::task<http::response> {
        switch (arch_) {
            case arch::a:
                co_return http::response::text(compute(std::move(w)));
            case arch::b: {
                auto p = std::make_shared<pending>();
                p->in = std::move(w);
                auto sent = co_await jobs_.send(p);
                if (!sent) {
                    co_return http::response{503};
                }
                auto woken = co_await p->done.wait();
                if (!woken || p->failed) {
                    co_return http::response{503};
                }
                co_return http::response::text(std::move(p->out));
            }
            case arch::c: {
                // map rethrows when the pool is closed or this task is cancelled while waiting
                // for intake space; the server answers a handler's exception with 500.
                auto out = co_await pool_.map(std::move(w));
                co_return http::response::text(std::move(out));
            }
        }
        co_return http::response{500};
    }

    arch arch_;
    weft::worker_pool<work_item, std::string> pool_;
    weft::channel<std::shared_ptr<pending>> jobs_{1024};
};

auto pool_size(unsigned workers) -> std::size_t {
    return workers != 0 ? workers : std::max<std::size_t>(1, weft::available_cpus());
}

auto serve_until_signal(arch a, unsigned port, unsigned workers) -> weft::task<int> {
    http::server srv{{.on_listening = [](const weft::socket_address& addr) {
        std::printf("listening on %s\n", addr.to_string().c_str());
        std::fflush(stdout);
    }}};
    app application{a, pool_size(workers)};
    application.add_routes(srv);
    const auto addr = weft::socket_address::parse("0.0.0.0", static_cast<std::uint16_t>(port));
    if (!addr) {
        std::fprintf(stderr, "sake_architectures: bad port %u\n", port);
        co_return 2;
    }
    int status = 0;
    co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
        s.spawn(application.run());
        s.spawn([&]() -> weft::task<void> {
            auto r = co_await srv.listen(*addr);
            if (!r) {
                std::fprintf(stderr, "sake_architectures: %s\n", r.error().message().c_str());
                status = 1;
                s.request_stop();
            }
        });
        auto sig = co_await weft::wait_for_signal({SIGINT, SIGTERM});
        if (sig) {
            co_await srv.shutdown();
        }
        co_await application.close();
    });
    co_return status;
}

// ---- self-check ----

constexpr arch all_archs[] = {arch::a, arch::b, arch::c};

auto check(bool ok, arch a, const char* what, std::atomic<int>& failures) -> void {
    if (!ok) {
        std::fprintf(stderr, "sake_architectures self-check (%s): %s failed\n", arch_name(a), what);
        ++failures;
    }
}

/// One client's share of the concurrent check: `n` requests on one keep-alive connection, each
/// echo body naming the client and the request, so a reply sent to the wrong connection shows.
auto client_run(weft::socket_address addr, int id, int n, std::atomic<int>& failures, arch a)
    -> weft::task<void> {
    auto c = co_await http::client::connect(addr);
    if (!c) {
        check(false, a, "connect", failures);
        co_return;
    }
    for (int i = 0; i < n; ++i) {
        const std::string body = "client " + std::to_string(id) + " request " + std::to_string(i);
        auto r = co_await c->request("POST", "/echo", body);
        if (!r || r->status != 200 || r->body != body) {
            check(false, a, "concurrent POST /echo", failures);
            co_return;
        }
    }
}

auto check_one(arch a, std::atomic<int>& failures) -> weft::task<void> {
    http::server srv;
    app application{a, 4};
    application.add_routes(srv);
    auto l = weft::tcp_listener::bind(weft::socket_address::parse("127.0.0.1", 0).value());
    if (!l) {
        std::fprintf(stderr, "sake_architectures: bind: %s\n", l.error().message().c_str());
        ++failures;
        co_return;
    }
    const auto addr = l->local_address().value();
    co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
        s.spawn(application.run());
        s.spawn(srv.serve(*l));
        auto c = (co_await http::client::connect(addr)).value();
        auto r = (co_await c.get("/")).value();
        check(r.status == 200 && r.body == "Hello, World!"sv, a, "GET /", failures);
        check(r.header("Content-Type") == "text/plain; charset=utf-8"sv, a, "Content-Type",
              failures);
        r = (co_await c.request("POST", "/echo", "ping")).value();
        check(r.status == 200 && r.body == "ping"sv, a, "POST /echo", failures);
        (co_await c.send_raw("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                             "3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n"
                             "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nxy"))
            .value();
        r = (co_await c.read_response()).value();
        check(r.body == "abc"sv, a, "pipelined chunked POST /echo", failures);
        r = (co_await c.read_response()).value();
        check(r.body == "Hello, World!"sv, a, "pipelined GET /", failures);
        r = (co_await c.read_response()).value();
        check(r.body == "xy"sv, a, "pipelined POST /echo", failures);
        r = (co_await c.get("/missing")).value();
        check(r.status == 404, a, "404", failures);

        constexpr int clients = 64;
        constexpr int per_client = 20;
        co_await weft::with_scope([&](weft::scope& inner) -> weft::task<void> {
            for (int i = 0; i < clients; ++i) {
                inner.spawn(client_run(addr, i, per_client, failures, a));
            }
            co_return;
        });
        const auto served = srv.stats().requests;
        check(served == 6U + clients * per_client, a, "request count", failures);
        co_await srv.shutdown();
        co_await application.close();
    });
}

auto self_check() -> weft::task<int> {
    std::atomic<int> failures = 0;  // the concurrent clients may run on several workers
    for (arch a : all_archs) {
        const int before = failures;
        co_await check_one(a, failures);
        std::printf("sake_architectures %s (%s): self-check %s\n", arch_name(a),
                    std::string(weft::to_string(weft::current_io_backend())).c_str(),
                    failures == before ? "passed" : "FAILED");
    }
    co_return failures == 0 ? 0 : 1;
}

}  // namespace

auto main(int argc, char** argv) -> int {
    std::optional<arch> selected;
    std::optional<unsigned> port;  // --port 0: a free port, printed once listening
    unsigned workers = 0;
    bool per_core = false;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--arch" && i + 1 < argc) {
            const std::string_view v = argv[++i];
            if (v == "A" || v == "a") {
                selected = arch::a;
            } else if (v == "B" || v == "b") {
                selected = arch::b;
            } else if (v == "C" || v == "c") {
                selected = arch::c;
            } else {
                std::fprintf(stderr, "sake_architectures: --arch takes A, B or C\n");
                return 2;
            }
        } else if (a == "--port" && i + 1 < argc) {
            port = static_cast<unsigned>(std::strtoul(argv[++i], nullptr, 10));
            if (*port > 65535) {
                std::fprintf(stderr, "bad port %s\n", argv[i]);
                return 2;
            }
        } else if (a == "--workers" && i + 1 < argc) {
            workers = static_cast<unsigned>(std::strtoul(argv[++i], nullptr, 10));
        } else if (a == "--per-core") {
            per_core = true;
        } else {
            std::fprintf(stderr,
                         "usage: sake_architectures --arch A|B|C [--port N] [--workers N] "
                         "[--per-core]\n");
            return 2;
        }
    }
    if (port && !selected) {
        std::fprintf(stderr, "sake_architectures: --port needs --arch A|B|C\n");
        return 2;
    }
    weft::runtime rt{{.workers = workers, .stealing = !per_core}};
    return !port ? rt.block_on(self_check())
                 : rt.block_on(serve_until_signal(*selected, *port, workers));
}
