// server_options::metrics and metrics_handler over real sockets: what each request adds to the
// registry, and the scrape's format by its Accept field.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

#include "test_util.hpp"
#include "weft/core/scope.hpp"
#include "weft/http.hpp"
#include "weft/io/tcp_listener.hpp"
#include "weft/metrics/registry.hpp"
#include "weft/sched/runtime.hpp"

namespace weft::http::test {
namespace {

auto value_of(const std::vector<metrics::family_snapshot>& fs,
              std::string_view name,
              const std::vector<std::string>& labels) -> double {
    for (const auto& f : fs) {
        if (f.name != name) {
            continue;
        }
        for (const auto& s : f.series) {
            if (s.label_values == labels) {
                return f.type == metrics::metric_type::histogram
                           ? static_cast<double>(s.buckets.back())
                           : s.value;
            }
        }
    }
    return -1;
}

TEST(server_metrics, requests_by_route_method_and_status_class) {
    metrics::registry reg;
    runtime rt{{.workers = 2}};
    client_response scrape;
    client_response scrape_text;
    std::vector<metrics::family_snapshot> live;
    rt.block_on([&]() -> task<void> {
        server srv{{.linger_timeout = std::chrono::milliseconds{20}, .metrics = reg}};
        srv.route(method::get, "/items/{id}", [](request& req) -> task<response> {
            if (req.param("id") == "missing") {
                co_return response::text("no such item", 404);
            }
            co_return response::text("item");
        });
        srv.route(method::post, "/fail", [](request&) -> task<response> {
            throw std::runtime_error("handler failed on purpose");
            co_return response::text("unreachable");
        });
        srv.route(method::get, "/metrics", metrics_handler(reg));
        auto l = tcp_listener::bind(socket_address::parse("127.0.0.1", 0).value()).value();
        const auto addr = l.local_address().value();
        co_await with_scope([&](scope& s) -> task<void> {
            s.spawn(srv.serve(l));
            auto c = (co_await client::connect(addr)).value();
            for (int i = 1; i <= 3; ++i) {
                const std::string path = "/items/" + std::to_string(i);
                EXPECT_EQ((co_await c.get(path)).value().status, 200);
            }
            EXPECT_EQ((co_await c.get("/items/missing")).value().status, 404);
            EXPECT_EQ((co_await c.get("/nowhere")).value().status, 404);
            EXPECT_EQ((co_await c.request("POST", "/items/1")).value().status, 405);
            auto f = (co_await client::connect(addr)).value();  // a 500 closes its connection
            EXPECT_EQ((co_await f.request("POST", "/fail")).value().status, 500);
            auto bad = (co_await client::connect(addr)).value();  // refused by the parser
            (void)co_await bad.send_raw(
                "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n");
            EXPECT_EQ((co_await bad.read_response()).value().status, 400);
            std::vector<std::string> accept;
            accept.emplace_back("Accept: application/openmetrics-text; version=1.0.0");
            scrape = (co_await c.request("GET", "/metrics", {}, std::move(accept))).value();
            scrape_text = (co_await c.get("/metrics")).value();
            live = reg.collect();  // the server's collector goes with the server
            co_await srv.shutdown();
        });
    }());

    const auto fs = reg.collect();
    const std::string requests = "weft_http_requests";
    EXPECT_EQ(value_of(fs, requests, {"/items/{id}", "GET", "2xx"}), 3);
    EXPECT_EQ(value_of(fs, requests, {"/items/{id}", "GET", "4xx"}), 1);
    EXPECT_EQ(value_of(fs, requests, {"/items/{id}", "GET", "5xx"}), 0);
    EXPECT_EQ(value_of(fs, requests, {"/fail", "POST", "5xx"}), 1);
    EXPECT_EQ(value_of(fs, requests, {"", "GET", "4xx"}), 1);   // 404: no route
    EXPECT_EQ(value_of(fs, requests, {"", "POST", "4xx"}), 1);  // 405: not this method
    EXPECT_EQ(value_of(fs, requests, {"/metrics", "GET", "2xx"}), 2);
    EXPECT_EQ(value_of(fs, "weft_http_request_duration_seconds", {"/items/{id}", "GET"}), 4);
    EXPECT_EQ(value_of(fs, "weft_http_request_duration_seconds", {"/fail", "POST"}), 1);
    EXPECT_EQ(value_of(live, "weft_http_requests_rejected", {}), 1);
    EXPECT_EQ(value_of(live, "weft_http_connections_accepted", {}), 3);
    EXPECT_GE(value_of(live, "weft_http_connections_open", {}), 1);  // the scraping one
    EXPECT_EQ(value_of(fs, "weft_http_connections_accepted", {}), -1);

    EXPECT_EQ(scrape.status, 200);
    EXPECT_EQ(scrape.header("Content-Type").value_or(""),
              "application/openmetrics-text; version=1.0.0; charset=utf-8");
    EXPECT_NE(scrape.body.find("weft_http_requests_total{route=\"/items/{id}\",method=\"GET\","
                               "status=\"2xx\"} 3\n"),
              std::string::npos)
        << scrape.body;
    EXPECT_TRUE(scrape.body.ends_with("# EOF\n"));
    EXPECT_EQ(scrape_text.header("Content-Type").value_or(""),
              "text/plain; version=0.0.4; charset=utf-8");
    EXPECT_NE(scrape_text.body.find("# TYPE weft_http_requests_total counter\n"),
              std::string::npos);
}

// Two servers on one registry share its families: their series add up, and neither makes the
// other's registration fail.
TEST(server_metrics, two_servers_share_one_registry) {
    metrics::registry reg;
    {
        server a{{.metrics = reg}};
        server b{{.metrics = reg}};
        a.route(method::get, "/", [](request&) -> task<response> { co_return response::text(""); });
        b.route(method::get, "/", [](request&) -> task<response> { co_return response::text(""); });
        const auto fs = reg.collect();
        EXPECT_EQ(value_of(fs, "weft_http_connections_open", {}), 0);
        EXPECT_EQ(value_of(fs, "weft_http_requests", {"/", "GET", "2xx"}), 0);
    }
    // The servers' collectors went with them.
    const auto fs = reg.collect();
    EXPECT_EQ(value_of(fs, "weft_http_connections_open", {}), -1);
}

// server_options::access_log: one record per answered request with its path, route template and
// status; none for the requests of a server without one.
TEST(access_log, one_record_per_request) {
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    {
        log::logger lg{{.format = log::log_format::logfmt, .fd = p[1]}};
        runtime rt{{.workers = 2}};
        rt.block_on([&]() -> task<void> {
            server srv{{.access_log = &lg}};
            srv.route(method::get, "/items/{id}",
                      [](request&) -> task<response> { co_return response::text("item"); });
            auto l = tcp_listener::bind(socket_address::parse("127.0.0.1", 0).value()).value();
            const auto addr = l.local_address().value();
            co_await with_scope([&](scope& s) -> task<void> {
                s.spawn(srv.serve(l));
                auto c = (co_await client::connect(addr)).value();
                EXPECT_EQ((co_await c.get("/items/7")).value().status, 200);
                EXPECT_EQ((co_await c.get("/nowhere")).value().status, 404);
                co_await srv.shutdown();
            });
        }());
        lg.flush();
        EXPECT_EQ(lg.written(), 2U);
    }
    ::close(p[1]);
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(p[0], buf, sizeof(buf))) > 0;) {
        out.append(buf, static_cast<std::size_t>(n));
    }
    ::close(p[0]);
    EXPECT_NE(out.find("msg=request method=GET path=/items/7 route=/items/{id} status=200 "),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("path=/nowhere route=\"\" status=404 "), std::string::npos) << out;
}

}  // namespace
}  // namespace weft::http::test
