// Clients that hold a connection without finishing anything: a head sent a byte at a time, a
// complete request followed by the first byte of another, a body trickled below the minimum
// rate, a response never read. Each must be closed by the server's timeouts while a
// well-behaved client beside them is still served; and a slow but steady client must not be.
// On both backends and in both runtime modes. Timeouts are set short; the tests assert that a
// connection was closed (and how much of its request had been sent by then), never when.

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "weft/core/scope.hpp"
#include "weft/http.hpp"
#include "weft/io/reactor.hpp"
#include "weft/io/tcp_listener.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"

namespace weft::http::test {
namespace {

using namespace std::chrono_literals;
using namespace std::string_view_literals;

using mode = std::tuple<io_backend, bool>;  // backend, stealing

constexpr std::size_t big_body = 8 * 1024 * 1024;

// Every timeout short, except the idle keep-alive one: a connection these tests see closed was
// closed by the timeout under test.
auto hostile_options() -> server_options {
    server_options o;
    o.header_timeout = 100ms;
    o.body_timeout = 300ms;
    o.send_timeout = 100ms;
    o.min_rate = 1000;
    o.min_rate_grace = 100ms;
    o.keep_alive_timeout = 1h;
    o.drain_timeout = 200ms;
    o.linger_timeout = 50ms;
    return o;
}

void hostile_routes(server& srv) {
    srv.route(method::get, "/",
              [](request&) -> task<response> { co_return response::text("Hello, World!"); });
    srv.route(method::post, "/upload", [](request& req) -> task<response> {
        auto body = co_await req.body().read_all();
        co_return response::text(std::to_string(body ? body->size() : 0));
    });
    srv.route(method::get, "/big", [](request&) -> task<response> {
        co_return response::text(std::string(big_body, 'z'));
    });
}

class hostile_clients : public ::testing::TestWithParam<mode> {
protected:
    void SetUp() override {
        try {
            (void)resolve_io_backend(std::get<0>(GetParam()));
        } catch (const std::system_error&) {
            GTEST_SKIP() << "io_uring unavailable here";
        }
    }

    // Runs `body(addr, srv)` against a server with hostile_routes, then drains the server.
    template <typename Body>
    void run(server_options o, Body body) {
        auto ro = io_runtime_options(2, std::get<0>(GetParam()));
        ro.stealing = std::get<1>(GetParam());
        runtime rt{ro};
        rt.block_on([&]() -> task<void> {
            server srv{std::move(o)};
            hostile_routes(srv);
            auto l = tcp_listener::bind(socket_address::parse("127.0.0.1", 0).value()).value();
            const auto addr = l.local_address().value();
            co_await with_scope([&](scope& s) -> task<void> {
                s.spawn(srv.serve(l));
                co_await body(addr, srv);
                co_await srv.shutdown();
            });
        }());
    }
};

// Reads until the server closes: true once it has (eof, or a reset), false if it is still open
// after far longer than any timeout these tests set (the hang turned into a failure).
auto closed_by_server(client& c) -> task<bool> {
    auto r = co_await with_timeout(20s, c.read_until_close());
    co_return r.has_value() || r.error() != std::errc::timed_out;
}

// Sends `bytes` one at a time, a few milliseconds apart, until the server closes or all are
// sent. Returns how many were sent before the server closed (bytes.size(): it never did).
auto trickle(client& c, std::string_view bytes) -> task<std::size_t> {
    std::atomic<bool> closed{false};
    std::size_t sent = 0;
    co_await with_scope([&](scope& s) -> task<void> {
        s.spawn([&]() -> task<void> {
            (void)co_await closed_by_server(c);
            closed.store(true, std::memory_order_release);
        });
        for (; sent < bytes.size(); ++sent) {
            if (closed.load(std::memory_order_acquire)) {
                break;
            }
            auto w = co_await c.send_raw(bytes.substr(sent, 1));
            if (!w) {
                break;
            }
            (void)co_await sleep_for(10ms);
        }
        (void)c.stream().shutdown_write();  // ends the reader, if the server never closed
    });
    co_return sent;
}

// A head that never ends: its field grows a byte at a time.
auto endless_head() -> std::string {
    return "GET / HTTP/1.1\r\nHost: a\r\nX-Slow: " + std::string(300, 'a');
}

// A body announced at 100,000 bytes, trickled at about 100 bytes a second.
auto trickled_upload() -> std::string {
    return "POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n";
}

auto trickled_head_client(socket_address addr) -> task<bool> {
    auto c = (co_await client::connect(addr)).value();
    const std::string head = endless_head();
    const std::size_t sent = co_await trickle(c, head);
    co_return sent < head.size();
}

auto trickled_body_client(socket_address addr) -> task<bool> {
    auto c = (co_await client::connect(addr)).value();
    (co_await c.send_raw(trickled_upload())).value();
    const std::string body(300, 'b');
    const std::size_t sent = co_await trickle(c, body);
    co_return sent < body.size();
}

auto request_and_a_partial_one_client(socket_address addr) -> task<bool> {
    auto c = (co_await client::connect(addr)).value();
    (co_await c.send_raw("GET / HTTP/1.1\r\nHost: a\r\n\r\nG")).value();
    auto r = co_await c.read_response();
    if (!r || r->status != 200) {
        co_return false;
    }
    const bool closed = co_await closed_by_server(c);
    co_return closed;
}

// Until the server has timed out `dropped` connections; operation_canceled when cancelled first
// (so that with_timeout reports its deadline as timed_out).
auto timed_out_reaches(server& srv, std::uint64_t dropped) -> task<result<void>> {
    while (srv.stats().timed_out < dropped) {
        auto slept = co_await sleep_for(5ms);
        if (!slept) {
            co_return slept.error();
        }
    }
    co_return result<void>{};
}

// What the server has done, for a failure message: whether the request was read and answered
// (requests), the response written (writes), the connection dropped (timed_out).
auto describe(const server_stats& s) -> std::string {
    return "accepted " + std::to_string(s.accepted) + ", open " + std::to_string(s.open) +
           ", requests " + std::to_string(s.requests) + ", writes " + std::to_string(s.writes) +
           ", timed_out " + std::to_string(s.timed_out) + ", deadline_moves " +
           std::to_string(s.deadline_moves);
}

// Asks for a large response and does not read it until the server has timed out `dropped`
// connections, this one among them: then whatever the socket still holds, and the close (the
// server's FIN waits behind the bytes it could not send, so only reading can see it). The wait
// for the timeouts is bounded far beyond any timeout these tests set: a send timeout that never
// fires fails the test by name instead of hanging it.
auto non_reading_client(socket_address addr, server& srv, std::uint64_t dropped) -> task<bool> {
    auto c = (co_await client::connect(addr)).value();
    const int rcvbuf = 64 * 1024;
    (void)::setsockopt(c.stream().native_handle(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    (co_await c.send("GET", "/big")).value();
    const auto reached = co_await with_timeout(20s, timed_out_reaches(srv, dropped));
    if (!reached || !*reached) {
        ADD_FAILURE() << "the server did not drop " << dropped
                      << " connection(s) at their timeouts while a client did not read a "
                         "response it asked for; server: "
                      << describe(srv.stats());
        co_return false;
    }
    auto r = co_await with_timeout(20s, c.read_until_close());
    if (!r) {
        co_return r.error() != std::errc::timed_out;
    }
    co_return !*r || (*r)->size() < big_body;  // a reset, or the close with the body cut short
}

TEST_P(hostile_clients, complete_request_and_a_partial_one_closed_at_header_timeout) {
    run(hostile_options(), [](socket_address addr, server& srv) -> task<void> {
        const bool closed = co_await request_and_a_partial_one_client(addr);
        EXPECT_TRUE(closed);
        EXPECT_EQ(srv.stats().timed_out, 1U);
    });
}

TEST_P(hostile_clients, trickled_head_closed_at_header_timeout) {
    run(hostile_options(), [](socket_address addr, server& srv) -> task<void> {
        const bool closed = co_await trickled_head_client(addr);
        EXPECT_TRUE(closed);
        EXPECT_EQ(srv.stats().timed_out, 1U);
    });
}

// One byte every 10 ms arrives well within the body's progress timeout (300 ms), but at about
// 100 bytes a second, under the minimum of 1000 after the 100 ms grace.
TEST_P(hostile_clients, trickled_body_closed_below_the_minimum_rate) {
    run(hostile_options(), [](socket_address addr, server& srv) -> task<void> {
        const bool closed = co_await trickled_body_client(addr);
        EXPECT_TRUE(closed);
        EXPECT_EQ(srv.stats().timed_out, 1U);
    });
}

TEST_P(hostile_clients, client_that_never_reads_closed_at_send_timeout) {
    run(hostile_options(), [](socket_address addr, server& srv) -> task<void> {
        const bool closed = co_await non_reading_client(addr, srv, 1);
        EXPECT_TRUE(closed);
        EXPECT_EQ(srv.stats().timed_out, 1U);
    });
}

// A client that reads at most 64 KiB every 10 ms takes far longer than the send timeout for all of
// a large response, but never makes the server wait that long for progress: it gets all of it.
TEST_P(hostile_clients, slow_but_steady_download_is_served_whole) {
    server_options o = hostile_options();
    o.send_timeout = 500ms;  // room for a busy machine between two reads
    run(o, [](socket_address addr, server& srv) -> task<void> {
        auto c = (co_await client::connect(addr)).value();
        const int rcvbuf = 64 * 1024;
        (void)::setsockopt(c.stream().native_handle(), SOL_SOCKET, SO_RCVBUF, &rcvbuf,
                           sizeof rcvbuf);
        (co_await c.send("GET", "/big")).value();
        std::vector<std::byte> buf(64 * 1024);
        std::size_t got = 0;
        for (;;) {
            auto n = co_await c.stream().read_some(buf);
            if (!n) {
                break;
            }
            got += *n;
            if (got >= big_body) {
                break;  // the head and nearly all of the body: the rest is in the socket
            }
            (void)co_await sleep_for(10ms);
        }
        EXPECT_GE(got, big_body);
        EXPECT_EQ(srv.stats().timed_out, 0U);
    });
}

auto tally(task<bool> t, std::atomic<int>& closed, std::atomic<int>& left) -> task<void> {
    const bool was_closed = co_await std::move(t);
    if (was_closed) {
        closed.fetch_add(1, std::memory_order_relaxed);
    }
    left.fetch_sub(1, std::memory_order_release);
}

// Eight of each kind at once, while a well-behaved client goes on being served beside them.
TEST_P(hostile_clients, many_at_once_closed_while_a_good_client_is_served) {
    run(hostile_options(), [](socket_address addr, server& srv) -> task<void> {
        constexpr int each = 8;
        std::atomic<int> closed{0};
        std::atomic<int> hostile_left{4 * each};
        int served = 0;
        int failed = 0;
        co_await with_scope([&](scope& s) -> task<void> {
            for (int i = 0; i < each; ++i) {
                s.spawn([&]() -> task<void> {
                    co_await tally(trickled_head_client(addr), closed, hostile_left);
                });
                s.spawn([&]() -> task<void> {
                    co_await tally(trickled_body_client(addr), closed, hostile_left);
                });
                s.spawn([&]() -> task<void> {
                    co_await tally(request_and_a_partial_one_client(addr), closed, hostile_left);
                });
                s.spawn([&]() -> task<void> {
                    co_await tally(non_reading_client(addr, srv, 4 * each), closed, hostile_left);
                });
            }
            auto good = (co_await client::connect(addr)).value();
            while (hostile_left.load(std::memory_order_acquire) > 0) {
                auto r = co_await good.get("/");
                if (r && r->status == 200 && r->body == "Hello, World!"sv) {
                    ++served;
                } else {
                    ++failed;
                    break;
                }
                (void)co_await sleep_for(5ms);
            }
        });
        EXPECT_EQ(closed.load(), 4 * each);
        EXPECT_GT(served, 0);
        EXPECT_EQ(failed, 0);
    });
}

INSTANTIATE_TEST_SUITE_P(
    backends,
    hostile_clients,
    ::testing::Combine(::testing::Values(io_backend::io_uring, io_backend::epoll),
                       ::testing::Bool()),
    [](const ::testing::TestParamInfo<mode>& i) {
        std::string s = std::get<0>(i.param) == io_backend::io_uring ? "io_uring" : "epoll";
        return s + (std::get<1>(i.param) ? "_stealing" : "_per_core");
    });

}  // namespace
}  // namespace weft::http::test
