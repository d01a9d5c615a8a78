// http::client_pool against weft's own server and against scripted servers that misbehave on
// purpose (a closed idle connection, a slow answer, ambiguous framing, a huge head, a body cut
// short, a redirect loop), on both backends; over TLS with certificates made by the test. The
// timeouts (request, idle, read) run against scripted servers on weft::testing's simulated
// network, on the test clock: they take no wall time.

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <string>

#include "backend_test.hpp"
#include "tls/cert_factory.hpp"
#include "weft/core/scope.hpp"
#include "weft/http/client_pool.hpp"
#include "weft/http/server.hpp"
#include "weft/io/tcp_listener.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"
#include "weft/sched/yield.hpp"
#include "weft/sync/event.hpp"
#include "weft/testing/sim_network.hpp"
#include "weft/testing/test_clock.hpp"
#include "weft/tls/error.hpp"

namespace {

using namespace std::chrono_literals;
using weft::task;
namespace http = weft::http;
namespace wt = weft::test;

auto listen_any() -> weft::tcp_listener {
    return weft::tcp_listener::bind(weft::socket_address::parse("127.0.0.1", 0).value()).value();
}

/// Reads one request (head and Content-Length body) from `s` (a tcp_stream or a byte_stream);
/// false when the peer closed.
template <typename Stream>
auto read_request(Stream& s, std::string& buf) -> task<bool> {
    for (;;) {
        if (const auto end = buf.find("\r\n\r\n"); end != std::string::npos) {
            std::size_t len = 0;
            if (const auto cl = buf.find("Content-Length: "); cl != std::string::npos && cl < end) {
                len = std::stoul(buf.substr(cl + 16));
            }
            if (buf.size() >= end + 4 + len) {
                buf.erase(0, end + 4 + len);
                co_return true;
            }
        }
        char tmp[4096];
        auto n = co_await s.read_some(std::as_writable_bytes(std::span{tmp}));
        if (!n) {
            co_return false;
        }
        buf.append(tmp, *n);
    }
}

template <typename Stream>
auto write(Stream& s, std::string_view text) -> task<bool> {
    co_return static_cast<bool>(co_await s.write_all(std::as_bytes(std::span{text})));
}

auto accept_on(weft::tcp_listener& l) -> task<weft::result<weft::tcp_stream>> { return l.accept(); }
auto accept_on(std::unique_ptr<weft::byte_listener>& l)
    -> task<weft::result<std::unique_ptr<weft::byte_stream>>> {
    return l->accept();
}
auto stream_of(weft::tcp_stream& s) -> weft::tcp_stream& { return s; }
auto stream_of(std::unique_ptr<weft::byte_stream>& s) -> weft::byte_stream& { return *s; }

/// A server whose every connection runs `script(index, stream)`; counts connections and
/// requests (the scripts count requests through `requests`). On TCP (scripted_server), or on a
/// simulated network as host "shop", port 80 (sim_scripted_server).
template <typename Listener, typename Stream>
struct basic_scripted_server {
    using script = std::function<task<void>(int, Stream&, basic_scripted_server&)>;
    Listener listener;
    std::string origin;  // the URLs' scheme and authority
    std::atomic<int> accepted{0};
    std::atomic<int> requests{0};
    std::atomic<int> closed{0};  // connections whose script ended and which the server closed

    basic_scripted_server()
        : listener(listen_any()),
          origin("http://127.0.0.1:" + std::to_string(listener.local_address().value().port())) {}
    explicit basic_scripted_server(weft::testing::sim_network& net)
        : listener(net.listen("shop", 80)), origin("http://shop") {}

    [[nodiscard]] auto url(std::string_view path = "/") const -> std::string {
        return origin + std::string(path);
    }
    auto serve(script s) -> task<void> {
        co_await weft::with_scope([&](weft::scope& sc) -> task<void> {
            for (;;) {
                auto c = co_await accept_on(listener);
                if (!c) {
                    co_return;
                }
                const int index = accepted.fetch_add(1);
                sc.spawn([](script s, int i, auto conn, basic_scripted_server& self) -> task<void> {
                    co_await s(i, stream_of(conn), self);
                    { auto done = std::move(conn); }
                    self.closed.fetch_add(1);
                }(s, index, std::move(*c), *this));
            }
        });
    }
};

using scripted_server = basic_scripted_server<weft::tcp_listener, weft::tcp_stream>;
using sim_scripted_server =
    basic_scripted_server<std::unique_ptr<weft::byte_listener>, weft::byte_stream>;

/// Runs `body` beside `server.serve(script)`, then stops the server.
template <typename Server, typename Body>
auto beside(Server& server, typename Server::script script, Body body) -> task<void> {
    co_await weft::with_scope([&](weft::scope& s) -> task<void> {
        s.spawn(server.serve(std::move(script)));
        co_await body();
        s.request_stop();
    });
}

/// Answers every request on a connection with `hello`, keep-alive, until the peer closes;
/// closes after `per_connection` requests when that is > 0.
template <typename Server = scripted_server>
auto keep_alive_script(int per_connection) -> typename Server::script {
    return [per_connection](int, auto& s, Server& self) -> task<void> {
        std::string buf;
        for (int n = 0; per_connection == 0 || n < per_connection; ++n) {
            if (!co_await read_request(s, buf)) {
                co_return;
            }
            self.requests.fetch_add(1);
            if (!co_await write(s, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")) {
                co_return;
            }
        }
    };
}

/// Yields until `ready()`.
template <typename Ready>
auto until(Ready ready) -> task<void> {
    while (!ready()) {
        co_await weft::yield();
    }
}

class client_pool : public wt::backend_test {};

// ---- against weft's own server -------------------------------------------------------------

template <typename Body>
auto with_weft_server(Body body) -> task<void> {
    http::server srv;
    srv.route(http::method::get, "/", [](http::request&) -> task<http::response> {
        co_return http::response::text("hello");
    });
    srv.route(http::method::post, "/echo", [](http::request& req) -> task<http::response> {
        auto b = co_await req.body().read_all();
        co_return http::response::text(std::move(b).value());
    });
    srv.route(http::method::get, "/loop", [](http::request&) -> task<http::response> {
        auto r = http::response::text("", 302);
        r.set_header("Location", "/loop");
        co_return r;
    });
    srv.route(http::method::get, "/moved", [](http::request&) -> task<http::response> {
        auto r = http::response::text("", 301);
        r.set_header("Location", "/");
        co_return r;
    });
    auto l = listen_any();
    const std::string base = "http://127.0.0.1:" + std::to_string(l.local_address().value().port());
    co_await weft::with_scope([&](weft::scope& s) -> task<void> {
        s.spawn(srv.serve(l));
        co_await body(base);
        co_await srv.shutdown();
    });
}

TEST_P(client_pool, keeps_one_connection_alive_across_requests) {
    weft::runtime rt{options()};
    http::client_pool pool;
    rt.block_on(with_weft_server([&](std::string base) -> task<void> {
        for (int i = 0; i < 5; ++i) {
            auto r = co_await pool.get(base + "/");
            EXPECT_TRUE(r && r->status == 200 && r->body == "hello");
        }
        auto e = co_await pool.post(base + "/echo", "ping", "text/plain");
        EXPECT_TRUE(e && e->body == "ping");
    }));
    EXPECT_EQ(pool.stats().connections_opened, 1U);
    EXPECT_EQ(pool.stats().requests, 6U);
}

TEST_P(client_pool, redirects_are_off_by_default_and_bounded_when_on) {
    weft::runtime rt{options()};
    http::client_pool off;
    http::client_pool on{{.max_redirects = 3}};
    rt.block_on(with_weft_server([&](std::string base) -> task<void> {
        auto r = co_await off.get(base + "/moved");
        EXPECT_TRUE(r && r->status == 301);  // returned, not followed
        auto followed = co_await on.get(base + "/moved");
        EXPECT_TRUE(followed && followed->status == 200 && followed->body == "hello");
        auto loop = co_await on.get(base + "/loop");
        EXPECT_EQ(loop.error(), http::client_errc::too_many_redirects);
    }));
    EXPECT_EQ(on.stats().connections_opened, 1U);  // the same origin: one pooled connection
}

TEST_P(client_pool, bad_urls_are_refused) {
    weft::runtime rt{options()};
    http::client_pool pool;
    rt.block_on([&]() -> task<void> {
        for (const char* url :
             {"ftp://x/", "127.0.0.1/", "http://", "http://h:99999/", "http://user@h/"}) {
            auto r = co_await pool.get(url);
            EXPECT_EQ(r.error(), http::client_errc::bad_url) << url;
        }
    }());
}

// ---- hostile servers -----------------------------------------------------------------------

TEST_P(client_pool, a_closed_idle_connection_is_retried_once_for_get) {
    weft::runtime rt{options()};
    scripted_server server;
    http::client_pool pool;
    rt.block_on(beside(server, keep_alive_script(1), [&]() -> task<void> {
        EXPECT_TRUE(co_await pool.get(server.url()));
        co_await until([&] { return server.closed.load() >= 1; });
        auto r = co_await pool.get(server.url());  // the pooled connection is closed
        EXPECT_TRUE(r && r->body == "hello") << (r ? "" : r.error().message());
    }));
    EXPECT_EQ(pool.stats().retries, 1U);
    EXPECT_EQ(pool.stats().connections_opened, 2U);
}

TEST_P(client_pool, a_closed_idle_connection_is_an_error_for_post) {
    weft::runtime rt{options()};
    scripted_server server;
    http::client_pool pool;
    rt.block_on(beside(server, keep_alive_script(1), [&]() -> task<void> {
        EXPECT_TRUE(co_await pool.get(server.url()));
        co_await until([&] { return server.closed.load() >= 1; });
        auto r = co_await pool.post(server.url(), "once", "text/plain");
        EXPECT_FALSE(r);  // a POST may have been acted on: never sent twice
    }));
    EXPECT_EQ(pool.stats().retries, 0U);
    EXPECT_EQ(server.requests.load(), 1);
}

TEST_P(client_pool, retries_stop_when_the_budget_is_spent) {
    weft::runtime rt{options()};
    scripted_server server;
    http::client_pool pool{{.retry_ratio = 0, .retry_min_per_second = 0}};
    rt.block_on(beside(server, keep_alive_script(1), [&]() -> task<void> {
        EXPECT_TRUE(co_await pool.get(server.url()));
        co_await until([&] { return server.closed.load() >= 1; });
        EXPECT_FALSE(co_await pool.get(server.url()));
    }));
    EXPECT_EQ(pool.stats().retries, 0U);
}

/// Answers the first request of every connection with `response` and closes.
template <typename Server = scripted_server>
auto answer_once(std::string response) -> typename Server::script {
    return [response](int, auto& s, Server& self) -> task<void> {
        std::string buf;
        if (co_await read_request(s, buf)) {
            self.requests.fetch_add(1);
            (void)co_await write(s, response);
            (void)co_await read_request(s, buf);  // until the client closes
        }
    };
}

TEST_P(client_pool, content_length_with_transfer_encoding_is_refused) {
    weft::runtime rt{options()};
    scripted_server server;
    http::client_pool pool;
    rt.block_on(beside(server,
                       answer_once("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
                                   "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
                       [&]() -> task<void> {
                           auto r = co_await pool.get(server.url());
                           EXPECT_EQ(r.error(), std::errc::bad_message);
                       }));
    EXPECT_EQ(pool.stats().idle, 0U);  // not reused
}

TEST_P(client_pool, a_huge_response_head_is_refused) {
    weft::runtime rt{options()};
    scripted_server server;
    http::client_pool pool{{.max_response_head = 16 * 1024}};
    const std::string huge = "HTTP/1.1 200 OK\r\nX-Big: " + std::string(100 * 1024, 'a') +
                             "\r\nContent-Length: 0\r\n\r\n";
    rt.block_on(beside(server, answer_once(huge), [&]() -> task<void> {
        auto r = co_await pool.get(server.url());
        EXPECT_EQ(r.error(), std::errc::message_size);
    }));
    EXPECT_EQ(pool.stats().idle, 0U);
}

TEST_P(client_pool, a_truncated_chunked_body_is_an_error_and_not_reused) {
    weft::runtime rt{options()};
    scripted_server server;
    http::client_pool pool;
    auto script = [](int i, weft::tcp_stream& s, scripted_server& self) -> task<void> {
        std::string buf;
        if (!co_await read_request(s, buf)) {
            co_return;
        }
        self.requests.fetch_add(1);
        if (i == 0) {  // cut short mid-chunk, then closed
            (void)co_await write(s,
                                 "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                 "a\r\nhel");
            co_return;
        }
        (void)co_await write(s,
                             "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                             "5\r\nhello\r\n0\r\n\r\n");
        (void)co_await read_request(s, buf);
    };
    rt.block_on(beside(server, script, [&]() -> task<void> {
        auto cut = co_await pool.get(server.url());
        EXPECT_FALSE(cut);
        auto whole = co_await pool.get(server.url());
        EXPECT_TRUE(whole && whole->body == "hello" && whole->chunked);
    }));
    EXPECT_EQ(pool.stats().connections_opened, 2U);  // the cut connection was not reused
    EXPECT_EQ(pool.stats().retries, 0U);             // bytes had come back: not a stale one
}

TEST_P(client_pool, the_idle_limit_closes_the_oldest) {
    weft::runtime rt{options()};
    scripted_server a;
    scripted_server b;
    http::client_pool pool{{.max_idle = 1}};
    rt.block_on(beside(a, keep_alive_script(0), [&]() -> task<void> {
        co_await beside(b, keep_alive_script(0), [&]() -> task<void> {
            EXPECT_TRUE(co_await pool.get(a.url()));
            EXPECT_TRUE(co_await pool.get(b.url()));  // a's idle connection is closed
            co_await until([&] { return a.closed.load() == 1; });
            EXPECT_EQ(pool.stats().idle, 1U);
        });
    }));
}

// ---- streamed bodies -----------------------------------------------------------------------

/// Reads a request head from `s` (the body is left in `buf`); false when the peer closed.
auto read_head(weft::tcp_stream& s, std::string& buf) -> task<bool> {
    while (buf.find("\r\n\r\n") == std::string::npos) {
        char tmp[4096];
        auto n = co_await s.read_some(std::as_writable_bytes(std::span{tmp}));
        if (!n) {
            co_return false;
        }
        buf.append(tmp, *n);
    }
    buf.erase(0, buf.find("\r\n\r\n") + 4);
    co_return true;
}

TEST_P(client_pool, a_body_sent_a_byte_at_a_time_is_read_as_it_arrives) {
    weft::runtime rt{options()};
    scripted_server server;
    http::client_pool pool;
    std::atomic<int> pieces_read{0};
    // Each byte is sent only after the client read the one before: a client that waited for
    // the whole body would wait forever (the watchdog fails the test).
    auto script = [&pieces_read](int, weft::tcp_stream& s, scripted_server& self) -> task<void> {
        std::string buf;
        while (co_await read_request(s, buf)) {
            const bool gated = self.requests.fetch_add(1) == 0;  // the streamed read
            if (!co_await write(s, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")) {
                co_return;
            }
            for (int i = 0; i < 5; ++i) {
                co_await until([&] { return !gated || pieces_read.load() >= i; });
                if (!co_await write(s, std::string("1\r\n") + "hello"[i] + "\r\n")) {
                    co_return;
                }
            }
            if (!co_await write(s, "0\r\n\r\n")) {
                co_return;
            }
        }
    };
    std::string body;
    int pieces = 0;
    rt.block_on(beside(server, script, [&]() -> task<void> {
        http::client_request st_req{.url = server.url()};
        auto st = co_await pool.open(std::move(st_req));
        EXPECT_TRUE(st && st->response().status == 200);
        for (;;) {
            auto piece = co_await st->read();
            EXPECT_TRUE(piece);
            if (!piece || piece->empty()) {
                break;
            }
            body.append(*piece);
            ++pieces;
            pieces_read.fetch_add(1);
        }
        auto again = co_await pool.get(server.url());  // read whole: the connection is reused
        EXPECT_TRUE(again && again->body == "hello") << (again ? "" : again.error().message());
    }));
    EXPECT_EQ(body, "hello");
    EXPECT_EQ(pieces, 5);
    EXPECT_EQ(pool.stats().connections_opened, 1U);
    EXPECT_EQ(server.accepted.load(), 1);
}

TEST_P(client_pool, a_malformed_chunk_size_is_bad_message) {
    weft::runtime rt{options()};
    scripted_server server;
    http::client_pool pool;
    rt.block_on(beside(server,
                       answer_once("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                   "5\r\nhello\r\nzz\r\nxx\r\n0\r\n\r\n"),
                       [&]() -> task<void> {
                           http::client_request st_req{.url = server.url()};
                           auto st = co_await pool.open(std::move(st_req));
                           EXPECT_TRUE(st);
                           std::error_code ec;
                           for (;;) {
                               auto piece = co_await st->read();
                               if (!piece) {
                                   ec = piece.error();
                                   break;
                               }
                               if (piece->empty()) {
                                   break;
                               }
                           }
                           EXPECT_EQ(ec, std::errc::bad_message);
                       }));
    EXPECT_EQ(pool.stats().idle, 0U);
}

TEST_P(client_pool, a_body_over_the_limit_fails_before_it_is_all_sent) {
    weft::runtime rt{options()};
    scripted_server server;
    http::client_pool pool{{.max_response_body = 1000}};
    // Neither server sends the body it announces: only a client that refuses on the announced
    // size (before reading the body) gets an answer; one that read on would wait forever.
    auto script = [](int i, weft::tcp_stream& s, scripted_server& self) -> task<void> {
        std::string buf;
        if (!co_await read_request(s, buf)) {
            co_return;
        }
        self.requests.fetch_add(1);
        (void)co_await write(s, i == 0 ? "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\nabc"
                                       : "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                         "f4240\r\nabc");
        (void)co_await read_request(s, buf);  // until the client closes
    };
    rt.block_on(beside(server, script, [&]() -> task<void> {
        http::client_request announced_req{.url = server.url()};
        auto announced = co_await pool.open(std::move(announced_req));
        EXPECT_EQ(announced.error(), std::errc::message_size);
        auto chunked = co_await pool.get(server.url());
        EXPECT_EQ(chunked.error(), std::errc::message_size);
        co_await until([&] { return server.closed.load() == 2; });
    }));
    EXPECT_EQ(pool.stats().idle, 0U);
}

TEST_P(client_pool, a_streamed_upload_goes_chunked_or_with_its_length) {
    weft::runtime rt{options()};
    http::client_pool pool;
    const std::string piece(40 * 1024, 'u');
    auto producer = [&piece](int count) {
        return [&piece, count, n = 0]() mutable -> task<weft::result<std::string_view>> {
            co_return n++ < count ? std::string_view{piece} : std::string_view{};
        };
    };
    rt.block_on(with_weft_server([&](std::string base) -> task<void> {
        http::client_request chunked_req{
            .method = "POST", .url = base + "/echo", .body_stream = producer(5)};
        auto chunked = co_await pool.request(std::move(chunked_req));
        EXPECT_TRUE(chunked && chunked->body.size() == 5 * piece.size())
            << (chunked ? "" : chunked.error().message());
        http::client_request sized_req{.method = "POST",
                                       .url = base + "/echo",
                                       .body_stream = producer(3),
                                       .body_length = 3 * piece.size()};
        auto sized = co_await pool.request(std::move(sized_req));
        EXPECT_TRUE(sized && sized->body == piece + piece + piece);
        http::client_request wrong_req{.method = "POST",
                                       .url = base + "/echo",
                                       .body_stream = producer(3),
                                       .body_length = 2 * piece.size()};
        auto wrong = co_await pool.request(std::move(wrong_req));
        EXPECT_EQ(wrong.error(), std::errc::invalid_argument);
        EXPECT_TRUE(co_await pool.get(base + "/"));
    }));
    EXPECT_EQ(pool.stats().connections_opened, 2U);  // the wrong length's connection was closed
}

TEST_P(client_pool, an_upload_to_a_server_that_closes_midway_is_an_error) {
    weft::runtime rt{options()};
    scripted_server server;
    http::client_pool pool;
    auto closes = [](int, weft::tcp_stream& s, scripted_server& self) -> task<void> {
        std::string buf;
        if (co_await read_head(s, buf)) {
            self.requests.fetch_add(1);  // then closed, the upload unread
        }
    };
    const std::string piece(64 * 1024, 'u');
    int produced = 0;
    rt.block_on(beside(server, closes, [&]() -> task<void> {
        http::client_request r_req{
            .method = "POST",
            .url = server.url(),
            .body_stream = [&]() -> task<weft::result<std::string_view>> {
                ++produced;  // up to 1 GiB: far more than the socket buffers hold
                co_return produced <= 16384 ? std::string_view{piece} : std::string_view{};
            }};
        auto r = co_await pool.request(std::move(r_req));
        EXPECT_FALSE(r);
    }));
    EXPECT_EQ(server.requests.load(), 1);
    EXPECT_LT(produced, 16384);
    EXPECT_EQ(pool.stats().idle, 0U);
}

TEST_P(client_pool, a_connection_is_reused_only_after_its_body_was_read_whole) {
    weft::runtime rt{options()};
    scripted_server server;
    http::client_pool pool;
    rt.block_on(beside(server, keep_alive_script(0), [&]() -> task<void> {
        {
            http::client_request unread_req{.url = server.url()};
            auto unread = co_await pool.open(std::move(unread_req));
            EXPECT_TRUE(unread);
        }  // dropped unread: its connection is closed
        co_await until([&] { return server.closed.load() == 1; });
        http::client_request read_req{.url = server.url()};
        auto read = co_await pool.open(std::move(read_req));
        EXPECT_TRUE(read);
        auto body = co_await read->read_all();
        EXPECT_TRUE(body && *body == "hello");
        auto reused = co_await pool.get(server.url());
        EXPECT_TRUE(reused && reused->body == "hello");
    }));
    EXPECT_EQ(pool.stats().connections_opened, 2U);
    EXPECT_EQ(server.accepted.load(), 2);
}

// ---- timeouts, on the test clock over a simulated network ------------------------------------

/// Options whose connections go over `net`, from host "client".
auto over(weft::testing::sim_network& net, http::client_options o) -> http::client_options {
    o.connect_stream = [&net](std::string_view host, std::uint16_t port) {
        return net.connect("client", host, port);
    };
    return o;
}

/// Sleeps a millisecond of test time until `ready()`: a yield would keep the runtime busy, and
/// its clock moves only while every task waits.
template <typename Ready>
auto settle_until(Ready ready) -> task<void> {
    while (!ready()) {
        (void)co_await weft::sleep_for(1ms);
    }
}

TEST(client_pool_on_test_clock, a_slow_answer_hits_the_request_timeout) {
    weft::runtime rt{weft::testing::test_clock_runtime()};
    weft::testing::sim_network net{{.latency = 1ms}};
    sim_scripted_server server{net};
    http::client_pool pool{over(net, {.request_timeout = 30s})};
    auto silent = [](int, weft::byte_stream& s, sim_scripted_server& self) -> task<void> {
        std::string buf;
        if (co_await read_request(s, buf)) {
            self.requests.fetch_add(1);
            (void)co_await read_request(s, buf);  // never answers; ends when the client closes
        }
    };
    rt.block_on(beside(server, silent, [&]() -> task<void> {
        auto r = co_await pool.get(server.url());
        EXPECT_EQ(r.error(), std::errc::timed_out);
        co_await settle_until([&] { return server.closed.load() >= 1; });  // the client closed it
    }));
    EXPECT_EQ(server.requests.load(), 1);
    EXPECT_EQ(pool.stats().idle, 0U);
}

TEST(client_pool_on_test_clock, the_request_over_the_per_host_limit_waits) {
    weft::runtime rt{weft::testing::test_clock_runtime()};
    weft::testing::sim_network net{{.latency = 1ms}};
    sim_scripted_server server{net};
    http::client_pool pool{over(net, {.max_per_host = 2})};
    weft::event open_gate;
    auto gated = [&open_gate](int, weft::byte_stream& s, sim_scripted_server& self) -> task<void> {
        std::string buf;
        while (co_await read_request(s, buf)) {
            self.requests.fetch_add(1);
            (void)co_await open_gate.wait();
            if (!co_await write(s, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")) {
                co_return;
            }
        }
    };
    int ok = 0;
    rt.block_on(beside(server, gated, [&]() -> task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> task<void> {
            for (int i = 0; i < 3; ++i) {
                s.spawn([&]() -> task<void> {
                    if (auto r = co_await pool.get(server.url()); r && r->status == 200) {
                        ++ok;
                    }
                });
            }
            co_await settle_until([&] { return server.requests.load() == 2; });
            // Room for a third connection, if one were allowed (within the request timeout).
            (void)co_await weft::sleep_for(10s);
            EXPECT_EQ(server.accepted.load(), 2);
            EXPECT_EQ(server.requests.load(), 2);
            open_gate.set();
        });
    }));
    EXPECT_EQ(ok, 3);
    EXPECT_EQ(pool.stats().connections_opened, 2U);
    EXPECT_EQ(server.requests.load(), 3);
}

TEST(client_pool_on_test_clock, an_idle_connection_past_its_timeout_is_not_reused) {
    weft::runtime rt{weft::testing::test_clock_runtime()};
    weft::testing::sim_network net{{.latency = 1ms}};
    sim_scripted_server server{net};
    http::client_pool pool{over(net, {.idle_timeout = 30s})};
    rt.block_on(beside(server, keep_alive_script<sim_scripted_server>(0), [&]() -> task<void> {
        EXPECT_TRUE(co_await pool.get(server.url()));
        (void)co_await weft::sleep_for(29s);  // within the idle timeout
        EXPECT_TRUE(co_await pool.get(server.url()));
        EXPECT_EQ(pool.stats().connections_opened, 1U);
        (void)co_await weft::sleep_for(31s);  // past it
        EXPECT_TRUE(co_await pool.get(server.url()));
        EXPECT_EQ(pool.stats().connections_opened, 2U);
        co_await settle_until([&] { return server.closed.load() >= 1; });  // the evicted one
    }));
}

TEST(client_pool_on_test_clock, a_stall_mid_chunk_times_out_and_the_connection_is_closed) {
    weft::runtime rt{weft::testing::test_clock_runtime()};
    weft::testing::sim_network net{{.latency = 1ms}};
    sim_scripted_server server{net};
    http::client_pool pool{over(net, {.read_timeout = 30s})};
    rt.block_on(beside(server,
                       answer_once<sim_scripted_server>(
                           "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\na\r\nhel"),
                       [&]() -> task<void> {
                           http::client_request st_req{.url = server.url()};
                           auto st = co_await pool.open(std::move(st_req));
                           EXPECT_TRUE(st);
                           auto first = co_await st->read();
                           EXPECT_TRUE(first && *first == "hel");
                           auto stalled = co_await st->read();
                           EXPECT_EQ(stalled.error(), std::errc::timed_out);
                           co_await settle_until([&] { return server.closed.load() >= 1; });
                           auto whole = co_await pool.get(server.url());  // the same stall
                           EXPECT_EQ(whole.error(), std::errc::timed_out);
                       }));
    EXPECT_EQ(pool.stats().idle, 0U);
    EXPECT_EQ(pool.stats().connections_opened, 2U);
}

// ---- HTTPS ---------------------------------------------------------------------------------

class client_pool_tls : public wt::backend_test {
protected:
    wt::issued_cert ca_ = wt::make_ca("weft client CA");
    wt::issued_cert leaf_ = wt::make_leaf("localhost", &ca_);

    template <typename Body>
    auto with_tls_server(Body body) -> task<void> {
        weft::tls_server_options to;
        to.certificate = leaf_.as_certificate();
        to.alpn = {"http/1.1"};
        http::server_options o;
        o.tls = weft::tls_context::server(to);
        http::server srv{std::move(o)};
        srv.route(http::method::get, "/", [](http::request&) -> task<http::response> {
            co_return http::response::text("hello over tls");
        });
        auto l = listen_any();
        const auto port = l.local_address().value().port();
        srv.route(http::method::get, "/down", [port](http::request&) -> task<http::response> {
            auto r = http::response::text("", 302);
            r.set_header("Location", "http://127.0.0.1:" + std::to_string(port) + "/");
            co_return r;
        });
        co_await weft::with_scope([&](weft::scope& s) -> task<void> {
            s.spawn(srv.serve(l));
            co_await body("https://localhost:" + std::to_string(port));
            co_await srv.shutdown();
        });
    }
};

TEST_P(client_pool_tls, https_is_verified_and_kept_alive) {
    weft::runtime rt{options()};
    http::client_pool trusted{{.tls = {.ca_pem = ca_.cert_pem(), .alpn = {"http/1.1"}}}};
    http::client_pool system_roots;  // the test CA is not in the system store
    rt.block_on(with_tls_server([&](std::string base) -> task<void> {
        for (int i = 0; i < 3; ++i) {
            auto r = co_await trusted.get(base + "/");
            EXPECT_TRUE(r && r->status == 200 && r->body == "hello over tls")
                << (r ? "" : r.error().message());
        }
        auto refused = co_await system_roots.get(base + "/");
        EXPECT_FALSE(refused);
        EXPECT_EQ(refused.error().category(), weft::x509_verify_category())
            << refused.error().message();
    }));
    EXPECT_EQ(trusted.stats().connections_opened, 1U);
}

TEST_P(client_pool_tls, a_redirect_from_https_to_http_is_refused) {
    weft::runtime rt{options()};
    http::client_pool pool{
        {.max_redirects = 5, .tls = {.ca_pem = ca_.cert_pem(), .alpn = {"http/1.1"}}}};
    rt.block_on(with_tls_server([&](std::string base) -> task<void> {
        auto r = co_await pool.get(base + "/down");
        EXPECT_EQ(r.error(), http::client_errc::redirect_downgrade);
    }));
}

WEFT_TEST_ON_BOTH_BACKENDS(client_pool);
WEFT_TEST_ON_BOTH_BACKENDS(client_pool_tls);

}  // namespace
