// Traces over real sockets: the server's span per request, the context a handler reads, the
// pooled client's span and traceparent, and the OTLP/HTTP exporter posting to a weft server.

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "weft/core/scope.hpp"
#include "weft/http.hpp"
#include "weft/io/tcp_listener.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/trace/otlp_exporter.hpp"
#include "weft/trace/tracer.hpp"

namespace {

using namespace weft;
using trace::span_kind;

constexpr const char* caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

auto listen_any() -> tcp_listener {
    return tcp_listener::bind(socket_address::parse("127.0.0.1", 0).value()).value();
}

auto base_of(tcp_listener& l) -> std::string {
    return "http://127.0.0.1:" + std::to_string(l.local_address().value().port());
}

auto attribute_of(const trace::span_data& d, std::string_view key) -> const trace::attribute* {
    for (const auto& a : d.attributes) {
        if (a.key == key) {
            return &a;
        }
    }
    return nullptr;
}

auto count(std::string_view hay, std::string_view needle) -> int {
    int n = 0;
    for (auto p = hay.find(needle); p != std::string_view::npos; p = hay.find(needle, p + 1)) {
        ++n;
    }
    return n;
}

TEST(trace_http, a_server_span_per_request_continues_the_callers_trace) {
    trace::tracer tr;
    runtime rt{{.workers = 2}};
    trace::context seen;
    rt.block_on([&]() -> task<void> {
        http::server srv{{.linger_timeout = std::chrono::milliseconds{20}, .tracer = &tr}};
        srv.route(http::method::get, "/items/{id}",
                  [&](http::request& req) -> task<http::response> {
                      seen = req.trace_context();
                      co_return http::response::text("item");
                  });
        auto l = listen_any();
        const auto addr = l.local_address().value();
        co_await with_scope([&](scope& s) -> task<void> {
            s.spawn(srv.serve(l));
            auto c = (co_await http::client::connect(addr)).value();
            std::vector<std::string> h;
            h.emplace_back(std::string("traceparent: ") + caller);
            h.emplace_back("tracestate: rojo=1");
            EXPECT_EQ((co_await c.request("GET", "/items/7", {}, std::move(h))).value().status,
                      200);
            EXPECT_EQ((co_await c.get("/nowhere")).value().status, 404);  // a root span
            co_await srv.shutdown();
        });
    }());
    std::vector<trace::span_data> spans;
    ASSERT_EQ(tr.take(spans, 10), 2U);
    const auto in = *trace::parse_traceparent(caller);
    const auto& s = spans[0];
    EXPECT_EQ(s.name, "GET /items/{id}");
    EXPECT_EQ(s.kind, span_kind::server);
    EXPECT_EQ(s.trace, in.trace);
    EXPECT_EQ(s.parent, in.span);
    EXPECT_EQ(s.state, "rojo=1");
    // The handler's context is the server span's: what it passes on is a child of that span.
    EXPECT_EQ(seen.trace, in.trace);
    EXPECT_EQ(seen.span, s.id);
    EXPECT_EQ(seen.state, "rojo=1");
    ASSERT_NE(attribute_of(s, "http.route"), nullptr);
    EXPECT_EQ(std::get<std::string>(attribute_of(s, "http.route")->value), "/items/{id}");
    EXPECT_EQ(std::get<std::string>(attribute_of(s, "http.request.method")->value), "GET");
    EXPECT_EQ(std::get<std::int64_t>(attribute_of(s, "http.response.status_code")->value), 200);
    EXPECT_EQ(spans[1].name, "GET");
    EXPECT_FALSE(spans[1].parent.valid());
    EXPECT_NE(spans[1].trace, in.trace);
}

TEST(trace_http, without_a_tracer_the_handler_sees_the_callers_context) {
    runtime rt{{.workers = 1}};
    trace::context seen;
    trace::context bad;
    rt.block_on([&]() -> task<void> {
        http::server srv{{.linger_timeout = std::chrono::milliseconds{20}}};
        srv.route(http::method::get, "/", [&](http::request& req) -> task<http::response> {
            (req.header("x-bad") ? bad : seen) = req.trace_context();
            co_return http::response::text("ok");
        });
        auto l = listen_any();
        const auto addr = l.local_address().value();
        co_await with_scope([&](scope& s) -> task<void> {
            s.spawn(srv.serve(l));
            auto c = (co_await http::client::connect(addr)).value();
            std::vector<std::string> h;
            h.emplace_back(std::string("traceparent: ") + caller);
            (void)co_await c.request("GET", "/", {}, std::move(h));
            std::vector<std::string> upper;
            upper.emplace_back(
                "traceparent: 00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01");
            upper.emplace_back("x-bad: 1");
            (void)co_await c.request("GET", "/", {}, std::move(upper));
            co_await srv.shutdown();
        });
    }());
    EXPECT_EQ(seen, *trace::parse_traceparent(caller));
    EXPECT_FALSE(bad.valid());
}

TEST(trace_http, the_client_sends_its_client_spans_traceparent) {
    trace::tracer tr;
    runtime rt{{.workers = 2}};
    std::vector<std::string> received;
    rt.block_on([&]() -> task<void> {
        http::server srv{{.linger_timeout = std::chrono::milliseconds{20}}};
        srv.route(http::method::get, "/", [&](http::request& req) -> task<http::response> {
            received.emplace_back(req.header("traceparent").value_or(""));
            co_return http::response::text("ok");
        });
        auto l = listen_any();
        const std::string base = base_of(l);
        http::client_pool pool{{.tracer = &tr}};
        co_await with_scope([&](scope& s) -> task<void> {
            s.spawn(srv.serve(l));
            http::client_request req{.url = base + "/", .trace = *trace::parse_traceparent(caller)};
            // A traceparent of the caller's own is replaced by the context's.
            req.headers.emplace_back("Traceparent",
                                     "00-11111111111111111111111111111111-1111111111111111-01");
            auto r = co_await pool.request(std::move(req));
            EXPECT_TRUE(r && r->status == 200);
            auto plain = co_await pool.get(base + "/");  // no context: no span, no header
            EXPECT_TRUE(plain && plain->status == 200);
            co_await srv.shutdown();
        });
    }());
    std::vector<trace::span_data> spans;
    ASSERT_EQ(tr.take(spans, 10), 1U);
    ASSERT_EQ(received.size(), 2U);
    EXPECT_EQ(received[0], trace::traceparent(*trace::parse_traceparent(caller)).substr(0, 36) +
                               spans[0].id.hex() + "-01");  // the client span is the parent
    EXPECT_TRUE(received[1].empty());
    const auto in = *trace::parse_traceparent(caller);
    EXPECT_EQ(spans[0].kind, span_kind::client);
    EXPECT_EQ(spans[0].parent, in.span);
    EXPECT_EQ(spans[0].trace, in.trace);
    EXPECT_EQ(std::get<std::int64_t>(attribute_of(spans[0], "http.response.status_code")->value),
              200);
}

TEST(trace_http, the_client_sends_the_given_context_without_a_tracer) {
    runtime rt{{.workers = 1}};
    std::string received;
    rt.block_on([&]() -> task<void> {
        http::server srv{{.linger_timeout = std::chrono::milliseconds{20}}};
        srv.route(http::method::get, "/", [&](http::request& req) -> task<http::response> {
            received = std::string(req.header("traceparent").value_or("")) + "|" +
                       std::string(req.header("tracestate").value_or(""));
            co_return http::response::text("ok");
        });
        auto l = listen_any();
        const std::string base = base_of(l);
        http::client_pool pool;
        co_await with_scope([&](scope& s) -> task<void> {
            s.spawn(srv.serve(l));
            auto ctx = *trace::parse_traceparent(caller);
            ctx.state = "rojo=1";
            http::client_request req{.url = base + "/", .trace = ctx};
            auto r = co_await pool.request(std::move(req));
            EXPECT_TRUE(r);
            co_await srv.shutdown();
        });
    }());
    EXPECT_EQ(received, std::string(caller) + "|rojo=1");
}

TEST(trace_http, the_exporter_posts_otlp_json_and_counts_what_fails) {
    trace::tracer tr;
    runtime rt{{.workers = 2}};
    std::atomic<int> spans_received{0};
    std::atomic<int> posts{0};
    std::string content_type;
    std::uint64_t exported = 0;
    std::uint64_t failed = 0;
    rt.block_on([&]() -> task<void> {
        http::server srv{{.linger_timeout = std::chrono::milliseconds{20}}};
        srv.route(http::method::post, "/v1/traces",
                  [&](http::request& req) -> task<http::response> {
                      content_type = std::string(req.header("content-type").value_or(""));
                      const std::string body = (co_await req.body().read_all()).value();
                      spans_received += count(body, R"("spanId":)");
                      ++posts;
                      co_return http::response::text("{}");
                  });
        srv.route(http::method::post, "/refuse", [&](http::request&) -> task<http::response> {
            co_return http::response::text("no", 503);
        });
        auto l = listen_any();
        const std::string base = base_of(l);
        co_await with_scope([&](scope& s) -> task<void> {
            s.spawn(srv.serve(l));
            trace::otlp_exporter ex{tr,
                                    {.url = base + "/v1/traces",
                                     .interval = std::chrono::milliseconds{10},
                                     .batch_spans = 2}};
            for (int i = 0; i < 5; ++i) {
                tr.start("s", span_kind::internal).end();
            }
            ex.stop();  // run() sends what is queued, then returns
            co_await ex.run();
            exported = ex.exported_spans();
            trace::otlp_exporter refused{tr, {.url = base + "/refuse"}};
            tr.start("lost", span_kind::internal).end();
            co_await refused.flush();
            failed = refused.failed_spans();
            co_await srv.shutdown();
        });
    }());
    EXPECT_EQ(exported, 5U);
    EXPECT_EQ(spans_received.load(), 5);
    EXPECT_EQ(posts.load(), 3);  // batches of 2, 2, 1
    EXPECT_EQ(content_type, "application/json");
    EXPECT_EQ(failed, 1U);
    EXPECT_EQ(tr.queued(), 0U);
}

}  // namespace
