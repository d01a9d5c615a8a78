// The server's own connection code (src/http/connection.cpp) fed streams of pipelined requests
// cut at seeded random places, and at every byte for short streams, each piece arriving as a
// receive of its own (paced_sender.hpp): the responses must be byte for byte those of the
// stream sent whole (Date values blanked). What this exercises, and the receive counts show:
// a request served in place from the block it arrived in, one gathered across receives in the
// carry buffer, a parsed head that stays where it is while its body is gathered apart (the
// echo handler reads the head after the body), bodies read, skipped and refused, and pipelined
// responses written at most max_pipelined at a time. On both backends and in both runtime modes.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "http/echo_routes.hpp"
#include "http/paced_sender.hpp"
#include "http/rejection_table.hpp"
#include "http/sample_requests.hpp"
#include "test_util.hpp"
#include "weft/core/scope.hpp"
#include "weft/http.hpp"
#include "weft/io/reactor.hpp"
#include "weft/io/tcp_listener.hpp"
#include "weft/sched/runtime.hpp"

namespace weft::http::test {
namespace {

using namespace std::string_view_literals;

using mode = std::tuple<io_backend, bool>;  // backend, stealing

auto count(std::string_view s, std::string_view what) -> std::size_t {
    std::size_t n = 0;
    for (std::size_t at = s.find(what); at != std::string_view::npos; at = s.find(what, at + 1)) {
        ++n;
    }
    return n;
}

auto describe(const std::vector<std::size_t>& cuts) -> std::string {
    std::string s = "cut at";
    for (std::size_t c : cuts) {
        s += ' ' + std::to_string(c);
    }
    return s;
}

class connection_splits : public ::testing::TestWithParam<mode> {
protected:
    void SetUp() override {
        try {
            (void)resolve_io_backend(std::get<0>(GetParam()));
        } catch (const std::system_error&) {
            GTEST_SKIP() << "io_uring unavailable here";
        }
        detail::receive_counts_for_test.store(&counts_, std::memory_order_relaxed);
    }
    void TearDown() override {
        detail::receive_counts_for_test.store(nullptr, std::memory_order_relaxed);
    }

    // Runs `body(addr, srv)` against a server with echo_routes(), then drains it.
    template <typename Body>
    void run(server_options o, Body body) {
        o.linger_timeout = std::chrono::seconds{10};  // ended by the client's half-close
        auto ro = io_runtime_options(2, std::get<0>(GetParam()));
        ro.stealing = std::get<1>(GetParam());
        runtime rt{ro};
        rt.block_on([&]() -> task<void> {
            server srv{std::move(o)};
            echo_routes(srv);
            auto l = tcp_listener::bind(socket_address::parse("127.0.0.1", 0).value()).value();
            const auto addr = l.local_address().value();
            co_await with_scope([&](scope& s) -> task<void> {
                s.spawn(srv.serve(l));
                co_await body(addr, srv);
                co_await srv.shutdown();
            });
        }());
    }

    // The stream whole, then cut at every single byte (`every_cut`), one byte per receive
    // (`bytewise`), and at `random_runs` sets of seeded random places: every run must read
    // what the whole one read. Returns the whole run.
    struct plan {
        bool every_cut = false;
        bool bytewise = false;
        int random_runs = 8;
        std::size_t max_cuts = 24;
    };
    auto check_splits(socket_address addr, std::string stream, plan p) -> task<paced_exchange> {
        const paced_exchange whole = co_await exchange(addr, stream, {});
        EXPECT_TRUE(whole.connected);
        const auto compare = [&](const paced_exchange& got, const std::vector<std::size_t>& cuts) {
            EXPECT_EQ(got.received, whole.received) << describe(cuts);
        };
        if (p.every_cut) {
            for (std::size_t at = 1; at < stream.size(); ++at) {
                const std::vector<std::size_t> cuts{at};
                compare(co_await exchange(addr, stream, cuts), cuts);
            }
        }
        if (p.bytewise) {
            const auto cuts = every_byte(stream.size());
            const paced_exchange got = co_await exchange(addr, stream, cuts);
            compare(got, cuts);
            // One receive per byte the server took: the pacing holds.
            EXPECT_EQ(got.receives, got.bytes);
        }
        for (int i = 0; i < p.random_runs; ++i) {
            const std::uint64_t seed = 0x5eed0000U + static_cast<std::uint64_t>(i);
            const std::size_t n = 1 + seed % p.max_cuts;
            const auto cuts = random_cuts(stream.size(), n, seed);
            compare(co_await exchange(addr, stream, cuts), cuts);
        }
        co_return whole;
    }

    detail::receive_counts counts_;
};

// GET, HEAD, 404, 405, a query, a path parameter: eight requests in one stream.
TEST_P(connection_splits, pipelined_gets) {
    run({}, [this](socket_address addr, server&) -> task<void> {
        const std::string stream =
            "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n"
            "HEAD /hello HTTP/1.1\r\nHost: a\r\n\r\n"
            "GET /n/42?x=1&y HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n"
            "GET /missing HTTP/1.1\r\nHost: a\r\n\r\n"
            "DELETE /hello HTTP/1.1\r\nHost: a\r\n\r\n"
            "GET /?q=2 HTTP/1.1\r\nHost: a\r\nX-A: 1\r\nx-a: 2\r\n\r\n"
            "\r\nGET /n/7 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
            "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n";
        const auto whole =
            co_await check_splits(addr, stream, {.every_cut = true, .bytewise = true});
        EXPECT_EQ(count(whole.received, "HTTP/1.1 200 OK\r\n"), 6U);
        EXPECT_EQ(count(whole.received, "HTTP/1.1 404 "), 1U);
        EXPECT_EQ(count(whole.received, "HTTP/1.1 405 "), 1U);
        EXPECT_EQ(count(whole.received, "Hello, World!"), 2U);  // not after HEAD
        EXPECT_NE(whole.received.find("GET /?q=2\nHost: a\nX-A: 1\nx-a: 2\nbody 0:"),
                  std::string::npos);
        EXPECT_EQ(whole.sent, stream.size());
    });
}

// Content-Length bodies read whole (the echo), skipped unread (/ignore), empty and large (over
// one receive), each followed by more requests.
TEST_P(connection_splits, content_length_bodies) {
    run({}, [this](socket_address addr, server&) -> task<void> {
        std::string stream =
            "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"
            "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"
            "POST /ignore HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\nhello world"
            "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n";
        const auto whole =
            co_await check_splits(addr, stream, {.every_cut = true, .bytewise = true});
        EXPECT_EQ(count(whole.received, "HTTP/1.1 200 OK\r\n"), 4U);
        EXPECT_NE(whole.received.find("body 5:hello"), std::string::npos);
        EXPECT_NE(whole.received.find("body 0:"), std::string::npos);
        EXPECT_EQ(count(whole.received, "ignored"), 1U);

        const std::string big(9000, 'b');
        stream += "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 9000\r\nX-Mark: m\r\n\r\n" +
                  big + "POST /ignore HTTP/1.1\r\nHost: a\r\nContent-Length: 9000\r\n\r\n" + big +
                  "GET /n/9 HTTP/1.1\r\nHost: a\r\n\r\n";
        const auto large = co_await check_splits(addr, stream, {.random_runs = 16});
        EXPECT_EQ(count(large.received, "HTTP/1.1 200 OK\r\n"), 7U);
        EXPECT_NE(large.received.find("X-Mark: m\nbody 9000:" + big), std::string::npos);
    });
}

// Chunked bodies with extensions and trailers, read and skipped.
TEST_P(connection_splits, chunked_bodies_with_trailers) {
    run({}, [this](socket_address addr, server&) -> task<void> {
        const std::string stream =
            "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
            "5\r\nhello\r\n1;ext=1;q=\"a b\"\r\n \r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\nY: 2\r\n\r\n"
            "POST /ignore HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
            "3\r\nabc\r\n0\r\n\r\n"
            "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
            "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n";
        const auto whole =
            co_await check_splits(addr, stream, {.every_cut = true, .bytewise = true});
        EXPECT_EQ(count(whole.received, "HTTP/1.1 200 OK\r\n"), 4U);
        EXPECT_NE(whole.received.find("body 16:hello 0123456789"), std::string::npos);
        EXPECT_NE(whole.received.find("body 0:"), std::string::npos);
        EXPECT_EQ(whole.sent, stream.size());
    });
}

// Expect: 100-continue: the interim response before the echo (after the responses queued
// before it); a handler that never reads the body closes the connection, so what follows is
// never answered.
TEST_P(connection_splits, expect_continue) {
    run({}, [this](socket_address addr, server&) -> task<void> {
        const std::string stream =
            "GET /n/1 HTTP/1.1\r\nHost: a\r\n\r\n"
            "POST /echo HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n"
            "abcd"
            "GET /n/2 HTTP/1.1\r\nHost: a\r\n\r\n"
            "POST /ignore HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n"
            "wxyz"
            "GET /n/3 HTTP/1.1\r\nHost: a\r\n\r\n";
        const auto whole =
            co_await check_splits(addr, stream, {.every_cut = true, .bytewise = true});
        EXPECT_EQ(count(whole.received, "HTTP/1.1 100 Continue\r\n\r\n"), 1U);
        EXPECT_EQ(count(whole.received, "HTTP/1.1 200 OK\r\n"), 4U);
        const std::size_t interim = whole.received.find("100 Continue");
        EXPECT_LT(whole.received.find("\r\n\r\n1"), interim);  // /n/1 answered first
        EXPECT_LT(interim, whole.received.find("body 4:abcd"));
        EXPECT_EQ(whole.received.find("\r\n\r\n3"), std::string::npos);  // after the close
        EXPECT_NE(whole.received.find("Connection: close"), std::string::npos);
    });
}

// Browser-sized heads (one of 4 KiB, more than fits one receive beside others) and a body
// that spans several receives, cut anywhere.
TEST_P(connection_splits, large_heads_and_bodies) {
    run({}, [this](socket_address addr, server&) -> task<void> {
        std::string stream = browser_request() + cookie_request() + wrk_request();
        const std::string body(6000, 'z');
        stream += "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 6000\r\n\r\n" + body;
        stream += browser_request();
        const auto whole = co_await check_splits(addr, stream, {.random_runs = 24});
        EXPECT_EQ(count(whole.received, "HTTP/1.1 404 "), 3U);  // the browser's /index.html
        EXPECT_EQ(count(whole.received, "HTTP/1.1 200 OK\r\n"), 2U);
        EXPECT_NE(whole.received.find("body 6000:" + body), std::string::npos);
    });
}

// Every row of the rejection table after a valid request (so the row starts inside a receive,
// not at its first byte) and, when the row keeps the connection, before another: the status,
// the close and every byte as when sent whole. Under the sanitizers (stress_scale() above 1)
// each mode sends one row in stress_scale() byte by byte, a different one per mode, so that
// the four modes together still send every short row byte-wise (the in-memory table test,
// test_rejections.cpp, sends every row byte-wise in every build).
TEST_P(connection_splits, rejection_rows_after_a_pipelined_request) {
    const std::string first = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
    const std::string last = "GET /n/5 HTTP/1.1\r\nHost: a\r\n\r\n";
    const auto scale = static_cast<std::size_t>(weft::test::stress_scale());
    const std::size_t mode_index = (std::get<0>(GetParam()) == io_backend::epoll ? 2U : 0U) +
                                   (std::get<1>(GetParam()) ? 1U : 0U);
    const auto rows = rejection_rows();
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const auto& row = rows[i];
        SCOPED_TRACE(row.name);
        server_options o;
        o.limits = row.limits;
        run(o, [&](socket_address addr, server&) -> task<void> {
            const std::string stream = first + row.request + (row.served_closes() ? "" : last);
            const bool short_row = stream.size() <= 512;
            const bool bytewise = short_row && i % scale == mode_index % scale;
            const auto whole = co_await check_splits(
                addr, stream,
                {.bytewise = bytewise, .random_runs = weft::test::scaled(short_row ? 4 : 3)});
            EXPECT_EQ(whole.received.find("HTTP/1.1 200 OK\r\n"), 0U) << whole.received;
            if (row.served_status() != 0) {
                const std::string status = "HTTP/1.1 " + std::to_string(row.served_status()) + " ";
                EXPECT_EQ(count(whole.received, status), 1U) << whole.received;
                EXPECT_EQ(count(whole.received, "HTTP/1.1 "), 2U) << whole.received;
                EXPECT_NE(whole.received.find("Connection: close"), std::string::npos);
            } else {
                EXPECT_EQ(count(whole.received, "HTTP/1.1 "), row.closes ? 2U : 3U)
                    << whole.received;
            }
        });
    }
}

// A body that spans receives after a head that arrived in one: the head is parsed in place in
// the first block, then gathered into the carry buffer with the body and moved again as that
// grows; the echo, which reads every field after the body, sees them intact. And a head that
// itself spans receives.
// Reads from `s` until `text` holds one whole "Hello, World!" response.
auto read_hello(tcp_stream& s, std::string& text) -> task<bool> {
    while (text.find("Hello, World!") == std::string::npos) {
        auto got = co_await s.receive();
        if (!got) {
            co_return false;
        }
        text.append(reinterpret_cast<const char*>(got->data()), got->size());
    }
    co_return true;
}

// An idle keep-alive connection holds no request state (parser, carry and output buffers): it
// takes one when a request's first bytes arrive and gives it back once answered. 32 connections
// each hold one while their heads are incomplete, and none once answered and idle, while all 32
// stay open. (A wait that never ends fails the test through the watchdog.)
TEST_P(connection_splits, idle_connections_hold_no_request_state) {
    run({}, [this](socket_address addr, server& srv) -> task<void> {
        constexpr int n = 32;
        std::vector<tcp_stream> conns;
        for (int i = 0; i < n; ++i) {
            auto c = co_await tcp_stream::connect(addr);
            EXPECT_TRUE(c);
            if (!c) {
                co_return;
            }
            conns.push_back(std::move(*c));
        }
        const std::string_view first = "GET /hello HTTP/1.1\r\nHo";
        const std::string_view rest = "st: a\r\n\r\n";
        for (auto& c : conns) {
            auto w = co_await c.write_all(std::as_bytes(std::span{first.data(), first.size()}));
            EXPECT_TRUE(w);
        }
        while (counts_.states_held.load(std::memory_order_relaxed) != n) {
            co_await yield();
        }
        for (auto& c : conns) {
            auto w = co_await c.write_all(std::as_bytes(std::span{rest.data(), rest.size()}));
            EXPECT_TRUE(w);
            std::string text;
            const bool answered = co_await read_hello(c, text);
            EXPECT_TRUE(answered) << text;
        }
        while (counts_.states_held.load(std::memory_order_relaxed) != 0) {
            co_await yield();
        }
        EXPECT_EQ(srv.stats().open, static_cast<std::uint64_t>(n));
        EXPECT_EQ(srv.stats().requests, static_cast<std::uint64_t>(n));
    });
}

TEST_P(connection_splits, head_stays_in_place_while_its_body_is_gathered) {
    run({}, [](socket_address addr, server&) -> task<void> {
        std::string head =
            "POST /echo?k=v HTTP/1.1\r\nHost: example.test\r\nContent-Length: 3000\r\n"
            "X-First: one\r\nX-Second: two\r\n\r\n";
        std::string body;
        for (int i = 0; body.size() < 3000; ++i) {
            body += std::to_string(i % 10);
        }
        const std::string expected =
            "POST /echo?k=v\nHost: example.test\nContent-Length: 3000\nX-First: one\n"
            "X-Second: two\nbody 3000:" +
            body;
        const std::string stream = head + body;
        // Head and 10 body bytes in the first receive, then the rest in pieces that grow the
        // body's carry buffer (so it moves, and the head must not).
        std::vector<std::size_t> cuts{head.size() + 10};
        for (std::size_t at = head.size() + 50; at < stream.size(); at *= 2) {
            cuts.push_back(at);
        }
        auto got = co_await exchange(addr, stream, cuts);
        EXPECT_NE(got.received.find(expected), std::string::npos) << got.received;
        EXPECT_EQ(got.receives, cuts.size() + 1);
        EXPECT_EQ(got.carried, cuts.size());  // every receive after the first is gathered

        // The head split in three: gathered from its second receive on.
        cuts = {20, 60, head.size() + 1, head.size() + 1500};
        got = co_await exchange(addr, stream, cuts);
        EXPECT_NE(got.received.find(expected), std::string::npos) << got.received;
        EXPECT_EQ(got.receives, cuts.size() + 1);
        EXPECT_EQ(got.carried, cuts.size());
    });
}

// Pipelining: every complete request of a receive is answered before one vectored write, at
// most max_pipelined (16) at a time; a partial request at the end of a receive sends what is
// queued before waiting for its rest.
TEST_P(connection_splits, pipelined_responses_leave_at_most_16_per_write) {
    run({}, [](socket_address addr, server& srv) -> task<void> {
        std::string stream;
        std::vector<std::size_t> cuts;
        const auto get = [&](int i) {
            stream += "GET /n/" + std::to_string(i) + " HTTP/1.1\r\nHost: a\r\n\r\n";
        };
        for (int i = 0; i < 17; ++i) {
            get(i);  // one receive: 16, then 1
        }
        cuts.push_back(stream.size());
        for (int i = 17; i < 20; ++i) {
            get(i);  // 3, then the start of the next: 3 written before waiting
        }
        get(20);
        cuts.push_back(stream.size() - 10);
        for (int i = 21; i < 37; ++i) {
            get(i);  // the rest of 20, and 16 more: 16, then 1
        }
        const std::uint64_t writes0 = srv.stats().writes;
        const auto got = co_await exchange(addr, stream, cuts);
        EXPECT_EQ(got.receives, 3U);
        EXPECT_EQ(srv.stats().writes - writes0, 5U);
        EXPECT_EQ(count(got.received, "HTTP/1.1 200 OK\r\n"), 37U);
        std::string bodies;  // in order, each followed by ','
        for (std::size_t at = got.received.find("\r\n\r\n"); at != std::string::npos;
             at = got.received.find("\r\n\r\n", at + 4)) {
            const std::size_t end = got.received.find("HTTP/", at);
            bodies.append(got.received, at + 4, end == std::string::npos ? end : end - at - 4);
            bodies += ',';
        }
        std::string expected;
        for (int i = 0; i < 37; ++i) {
            expected += std::to_string(i) + ',';
        }
        EXPECT_EQ(bodies, expected);
    });
}

INSTANTIATE_TEST_SUITE_P(modes,
                         connection_splits,
                         ::testing::Combine(::testing::Values(io_backend::io_uring,
                                                              io_backend::epoll),
                                            ::testing::Bool()),
                         [](const auto& info) {
                             return std::string(to_string(std::get<0>(info.param))) +
                                    (std::get<1>(info.param) ? "_stealing" : "_per_core");
                         });

}  // namespace
}  // namespace weft::http::test
