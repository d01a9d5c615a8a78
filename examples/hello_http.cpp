// hello_http: an HTTP/1.1 server with two routes, the shape every HTTP peer of weft-bench
// serves: GET / -> 200 "Hello, World!" (text/plain), POST /echo -> the request body back (read
// whole, so a body framing error surfaces as a 4xx), GET /metrics -> the server's and the
// runtime's metrics (Prometheus text, or OpenMetrics when the Accept field asks for it).
// Traces: with OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (or OTEL_EXPORTER_OTLP_ENDPOINT) set, a server
// span per request, named by its route ("GET /", "POST /echo"), continuing the caller's
// traceparent, is sent to that OpenTelemetry collector over OTLP/HTTP; unset, traces are off.
//
//   hello_http [--port N] [--workers N] [--per-core] [--max-connections N] [--no-metrics]
//
// With --port (0: any free port) it prints "listening on HOST:PORT" once ready, serves until SIGINT
// or SIGTERM, then drains (requests in flight finish) and exits 0. --per-core runs thread-per-core:
// no work stealing, one SO_REUSEPORT listener per worker. --max-connections caps the open
// connections (default: 90% of RLIMIT_NOFILE). --no-metrics records nothing and has no
// /metrics route (the cost of metrics is hello_http against hello_http --no-metrics).
// Without --port it checks itself: it
// serves on a free port, sends requests with weft's client (keep-alive, pipelined, chunked,
// 404/405, a malformed request) and exits 0 if every answer is right, /metrics parses as
// Prometheus text and each request made its span (kept in memory: no collector needed).
// WEFT_IO_BACKEND=io_uring|epoll picks the backend.

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include <weft/http.hpp>
#include <weft/weft.hpp>

#include "observability.hpp"

namespace {

namespace http = weft::http;

/// The server's options: metrics recorded into `reg` unless it is empty; a span per request
/// in `tr` unless it is null.
auto options_for(const std::optional<weft::metrics::registry>& reg, weft::trace::tracer* tr)
    -> http::server_options {
    return {.metrics = reg, .tracer = tr};
}

void add_routes(http::server& srv, const std::optional<weft::metrics::registry>& reg) {
    if (reg) {
        srv.route(http::method::get, "/metrics", http::metrics_handler(*reg));
    }
    srv.route(http::method::get, "/", [](http::request&) -> weft::task<http::response> {
        co_return http::response::text("Hello, World!");
    });
    srv.route(http::method::post, "/echo", [](http::request& req) -> weft::task<http::response> {
        auto body = (co_await req.body().read_all()).value();  // a framing error: 4xx
        co_return http::response::text(std::move(body));
    });
}

auto serve_until_signal(unsigned port,
                        std::size_t max_connections,
                        std::optional<weft::metrics::registry> reg) -> weft::task<int> {
    const auto traces = example::traces::from_environment("hello_http");
    http::server_options o = options_for(reg, traces ? &traces->tracer : nullptr);
    o.max_connections = max_connections;
    o.on_listening = [](const weft::socket_address& a) {
        std::printf("listening on %s\n", a.to_string().c_str());
        std::fflush(stdout);
    };
    http::server srv{std::move(o)};
    add_routes(srv, reg);
    const auto addr = weft::socket_address::parse("0.0.0.0", static_cast<std::uint16_t>(port));
    if (!addr) {
        std::fprintf(stderr, "hello_http: bad port %u\n", port);
        co_return 2;
    }
    int status = 0;
    co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
        if (traces) {
            s.spawn(traces->exporter.run());
        }
        s.spawn([&]() -> weft::task<void> {
            auto r = co_await srv.listen(*addr);
            if (!r) {
                std::fprintf(stderr, "hello_http: %s\n", r.error().message().c_str());
                status = 1;
                s.request_stop();
            }
        });
        auto sig = co_await weft::wait_for_signal({SIGINT, SIGTERM});
        if (sig) {
            co_await srv.shutdown();  // stops accepting; listen() returns once drained
        }
        if (traces) {
            traces->exporter.stop();  // sends the spans left, then run() returns
        }
    });
    co_return status;
}

auto check(bool ok, const char* what, int& failures) -> void {
    if (!ok) {
        std::fprintf(stderr, "hello_http self-check: %s failed\n", what);
        ++failures;
    }
}

auto self_check(weft::metrics::registry reg) -> weft::task<int> {
    weft::trace::tracer tr{{.service_name = "hello_http"}};
    http::server srv{options_for(reg, &tr)};
    add_routes(srv, reg);
    auto l = weft::tcp_listener::bind(weft::socket_address::parse("127.0.0.1", 0).value());
    if (!l) {
        std::fprintf(stderr, "hello_http: bind: %s\n", l.error().message().c_str());
        co_return 1;
    }
    const auto addr = l->local_address().value();
    int failures = 0;
    co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
        s.spawn(srv.serve(*l));
        auto c = (co_await http::client::connect(addr)).value();
        auto r = (co_await c.get("/")).value();
        check(r.status == 200 && r.body == "Hello, World!", "GET /", failures);
        r = (co_await c.request("POST", "/echo", "ping")).value();
        check(r.status == 200 && r.body == "ping", "POST /echo", failures);
        (co_await c.send_raw("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                             "3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n"))
            .value();
        r = (co_await c.read_response()).value();
        check(r.body == "abc", "chunked POST /echo", failures);
        r = (co_await c.read_response()).value();
        check(r.body == "Hello, World!", "pipelined GET /", failures);
        r = (co_await c.get("/missing")).value();
        check(r.status == 404, "404", failures);
        r = (co_await c.request("PUT", "/")).value();
        check(r.status == 405, "405", failures);
        auto bad = (co_await http::client::connect(addr)).value();
        (co_await bad.send_raw("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n"
                               "Content-Length: 2\r\n\r\nab"))
            .value();
        r = (co_await bad.read_response()).value();
        check(r.status == 400 && !r.keep_alive, "conflicting Content-Length -> 400", failures);
        r = (co_await c.get("/metrics")).value();
        check(r.status == 200 &&
                  r.body.find("weft_http_requests_total{route=\"/\",method=\"GET\","
                              "status=\"2xx\"} 2\n") != std::string::npos &&
                  r.body.find("weft_runtime_workers ") != std::string::npos,
              "GET /metrics", failures);
        check(example::is_prometheus_text(r.body), "GET /metrics parses", failures);
        co_await srv.shutdown();
    });
    // A server span per request, named by its route: GET / (twice), POST /echo (twice),
    // GET /metrics; the 404 and 405 by their method alone.
    std::vector<weft::trace::span_data> spans;
    (void)tr.take(spans, 100);
    auto named = [&](std::string_view name) {
        std::size_t n = 0;
        for (const auto& sp : spans) {
            n += sp.name == name && sp.kind == weft::trace::span_kind::server ? 1 : 0;
        }
        return n;
    };
    check(named("GET /") == 2 && named("POST /echo") == 2 && named("GET /metrics") == 1,
          "a span per request", failures);
    std::printf("hello_http (%s): self-check %s\n",
                std::string(weft::to_string(weft::current_io_backend())).c_str(),
                failures == 0 ? "passed" : "FAILED");
    co_return failures == 0 ? 0 : 1;
}

}  // namespace

auto main(int argc, char** argv) -> int {
    std::optional<unsigned> port;  // --port 0: a free port, printed once listening
    unsigned workers = 0;
    bool per_core = false;
    std::size_t max_connections = 0;  // 0: the server's default, 90% of RLIMIT_NOFILE
    bool metrics = true;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--port" && i + 1 < argc) {
            port = static_cast<unsigned>(std::strtoul(argv[++i], nullptr, 10));
            if (*port > 65535) {
                std::fprintf(stderr, "bad port %s\n", argv[i]);
                return 2;
            }
        } else if (a == "--workers" && i + 1 < argc) {
            workers = static_cast<unsigned>(std::strtoul(argv[++i], nullptr, 10));
        } else if (a == "--per-core") {
            per_core = true;
        } else if (a == "--max-connections" && i + 1 < argc) {
            max_connections = std::strtoull(argv[++i], nullptr, 10);
        } else if (a == "--no-metrics") {
            metrics = false;
        } else {
            std::fprintf(stderr,
                         "usage: hello_http [--port N] [--workers N] [--per-core] "
                         "[--max-connections N] [--no-metrics]\n");
            return 2;
        }
    }
    weft::runtime rt{{.workers = workers, .stealing = !per_core}};
    weft::metrics::registry reg;
    const auto keep = weft::metrics::collect_runtime(reg, rt);  // dropped before rt
    if (!port) {
        return rt.block_on(self_check(reg));
    }
    return rt.block_on(
        serve_until_signal(*port, max_connections, metrics ? std::optional{reg} : std::nullopt));
}
