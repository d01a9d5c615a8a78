// http::server over TLS (server_options::tls), on both backends: curl as the peer where it is
// installed, weft's own tls_stream as a client always; a client that stalls in the handshake
// is dropped and counted.

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "backend_test.hpp"
#include "tls/cert_factory.hpp"
#include "tls/child_process.hpp"
#include "weft/core/scope.hpp"
#include "weft/http/server.hpp"
#include "weft/io/tcp_listener.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/spawn_blocking.hpp"
#include "weft/tls/tls_stream.hpp"

namespace {

using namespace std::chrono_literals;
using weft::task;
namespace http = weft::http;
namespace wt = weft::test;

auto as_bytes(std::string_view s) -> std::span<const std::byte> {
    return std::as_bytes(std::span{s});
}

class https : public wt::backend_test {
protected:
    wt::issued_cert ca_ = wt::make_ca("weft https CA");
    wt::issued_cert leaf_ = wt::make_leaf("localhost", &ca_);
    http::server_stats stats_;

    template <typename Body>
    void run(std::chrono::milliseconds handshake_timeout, Body body) {
        weft::tls_server_options to;
        to.certificate = leaf_.as_certificate();
        to.handshake_timeout = handshake_timeout;
        http::server_options o;
        o.tls = weft::tls_context::server(to);
        weft::runtime rt{options()};
        rt.block_on([&]() -> task<void> {
            http::server srv{std::move(o)};
            srv.route(http::method::get, "/", [](http::request&) -> task<http::response> {
                co_return http::response::text("Hello over TLS");
            });
            srv.route(http::method::post, "/echo", [](http::request& req) -> task<http::response> {
                auto body = co_await req.body().read_all();
                co_return http::response::text(std::move(body).value());
            });
            auto l = weft::tcp_listener::bind(weft::socket_address::parse("127.0.0.1", 0).value())
                         .value();
            const auto addr = l.local_address().value();
            co_await weft::with_scope([&](weft::scope& s) -> task<void> {
                s.spawn(srv.serve(l));
                co_await body(addr, srv);
                co_await srv.shutdown();
            });
            stats_ = srv.stats();  // every connection has ended
        }());
    }
};

TEST_P(https, curl_gets_an_answer) {
    if (!wt::have_program("curl")) {
        GTEST_SKIP() << "no curl";
    }
    const auto ca_file = wt::write_temp_file("ca.pem", ca_.cert_pem());
    wt::child_result got;
    run(10s, [&](weft::socket_address addr, http::server&) -> task<void> {
        const std::string port = std::to_string(addr.port());
        // The chain and the name verified (--cacert, and localhost resolved to the listener).
        const std::vector<std::string> argv = {"curl",
                                               "-sS",
                                               "--cacert",
                                               ca_file.string(),
                                               "--resolve",
                                               "localhost:" + port + ":127.0.0.1",
                                               "-w",
                                               " %{http_version}",
                                               "https://localhost:" + port + "/"};
        got = (co_await weft::spawn_blocking([&] { return wt::run_child(argv); })).value();
    });
    std::filesystem::remove_all(ca_file.parent_path());
    EXPECT_EQ(got.status, 0) << got.output;
    EXPECT_EQ(got.output, "Hello over TLS 1.1");  // the body, then HTTP/1.1 (ALPN)
}

TEST_P(https, keep_alive_requests_through_tls_stream) {
    weft::tls_client_options co;
    co.ca_pem = ca_.cert_pem();
    co.alpn = {"http/1.1"};
    const auto client_ctx = weft::tls_context::client(co);
    std::string all;
    run(10s, [&](weft::socket_address addr, http::server& srv) -> task<void> {
        auto tcp = (co_await weft::tcp_stream::connect(addr)).value();
        auto t =
            (co_await weft::tls_stream::connect(std::move(tcp), client_ctx, "localhost")).value();
        EXPECT_EQ(t.alpn(), "http/1.1");
        const std::string body(20000, 'b');  // spans more than one record
        const std::string reqs =
            "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"
            "POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: " +
            std::to_string(body.size()) + "\r\n\r\n" + body +
            "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
        EXPECT_TRUE((co_await t.write_all(as_bytes(reqs))).has_value());
        std::array<std::byte, 8192> buf{};
        for (;;) {
            auto n = co_await t.read_some(buf);
            if (!n) {
                EXPECT_EQ(n.error(), weft::io_errc::eof) << n.error().message();  // close_notify
                break;
            }
            all.append(reinterpret_cast<const char*>(buf.data()), *n);
        }
        EXPECT_EQ(srv.stats().requests, 3U);
    });
    std::size_t hellos = 0;
    for (auto p = all.find("Hello over TLS"); p != std::string::npos;
         p = all.find("Hello over TLS", p + 1)) {
        ++hellos;
    }
    EXPECT_EQ(hellos, 2U);
    EXPECT_NE(all.find(std::string(20000, 'b')), std::string::npos);
}

TEST_P(https, drops_a_client_that_stalls_in_the_handshake) {
    std::error_code end;
    run(50ms, [&](weft::socket_address addr, http::server& srv) -> task<void> {
        auto tcp = (co_await weft::tcp_stream::connect(addr)).value();
        const unsigned char partial[] = {0x16, 0x03, 0x01, 0x00, 0x80, 0x01};
        (void)co_await tcp.write_all(std::as_bytes(std::span{partial}));
        std::array<std::byte, 64> buf{};
        auto n = co_await tcp.read_some(buf);
        end = n ? std::error_code{} : n.error();
        (void)srv;
    });
    EXPECT_EQ(stats_.tls_failed, 1U);
    EXPECT_EQ(stats_.requests, 0U);
    EXPECT_TRUE(end == weft::io_errc::eof || end == std::errc::connection_reset) << end.message();
}

WEFT_TEST_ON_BOTH_BACKENDS(https);

}  // namespace
