// HTTP/2's known attacks against http::server, on both backends, each closed or refused with
// bounded work: rapid reset (CVE-2023-44487), a CONTINUATION flood, an HPACK bomb, SETTINGS and
// PING floods from a client that never reads, a client that never opens its window, and
// streams past the concurrency limit. Timeouts are short; the tests assert what was closed,
// refused or answered (and how many handlers ran), never when. The cases that end at a timeout
// (a peer that never reads, a window never opened) run on weft::testing's simulated network and
// test clock: they take no wall time.

#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "backend_test.hpp"
#include "h2_peer.hpp"
#include "weft/core/scope.hpp"
#include "weft/http/server.hpp"
#include "weft/io/tcp_listener.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sync/event.hpp"
#include "weft/testing/sim_network.hpp"
#include "weft/testing/test_clock.hpp"

namespace weft::http::test {
namespace {

using namespace std::chrono_literals;
namespace wt = weft::test;

constexpr std::uint32_t enhance_your_calm = 0xb;
constexpr std::uint32_t refused_stream = 0x7;
constexpr std::uint32_t cancel = 0x8;

auto hostile_options() -> server_options {
    server_options o;
    o.send_timeout = 100ms;
    o.body_timeout = 300ms;
    o.min_rate_grace = 100ms;
    o.keep_alive_timeout = 1h;
    o.drain_timeout = 200ms;
    return o;
}

class http2_hostile : public wt::backend_test {
protected:
    std::atomic<int> handled_{0};
    event release_;
    server_stats stats_;

    void add_routes(server& srv) {
        srv.route(method::get, "/", [this](request&) -> task<response> {
            handled_.fetch_add(1);
            co_return response::text("Hello, World!");
        });
        srv.route(method::get, "/wait", [this](request&) -> task<response> {
            handled_.fetch_add(1);
            (void)co_await release_.wait();
            co_return response::text("released");
        });
        srv.route(method::get, "/big", [](request&) -> task<response> {
            co_return response::text(std::string(1024 * 1024, 'z'));
        });
    }

    // run(), with the server on a simulated network (host "server", port 80) whose connections
    // hold 64 KiB each way, and the runtime on a test clock: its timeouts take no wall time.
    template <typename Body>
    void run_on_test_clock(server_options o, Body body) {
        runtime_options ro = options(1);
        ro.clock = testing::test_clock_runtime().clock;
        runtime rt{ro};
        rt.block_on([&]() -> task<void> {
            testing::sim_network net{{.latency = 1ms, .buffer_bytes = 64 * 1024}};
            server srv{std::move(o)};
            add_routes(srv);
            auto l = net.listen("server", 80);
            co_await with_scope([&](scope& s) -> task<void> {
                s.spawn(srv.serve(*l));
                co_await body(net, srv);
                release_.set();
                co_await srv.shutdown();
            });
            stats_ = srv.stats();
        }());
    }

    template <typename Body>
    void run(server_options o, Body body) {
        runtime rt{options()};
        rt.block_on([&]() -> task<void> {
            server srv{std::move(o)};
            add_routes(srv);
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

// Sends `chunk` until a write fails (the server closed) or `max_bytes` went out: true when the
// server closed first. Reads nothing.
template <typename Stream>
auto flood(Stream& s, const std::string& chunk, std::size_t max_bytes) -> task<bool> {
    h2_peer p{s};
    for (std::size_t sent = 0; sent < max_bytes; sent += chunk.size()) {
        auto w = co_await with_timeout(20s, p.send(chunk));
        if (!w || !*w) {
            co_return w.has_value();  // closed, not hung
        }
    }
    co_return false;
}

TEST_P(http2_hostile, rapid_reset_is_goaway_enhance_your_calm) {
    const int pairs = 2000;
    bool closed = false;
    std::uint32_t goaway = UINT32_MAX;
    server_options o = hostile_options();
    run(o, [&](socket_address addr, server&) -> task<void> {
        auto s = (co_await tcp_stream::connect(addr)).value();
        h2_peer p{s};
        (co_await p.start()).value();
        (co_await p.settle()).value();  // the reader below writes nothing more
        co_await with_scope([&](scope& sc) -> task<void> {
            sc.spawn([&]() -> task<void> {
                closed = co_await p.read_until_close();
                goaway = p.goaway_code;
            });
            std::string batch;
            for (int i = 0; i < pairs; ++i) {
                const std::int32_t id = 2 * i + 1;
                batch +=
                    frame(f_headers, end_headers | end_stream, id, p.request_block("GET", "/wait"));
                batch += rst_stream(id, cancel);
                if (i % 20 == 19) {
                    auto w = co_await p.send(batch);
                    batch.clear();
                    if (!w) {
                        break;  // closed by the server
                    }
                }
            }
        });
    });
    EXPECT_TRUE(closed);
    EXPECT_EQ(goaway, enhance_your_calm);
    // Handlers ran for at most the concurrency limit (a reset stream's handler still counts).
    EXPECT_LE(handled_.load(), static_cast<int>(o.http2.max_concurrent_streams));
}

TEST_P(http2_hostile, continuation_flood_is_goaway_enhance_your_calm) {
    bool closed = false;
    std::uint32_t goaway = UINT32_MAX;
    run(hostile_options(), [&](socket_address addr, server&) -> task<void> {
        auto s = (co_await tcp_stream::connect(addr)).value();
        h2_peer p{s};
        (co_await p.start()).value();
        (co_await p.settle()).value();  // the reader below writes nothing more
        co_await with_scope([&](scope& sc) -> task<void> {
            sc.spawn([&]() -> task<void> {
                closed = co_await p.read_until_close();
                goaway = p.goaway_code;
            });
            // A header block that never ends: HEADERS without END_HEADERS, then CONTINUATION
            // frames of small literal fields ("x: y", not indexed) forever.
            (void)co_await p.send(frame(f_headers, 0, 1, p.request_block("GET", "/")));
            std::string fields;
            for (int i = 0; i < 100; ++i) {
                fields += std::string{"\x00\x01x\x01y", 5};
            }
            std::string batch;
            for (int i = 0; i < 20; ++i) {
                batch += frame(f_continuation, 0, 1, fields);
            }
            for (int i = 0; i < 1000; ++i) {  // up to 20,000 frames, 10 MB
                auto w = co_await p.send(batch);
                if (!w) {
                    break;
                }
            }
        });
    });
    EXPECT_TRUE(closed);
    EXPECT_EQ(goaway, enhance_your_calm);
    EXPECT_EQ(handled_.load(), 0);
}

TEST_P(http2_hostile, hpack_bomb_is_431_and_no_handler) {
    h2_peer<tcp_stream>::response bomb;
    h2_peer<tcp_stream>::response after;
    run(hostile_options(), [&](socket_address addr, server&) -> task<void> {
        auto s = (co_await tcp_stream::connect(addr)).value();
        h2_peer p{s};
        (co_await p.start()).value();
        // GET / from the static table (no dynamic entries of the peer's encoder), then one
        // 4,000-byte field into the dynamic table and 1,000 one-byte references to it: a
        // 4 KB block that decodes to 4 MB.
        const std::string get = std::string{"\x82\x86\x84\x01\x09", 5} + "localhost";
        std::string block = get;
        block += std::string{"\x40\x06", 2} + "x-bomb" + std::string{"\x7f\xa1\x1e", 3} +
                 std::string(4000, 'a');
        block += std::string(1000, '\xbe');  // indexed: dynamic entry 62, the newest
        std::string frames = frame(f_headers, end_stream, 1, block.substr(0, 4000));
        frames += frame(f_continuation, end_headers, 1, block.substr(4000));
        (co_await p.send(frames)).value();
        bomb = (co_await p.read_response(1)).value();
        (co_await p.send(frame(f_headers, end_headers | end_stream, 3, get))).value();
        after = (co_await p.read_response(3)).value();
    });
    EXPECT_EQ(bomb.status, 431);
    EXPECT_EQ(after.status, 200);  // the connection and its HPACK state are intact
    EXPECT_EQ(handled_.load(), 1);
}

// A client that floods frames that each owe an answer (PING, SETTINGS: an ACK) and never
// reads: once its socket holds no more, the server's writes wait, its reads with them, and the
// send timeout closes the connection. Acks owed are bounded by what one receive holds.
TEST_P(http2_hostile, ping_flood_never_read_is_closed) {
    bool closed = false;
    run_on_test_clock(hostile_options(), [&](testing::sim_network& net, server&) -> task<void> {
        auto c = (co_await net.connect("client", "server", 80)).value();
        byte_stream& s = *c;
        h2_peer p{s};
        (co_await p.start()).value();
        std::string chunk;
        for (int i = 0; i < 1000; ++i) {
            chunk += frame(f_ping, 0, 0, "12345678");
        }
        closed = co_await flood(s, chunk, 256 * 1024 * 1024);
    });
    EXPECT_TRUE(closed);
    EXPECT_GE(stats_.timed_out, 1U);
}

TEST_P(http2_hostile, settings_flood_never_read_is_closed) {
    bool closed = false;
    run_on_test_clock(hostile_options(), [&](testing::sim_network& net, server&) -> task<void> {
        auto c = (co_await net.connect("client", "server", 80)).value();
        byte_stream& s = *c;
        h2_peer p{s};
        (co_await p.start()).value();
        std::string chunk;
        for (int i = 0; i < 1000; ++i) {
            chunk += settings({{0x4, 65535}});
        }
        closed = co_await flood(s, chunk, 256 * 1024 * 1024);
    });
    EXPECT_TRUE(closed);
    EXPECT_GE(stats_.timed_out, 1U);
}

// A request the server answers without running a handler (CONNECT: 501) whose client goes
// on sending a body: the server discards that data and gives its window back, rather than
// holding it unread (and the stream's window shut) until the stream ends.
TEST_P(http2_hostile, data_after_an_answer_without_a_handler_is_discarded) {
    int status = 0;
    std::uint64_t given_back = 0;  // WINDOW_UPDATE increments, stream 1 and the connection
    run_on_test_clock(hostile_options(), [&](testing::sim_network& net, server&) -> task<void> {
        auto c = (co_await net.connect("client", "server", 80)).value();
        byte_stream& s = *c;
        h2_peer p{s};
        (co_await p.start()).value();
        (co_await p.settle()).value();
        // :method CONNECT and :authority (HPACK literals with the static table's names 2 and
        // 1), no :scheme or :path, and no END_STREAM: a tunnel's first bytes would follow.
        const std::string block = std::string{"\x02\x07"} + "CONNECT" + "\x01\x0a" + "server:443";
        (co_await p.send(frame(f_headers, end_headers, 1, block))).value();
        for (;;) {
            auto f = (co_await p.read_frame(20s)).value();
            if (f.type == f_headers && f.stream == 1) {
                header_list h;
                if (p.decode(f.payload, h) && !h.empty()) {
                    status = std::stoi(h.front().second);
                }
            }
            if (f.stream == 1 && (f.flags & end_stream) != 0) {
                break;  // the answer is complete
            }
        }
        const std::string piece(16 * 1024, 'd');
        for (int i = 0; i < 3; ++i) {
            (co_await p.send(frame(f_data, 0, 1, piece))).value();
        }
        while (given_back < 32 * 1024) {
            auto f = co_await p.read_frame(20s);
            if (!f) {
                break;  // timed out (test time) or closed: the window was not given back
            }
            if (f->type == f_window_update && (f->stream == 1 || f->stream == 0)) {
                given_back += get_u32(f->payload, 0) & 0x7fffffffU;
            }
        }
    });
    EXPECT_EQ(status, 501);
    EXPECT_GE(given_back, 32U * 1024);
    EXPECT_EQ(handled_.load(), 0);
}

TEST_P(http2_hostile, zero_window_stall_times_out) {
    bool closed = false;
    std::size_t data = 0;
    run_on_test_clock(hostile_options(), [&](testing::sim_network& net, server&) -> task<void> {
        auto c = (co_await net.connect("client", "server", 80)).value();
        byte_stream& s = *c;
        h2_peer p{s};
        std::vector<std::pair<std::uint16_t, std::uint32_t>> closed_window = {{0x4, 0}};
        (co_await p.start(closed_window)).value();  // INITIAL_WINDOW_SIZE 0, never raised
        (co_await p.send_request(1, "GET", "/big")).value();
        for (;;) {
            auto f = co_await p.read_frame(20s);
            if (!f) {
                closed = f.error() != std::errc::timed_out;
                break;
            }
            if (f->type == f_data) {
                data += f->payload.size();
            }
            if (f->type == f_settings && (f->flags & ack) == 0) {
                (void)co_await p.send(frame(f_settings, ack, 0, ""));
            }
        }
    });
    EXPECT_TRUE(closed);
    EXPECT_EQ(data, 0U);
    EXPECT_GE(stats_.timed_out, 1U);
}

TEST_P(http2_hostile, streams_past_the_limit_are_refused) {
    int refused = 0;
    int answered = 0;
    server_options o = hostile_options();
    o.http2.max_concurrent_streams = 4;
    run(o, [&](socket_address addr, server&) -> task<void> {
        auto s = (co_await tcp_stream::connect(addr)).value();
        h2_peer p{s};
        (co_await p.start()).value();
        std::string all;
        for (std::int32_t id = 1; id <= 19; id += 2) {  // 10 streams, each held by its handler
            all += frame(f_headers, end_headers | end_stream, id, p.request_block("GET", "/wait"));
        }
        (co_await p.send(all)).value();
        // The refusals come while the admitted handlers wait; then they are let go.
        std::vector<std::int32_t> admitted;
        while (refused < 6) {
            auto f = (co_await p.read_frame()).value();
            if (f.type == f_rst && get_u32(f.payload) == refused_stream) {
                ++refused;
            }
            (co_await p.on_frame(f)).value();
        }
        release_.set();
        for (std::int32_t id = 1; id <= 19; id += 2) {
            auto r = (co_await p.read_response(id)).value();
            answered += r.status == 200 ? 1 : 0;
        }
    });
    EXPECT_EQ(refused, 6);
    EXPECT_EQ(answered, 4);
    EXPECT_EQ(handled_.load(), 4);
}

WEFT_TEST_ON_BOTH_BACKENDS(http2_hostile);

}  // namespace
}  // namespace weft::http::test
