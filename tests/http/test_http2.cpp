// HTTP/2 on http::server, on both backends: h2c with prior knowledge and h2 by ALPN over TLS,
// served by the same routes as HTTP/1.1 on the same port; request bodies larger than the
// window (the server opens it as the handler reads), streamed responses under the client's
// window, a handler's exception answered 500 on its stream alone, GOAWAY in the drain.

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <string>

#include "backend_test.hpp"
#include "h2_peer.hpp"
#include "tls/cert_factory.hpp"
#include "weft/core/scope.hpp"
#include "weft/http/client.hpp"
#include "weft/http/server.hpp"
#include "weft/io/tcp_listener.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"
#include "weft/sync/event.hpp"
#include "weft/testing/sim_network.hpp"
#include "weft/testing/test_clock.hpp"
#include "weft/tls/tls_stream.hpp"
#include "weft/trace/tracer.hpp"

namespace weft::http::test {
namespace {

using namespace std::chrono_literals;
namespace wt = weft::test;

constexpr std::size_t upload_size = 300 * 1024;  // several initial windows (64 KiB)
constexpr std::size_t streamed_size = 256 * 1024;

auto field(const header_list& h, std::string_view name) -> std::string {
    for (const auto& [n, v] : h) {
        if (n == name) {
            return v;
        }
    }
    return {};
}

class http2 : public wt::backend_test {
protected:
    std::atomic<int> handled_{0};
    event release_;  // what /wait handlers wait for
    server_stats stats_;
    trace::context seen_;  // what /items/{id} saw

    void routes(server& srv) {
        srv.route(method::get, "/", [this](request& req) -> task<response> {
            handled_.fetch_add(1);
            co_return response::text("Hello, World! " + std::to_string(req.version_minor()));
        });
        srv.route(method::post, "/upload", [this](request& req) -> task<response> {
            handled_.fetch_add(1);
            std::size_t n = 0;
            for (;;) {
                auto piece = co_await req.body().read();
                if (!piece) {
                    co_return response::text("read failed", 500);
                }
                if (piece->empty()) {
                    break;
                }
                n += piece->size();
            }
            co_return response::text(std::to_string(n));
        });
        srv.route(method::get, "/stream", [this](request&) -> task<response> {
            handled_.fetch_add(1);
            co_return response::stream([](body_writer& w) -> task<result<void>> {
                const std::string piece(16 * 1024, 's');
                for (std::size_t sent = 0; sent < streamed_size; sent += piece.size()) {
                    auto r = co_await w.write(piece);
                    if (!r) {
                        co_return r;
                    }
                }
                co_return result<void>{};
            });
        });
        srv.route(method::get, "/throw", [this](request&) -> task<response> {
            handled_.fetch_add(1);
            throw std::runtime_error("a handler's failure, on purpose");
            co_return response{200};
        });
        srv.route(method::get, "/wait", [this](request&) -> task<response> {
            handled_.fetch_add(1);
            (void)co_await release_.wait();
            co_return response::text("released");
        });
        srv.route(method::get, "/items/{id}", [this](request& req) -> task<response> {
            seen_ = req.trace_context();
            co_return response::text("item");
        });
        srv.route(method::get, "/big", [](request&) -> task<response> {
            co_return response::text(std::string(1024 * 1024, 'z'));
        });
    }

    template <typename Body>
    void run(server_options o, Body body) {
        runtime rt{options()};
        rt.block_on([&]() -> task<void> {
            server srv{std::move(o)};
            routes(srv);
            auto l = tcp_listener::bind(socket_address::parse("127.0.0.1", 0).value()).value();
            const auto addr = l.local_address().value();
            co_await with_scope([&](scope& s) -> task<void> {
                s.spawn(srv.serve(l));
                co_await body(addr, srv);
                release_.set();
                co_await srv.shutdown();
            });
            stats_ = srv.stats();
        }());
    }
};

TEST_P(http2, h2c_and_http11_share_routes_and_port) {
    std::string h1;
    h2_peer<tcp_stream>::response got;
    run({}, [&](socket_address addr, server&) -> task<void> {
        auto c = (co_await client::connect(addr)).value();
        h1 = (co_await c.get("/")).value().body;
        auto s = (co_await tcp_stream::connect(addr)).value();
        h2_peer p{s};
        (co_await p.start()).value();
        (co_await p.send_request(1, "GET", "/")).value();
        got = (co_await p.read_response(1)).value();
    });
    EXPECT_EQ(h1, "Hello, World! 1");
    EXPECT_EQ(got.status, 200);
    EXPECT_EQ(got.body, "Hello, World! 1");
    EXPECT_EQ(field(got.fields, "content-type"), "text/plain; charset=utf-8");
    EXPECT_EQ(field(got.fields, "content-length"), "15");
    EXPECT_EQ(stats_.requests, 2U);
}

// Sends `bytes` a byte at a time, a moment apart: the server receives them in pieces shorter
// than anything it could tell the protocol by.
template <typename Send>
auto byte_by_byte(std::string_view bytes, Send send) -> task<result<void>> {
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        auto r = co_await send(bytes.substr(i, 1));
        if (!r) {
            co_return r;
        }
        (void)co_await sleep_for(1ms);
    }
    co_return result<void>{};
}

// The h2c preface split anywhere (here: every byte apart) is still HTTP/2; an HTTP/1.1 request
// split the same way is still HTTP/1.1, its method starting with P like the preface ("POST").
TEST_P(http2, h2c_preface_and_http11_request_sent_a_byte_at_a_time) {
    h2_peer<tcp_stream>::response got;
    std::string h1;
    run({}, [&](socket_address addr, server&) -> task<void> {
        auto s = (co_await tcp_stream::connect(addr)).value();
        h2_peer p{s};
        (co_await byte_by_byte(std::string{client_preface} + settings(), [&](std::string_view b) {
            return p.send(b);
        })).value();
        (co_await p.send_request(1, "GET", "/")).value();
        got = (co_await p.read_response(1)).value();

        auto c = (co_await client::connect(addr)).value();
        (co_await byte_by_byte("POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
                               [&](std::string_view b) { return c.send_raw(b); }))
            .value();
        h1 = (co_await c.read_response()).value().body;
    });
    EXPECT_EQ(got.status, 200);
    EXPECT_EQ(got.body, "Hello, World! 1");
    EXPECT_EQ(h1, "3");
    EXPECT_EQ(stats_.requests, 2U);
}

TEST_P(http2, request_body_beyond_the_window_is_read_as_the_handler_consumes) {
    h2_peer<tcp_stream>::response got;
    run({}, [&](socket_address addr, server&) -> task<void> {
        auto s = (co_await tcp_stream::connect(addr)).value();
        h2_peer p{s};
        (co_await p.start()).value();
        const std::string body(upload_size, 'u');
        (co_await p.send(frame(f_headers, end_headers, 1, p.request_block("POST", "/upload"))))
            .value();
        // Sends as the server's windows allow: DATA up to the window, then waits for updates.
        std::int64_t conn_window = 65535;  // the connection's, until the server's SETTINGS
        std::int64_t stream_window = 65535;
        std::size_t sent = 0;
        while (sent < body.size()) {
            const auto room = static_cast<std::size_t>(std::min(conn_window, stream_window));
            if (room > 0) {
                const std::size_t n = std::min<std::size_t>({room, 16384, body.size() - sent});
                const bool last = sent + n == body.size();
                (co_await p.send(frame(f_data, last ? end_stream : 0, 1, body.substr(sent, n))))
                    .value();
                sent += n;
                conn_window -= static_cast<std::int64_t>(n);
                stream_window -= static_cast<std::int64_t>(n);
                continue;
            }
            auto f = (co_await p.read_frame()).value();
            if (f.type == f_window_update) {
                (f.stream == 0 ? conn_window : stream_window) += get_u32(f.payload) & 0x7fffffff;
            } else if (f.type == f_settings && (f.flags & ack) == 0) {
                for (std::size_t i = 0; i + 6 <= f.payload.size(); i += 6) {
                    if (f.payload[i + 1] == 0x4) {  // INITIAL_WINDOW_SIZE
                        stream_window += std::int64_t{get_u32(f.payload, i + 2)} - 65535;
                    }
                }
                (co_await p.on_frame(f)).value();
            } else {
                (co_await p.on_frame(f)).value();
            }
        }
        got = (co_await p.read_response(1)).value();
    });
    EXPECT_EQ(got.status, 200);
    EXPECT_EQ(got.body, std::to_string(upload_size));
}

TEST_P(http2, streamed_response_follows_the_client_window) {
    h2_peer<tcp_stream>::response got;
    run({}, [&](socket_address addr, server&) -> task<void> {
        auto s = (co_await tcp_stream::connect(addr)).value();
        h2_peer p{s};
        (co_await p.start()).value();  // the default window, 64 KiB: the rest needs updates
        (co_await p.send_request(1, "GET", "/stream")).value();
        got = (co_await p.read_response(1)).value();
    });
    EXPECT_EQ(got.status, 200);
    EXPECT_EQ(got.body, std::string(streamed_size, 's'));
}

TEST_P(http2, handler_exception_is_500_on_its_stream_alone) {
    h2_peer<tcp_stream>::response failed;
    h2_peer<tcp_stream>::response after;
    run({}, [&](socket_address addr, server&) -> task<void> {
        auto s = (co_await tcp_stream::connect(addr)).value();
        h2_peer p{s};
        (co_await p.start()).value();
        (co_await p.send_request(1, "GET", "/throw")).value();
        failed = (co_await p.read_response(1)).value();
        (co_await p.send_request(3, "GET", "/")).value();  // the same connection still serves
        after = (co_await p.read_response(3)).value();
    });
    EXPECT_EQ(failed.status, 500);
    EXPECT_EQ(after.status, 200);
}

// As on HTTP/1.1 (tests/trace/test_trace_http.cpp): a server span per stream, named by the
// route's pattern, continuing the traceparent of the request's fields; the handler's context
// is that span's; a 404 is a root span named by the method; a handler's failure is an error.
TEST_P(http2, a_server_span_per_stream_continues_the_callers_trace) {
    constexpr const char* caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    trace::tracer tr;
    std::vector<int> statuses;
    run({.tracer = &tr}, [&](socket_address addr, server&) -> task<void> {
        auto s = (co_await tcp_stream::connect(addr)).value();
        h2_peer p{s};
        (co_await p.start()).value();
        const std::string block =
            p.request_block("GET", "/items/7", {{"traceparent", caller}, {"tracestate", "rojo=1"}});
        (co_await p.send(frame(f_headers, end_headers | end_stream, 1, block))).value();
        statuses.push_back((co_await p.read_response(1)).value().status);
        (co_await p.send_request(3, "GET", "/nowhere")).value();
        statuses.push_back((co_await p.read_response(3)).value().status);
        (co_await p.send_request(5, "GET", "/throw")).value();
        statuses.push_back((co_await p.read_response(5)).value().status);
    });
    EXPECT_EQ(statuses, (std::vector<int>{200, 404, 500}));
    std::vector<trace::span_data> spans;
    ASSERT_EQ(tr.take(spans, 10), 3U);
    const auto in = *trace::parse_traceparent(caller);
    const auto& s = spans[0];
    EXPECT_EQ(s.name, "GET /items/{id}");
    EXPECT_EQ(s.kind, trace::span_kind::server);
    EXPECT_EQ(s.trace, in.trace);
    EXPECT_EQ(s.parent, in.span);
    EXPECT_EQ(s.state, "rojo=1");
    EXPECT_EQ(seen_.trace, in.trace);
    EXPECT_EQ(seen_.span, s.id);
    auto attribute = [](const trace::span_data& d, std::string_view key) {
        for (const auto& a : d.attributes) {
            if (a.key == key) {
                return a.value;
            }
        }
        return decltype(trace::attribute::value){};
    };
    EXPECT_EQ(std::get<std::string>(attribute(s, "http.route")), "/items/{id}");
    EXPECT_EQ(std::get<std::int64_t>(attribute(s, "http.response.status_code")), 200);
    EXPECT_EQ(spans[1].name, "GET");
    EXPECT_FALSE(spans[1].parent.valid());
    EXPECT_EQ(std::get<std::int64_t>(attribute(spans[1], "http.response.status_code")), 404);
    EXPECT_EQ(spans[2].name, "GET /throw");
    EXPECT_EQ(spans[2].status, trace::status_code::error);
}

TEST_P(http2, drain_sends_goaway_and_finishes_open_streams) {
    h2_peer<tcp_stream>::response got;
    std::uint32_t goaway = UINT32_MAX;
    bool closed = false;
    run({}, [&](socket_address addr, server& srv) -> task<void> {
        auto s = (co_await tcp_stream::connect(addr)).value();
        h2_peer p{s};
        (co_await p.start()).value();
        (co_await p.send_request(1, "GET", "/wait")).value();
        while (handled_.load() == 0) {
            (void)co_await sleep_for(1ms);
        }
        co_await with_scope([&](scope& sc) -> task<void> {
            sc.spawn([&]() -> task<void> { co_await srv.shutdown(); });
            while (p.goaway_code == UINT32_MAX) {
                auto f = (co_await p.read_frame()).value();
                (co_await p.on_frame(f)).value();
            }
            goaway = p.goaway_code;
            release_.set();  // the stream in flight ends after the GOAWAY
            got = (co_await p.read_response(1)).value();
            closed = co_await p.read_until_close();
        });
    });
    EXPECT_EQ(goaway, 0U);  // NO_ERROR
    EXPECT_EQ(got.status, 200);
    EXPECT_EQ(got.body, "released");
    EXPECT_TRUE(closed);
}

TEST_P(http2, h2_by_alpn_over_tls) {
    const wt::issued_cert ca = wt::make_ca("weft h2 CA");
    const wt::issued_cert leaf = wt::make_leaf("localhost", &ca);
    tls_server_options to;
    to.certificate = leaf.as_certificate();
    to.alpn = {"h2", "http/1.1"};
    server_options o;
    o.tls = tls_context::server(to);
    tls_client_options co;
    co.ca_pem = ca.cert_pem();
    co.alpn = {"h2"};
    const auto client_ctx = tls_context::client(co);
    std::string alpn;
    h2_peer<tls_stream>::response a;
    h2_peer<tls_stream>::response b;
    run(std::move(o), [&](socket_address addr, server&) -> task<void> {
        auto tcp = (co_await tcp_stream::connect(addr)).value();
        auto t = (co_await tls_stream::connect(std::move(tcp), client_ctx, "localhost")).value();
        alpn = t.alpn();
        h2_peer p{t};
        (co_await p.start()).value();
        (co_await p.send_request(1, "GET", "/")).value();
        (co_await p.send_request(3, "GET", "/stream")).value();  // multiplexed with stream 1
        a = (co_await p.read_response(1)).value();
        b = (co_await p.read_response(3)).value();
    });
    EXPECT_EQ(alpn, "h2");
    EXPECT_EQ(a.status, 200);
    EXPECT_EQ(a.body, "Hello, World! 1");
    EXPECT_EQ(b.body, std::string(streamed_size, 's'));
}

WEFT_TEST_ON_BOTH_BACKENDS(http2);

// h2 by ALPN over TLS over a simulated connection, on a test clock that auto-advances: the
// keep-alive timeout closes an idle connection in no wall time, and a PING answered while idle
// (a write) does not lift its deadline.
TEST(http2_on_sim, idle_connection_closes_after_keep_alive_timeout_over_tls) {
    const wt::issued_cert ca = wt::make_ca("weft h2 CA");
    const wt::issued_cert leaf = wt::make_leaf("server", &ca);
    tls_server_options to;
    to.certificate = leaf.as_certificate();
    to.alpn = {"h2"};
    server_options o;
    o.tls = tls_context::server(to);
    o.keep_alive_timeout = 100ms;
    tls_client_options co;
    co.ca_pem = ca.cert_pem();
    co.alpn = {"h2"};
    const auto client_ctx = tls_context::client(co);
    std::string alpn;
    h2_peer<tls_stream>::response got;
    bool closed = false;
    server_stats stats;
    runtime rt{testing::test_clock_runtime()};
    rt.block_on([&]() -> task<void> {
        testing::sim_network net{{.latency = 1ms}};
        server srv{std::move(o)};
        srv.route(method::get, "/",
                  [](request&) -> task<response> { co_return response::text("Hello over h2"); });
        auto l = net.listen("server", 443);
        co_await with_scope([&](scope& s) -> task<void> {
            s.spawn(srv.serve(*l));
            auto raw = (co_await net.connect("client", "server", 443)).value();
            auto t = (co_await tls_stream::connect(std::move(raw), client_ctx, "server")).value();
            alpn = t.alpn();
            h2_peer p{t};
            (co_await p.start()).value();
            (co_await p.send_request(1, "GET", "/")).value();
            got = (co_await p.read_response(1)).value();
            (co_await p.send(frame(f_ping, 0, 0, "12345678"))).value();
            closed = co_await p.read_until_close();
            co_await srv.shutdown();
        });
        stats = srv.stats();
    }());
    EXPECT_EQ(alpn, "h2");
    EXPECT_EQ(got.status, 200);
    EXPECT_EQ(got.body, "Hello over h2");
    EXPECT_TRUE(closed);
    EXPECT_GE(stats.timed_out, 1U);
}

}  // namespace
}  // namespace weft::http::test
