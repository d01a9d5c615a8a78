// weft::testing's simulated network: latency, partitions, resets, half-close and byte-by-byte
// delivery on the runtime's test clock, and weft's HTTP server and client running on it under
// those faults on the seeded runtime. Times asserted are the test clock's readings, never the
// wall clock's.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "weft/core/scope.hpp"
#include "weft/http.hpp"
#include "weft/io/error.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/runtime_clock.hpp"
#include "weft/sched/timer.hpp"
#include "weft/testing/seeds.hpp"
#include "weft/testing/sim_network.hpp"
#include "weft/testing/test_clock.hpp"

namespace {

using namespace std::chrono_literals;
using weft::runtime_clock;
using weft::task;
using weft::testing::sim_network;

auto as_bytes(std::string_view s) -> std::span<const std::byte> {
    return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

auto text_of(const weft::bytes& b) -> std::string {
    return {reinterpret_cast<const char*>(b.data()), b.size()};
}

// Reads until eof (or an error, returned as such).
auto read_to_end(weft::byte_stream& s) -> task<weft::result<std::string>> {
    std::string all;
    for (;;) {
        auto b = co_await s.receive();
        if (!b) {
            if (b.error() == weft::io_errc::eof) {
                co_return all;
            }
            co_return b.error();
        }
        all += text_of(*b);
    }
}

TEST(sim_network, latency_delays_each_write_on_the_test_clock) {
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on([]() -> task<void> {
        sim_network net{{.latency = 20ms}};
        auto l = net.listen("server", 80);
        const auto start = runtime_clock::now();
        auto c = (co_await net.connect("client", "server", 80)).value();
        EXPECT_EQ(runtime_clock::now() - start, 40ms);  // one round trip
        auto s = (co_await l->accept()).value();
        (co_await c->write_all(as_bytes("ping"))).value();
        const auto sent = runtime_clock::now();
        auto got = (co_await s->receive()).value();
        EXPECT_EQ(text_of(got), "ping");
        EXPECT_EQ(runtime_clock::now() - sent, 20ms);
        EXPECT_EQ(c->peer_address().value().to_string(), "10.0.0.1:80");  // "server" came first
        EXPECT_EQ(s->peer_address().value().to_string(), "10.0.0.2:40000");
    }());
}

TEST(sim_network, byte_by_byte_gives_one_byte_per_receive) {
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on([]() -> task<void> {
        sim_network net{{.byte_by_byte = true}};
        auto l = net.listen("server", 80);
        auto c = (co_await net.connect("client", "server", 80)).value();
        auto s = (co_await l->accept()).value();
        (co_await c->write_all(as_bytes("hello"))).value();
        (void)c->shutdown_write();
        std::vector<std::size_t> sizes;
        std::string all;
        for (;;) {
            auto b = co_await s->receive();
            if (!b) {
                EXPECT_EQ(b.error(), weft::io_errc::eof);
                break;
            }
            sizes.push_back(b->size());
            all += text_of(*b);
        }
        EXPECT_EQ(all, "hello");
        EXPECT_EQ(sizes, (std::vector<std::size_t>(5, 1)));
    }());
}

TEST(sim_network, a_partition_holds_bytes_in_flight_until_it_heals) {
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on([]() -> task<void> {
        sim_network net;
        auto l = net.listen("server", 80);
        auto c = (co_await net.connect("client", "server", 80)).value();
        auto s = (co_await l->accept()).value();
        net.partition("client", "server");
        (co_await c->write_all(as_bytes("held"))).value();
        // Nothing crosses: the read times out on the test clock.
        auto r = co_await weft::with_timeout(10s, s->receive());
        EXPECT_FALSE(r);
        if (r) {
            co_return;
        }
        EXPECT_EQ(r.error(), std::errc::timed_out);
        EXPECT_EQ((co_await net.connect("client", "server", 80)).error(),
                  std::errc::network_unreachable);
        net.heal("client", "server");
        auto got = (co_await s->receive()).value();
        EXPECT_EQ(text_of(got), "held");
    }());
}

TEST(sim_network, a_reset_fails_both_ends_and_a_write_to_a_closed_peer_resets) {
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on([]() -> task<void> {
        sim_network net;
        auto l = net.listen("server", 80);
        auto c = (co_await net.connect("client", "server", 80)).value();
        auto s = (co_await l->accept()).value();
        (co_await c->write_all(as_bytes("lost"))).value();
        net.reset("server", "client");
        EXPECT_EQ((co_await s->receive()).error(), std::errc::connection_reset);
        EXPECT_EQ((co_await c->write_all(as_bytes("x"))).error(), std::errc::connection_reset);

        auto c2 = (co_await net.connect("client", "server", 80)).value();
        auto s2 = (co_await l->accept()).value();
        s2.reset();  // closed: the client reads eof, and its next write is answered by a reset
        EXPECT_EQ((co_await c2->receive()).error(), weft::io_errc::eof);
        EXPECT_EQ((co_await c2->write_all(as_bytes("x"))).error(), std::errc::connection_reset);
        EXPECT_EQ((co_await c2->receive()).error(), std::errc::connection_reset);
        EXPECT_EQ((co_await net.connect("client", "server", 81)).error(),
                  std::errc::connection_refused);
    }());
}

TEST(sim_network, half_close_reads_eof_after_the_data_and_the_other_way_stays_open) {
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on([]() -> task<void> {
        sim_network net{{.latency = 5ms}};
        auto l = net.listen("server", 80);
        auto c = (co_await net.connect("client", "server", 80)).value();
        auto s = (co_await l->accept()).value();
        (co_await c->write_all(as_bytes("request"))).value();
        (c->shutdown_write()).value();
        EXPECT_EQ((co_await read_to_end(*s)).value(), "request");
        (co_await s->write_all(as_bytes("answer"))).value();
        s.reset();
        EXPECT_EQ((co_await read_to_end(*c)).value(), "answer");
    }());
}

// ---- HTTP on the simulated network ---------------------------------------------------------

auto echo_server(weft::http::server_options o = {}) -> std::unique_ptr<weft::http::server> {
    auto srv = std::make_unique<weft::http::server>(std::move(o));
    srv->route(weft::http::method::post, "/echo",
               [](weft::http::request& req) -> task<weft::http::response> {
                   auto body = co_await req.body().read_all();
                   co_return weft::http::response::text(body ? *body : std::string("?"));
               });
    return srv;
}

// The request of the byte-by-byte and determinism tests: a client on host "client" posts to
// the server on host "server" over `net`, byte by byte with 3 ms of latency; returns the body.
auto post_byte_by_byte(sim_network& net) -> task<std::string> {
    auto srv = echo_server();
    auto l = net.listen("server", 80);
    std::string body;
    co_await weft::with_scope([&](weft::scope& s) -> task<void> {
        s.spawn(srv->serve(*l));
        weft::http::client c{(co_await net.connect("client", "server", 80)).value()};
        auto r = (co_await c.request("POST", "/echo", "one byte at a time")).value();
        EXPECT_EQ(r.status, 200);
        body = r.body;
        co_await srv->shutdown();
    });
    co_return body;
}

TEST(sim_http, a_request_delivered_byte_by_byte_is_answered) {
    weft::testing::run_seeds(8,
                             [](std::uint64_t) -> task<void> {
                                 sim_network net{{.latency = 3ms, .byte_by_byte = true}};
                                 EXPECT_EQ(co_await post_byte_by_byte(net), "one byte at a time");
                                 // Every byte of the request was a receive of its own at the
                                 // server.
                                 std::size_t one_byte_receives = 0;
                                 for (const auto& e : net.trace()) {
                                     if (e.find("client>server recv 1") != std::string::npos) {
                                         ++one_byte_receives;
                                     }
                                 }
                                 EXPECT_GT(one_byte_receives, 60U);
                             },
                             {.failed = [] { return ::testing::Test::HasFailure(); }});
}

TEST(sim_http, the_same_seed_gives_the_same_trace) {
    for (std::uint64_t seed = 1; seed <= 10; ++seed) {
        std::vector<std::string> traces[2];
        for (auto& trace : traces) {
            weft::runtime rt{weft::testing::seeded_runtime(seed)};
            rt.block_on([](std::vector<std::string>& out) -> task<void> {
                sim_network net{{.latency = 2ms, .byte_by_byte = true}};
                (void)co_await post_byte_by_byte(net);
                out = net.trace();
            }(trace));
        }
        ASSERT_FALSE(traces[0].empty());
        EXPECT_EQ(traces[0], traces[1]) << "seed " << seed;
    }
}

TEST(sim_http, a_partition_mid_request_times_out_the_client_and_the_server_closes) {
    weft::testing::run_seeds(
        8,
        [](std::uint64_t) -> task<void> {
            sim_network net{{.latency = 1ms}};
            auto srv = echo_server({.header_timeout = 2s});
            auto l = net.listen("server", 80);
            co_await weft::with_scope([&](weft::scope& s) -> task<void> {
                s.spawn(srv->serve(*l));
                weft::http::client c{(co_await net.connect("client", "server", 80)).value()};
                (co_await c.send_raw("POST /echo HTTP/1.1\r\nHost: x\r\n")).value();
                (void)co_await weft::sleep_for(5ms);  // the server has the first half
                net.partition("client", "server");
                (co_await c.send_raw("Content-Length: 2\r\n\r\nhi")).value();  // held
                // The client gives up on the test clock; no wall time passes.
                auto r = co_await weft::with_timeout(30s, c.read_response());
                EXPECT_FALSE(r);
                if (r) {
                    co_return;
                }
                EXPECT_EQ(r.error(), std::errc::timed_out);
                // The server dropped the half-received request at its header timeout.
                EXPECT_EQ(srv->stats().timed_out, 1U);
                EXPECT_EQ(srv->stats().open, 0U);
                EXPECT_EQ(srv->stats().requests, 0U);
                // Once healed, the client sees the close (after what the server sent, if any).
                net.heal("client", "server");
                auto rest = co_await c.read_until_close();
                EXPECT_TRUE(rest || rest.error() == std::errc::connection_reset);
                co_await srv->shutdown();
            });
        },
        {.failed = [] { return ::testing::Test::HasFailure(); }});
}

TEST(sim_http, a_reset_mid_response_is_an_error_value_at_the_client) {
    weft::testing::run_seeds(
        8,
        [](std::uint64_t) -> task<void> {
            sim_network net{{.latency = 1ms}};
            weft::http::server srv;
            srv.route(weft::http::method::get, "/slow",
                      [&net](weft::http::request&) -> task<weft::http::response> {
                          co_return weft::http::response::stream(
                              [&net](weft::http::body_writer& w) -> task<weft::result<void>> {
                                  if (auto r = co_await w.write("first half;"); !r) {
                                      co_return r;
                                  }
                                  (void)co_await weft::sleep_for(100ms);
                                  net.reset("server", "client");
                                  co_return co_await w.write("second half");
                              },
                              22);
                      });
            auto l = net.listen("server", 80);
            co_await weft::with_scope([&](weft::scope& s) -> task<void> {
                s.spawn(srv.serve(*l));
                weft::http::client c{(co_await net.connect("client", "server", 80)).value()};
                auto r = co_await c.get("/slow");
                EXPECT_FALSE(r);
                if (r) {
                    co_return;
                }
                EXPECT_EQ(r.error(), std::errc::connection_reset);
                co_await srv.shutdown();
            });
            // The client had the head and the first half before the reset.
            bool head_arrived = false;
            for (const auto& e : net.trace()) {
                if (e.find("server>client recv") != std::string::npos) {
                    head_arrived = true;
                }
            }
            EXPECT_TRUE(head_arrived);
        },
        {.failed = [] { return ::testing::Test::HasFailure(); }});
}

TEST(sim_http, half_close_after_the_request_still_gets_the_response) {
    weft::testing::run_seeds(
        8,
        [](std::uint64_t) -> task<void> {
            sim_network net{{.latency = 2ms}};
            auto srv = echo_server();
            auto l = net.listen("server", 80);
            co_await weft::with_scope([&](weft::scope& s) -> task<void> {
                s.spawn(srv->serve(*l));
                auto c = (co_await net.connect("client", "server", 80)).value();
                (co_await c->write_all(
                     as_bytes("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")))
                    .value();
                c->shutdown_write().value();
                auto all = (co_await read_to_end(*c)).value();
                EXPECT_EQ(all.substr(0, 15), "HTTP/1.1 200 OK");
                EXPECT_TRUE(all.ends_with("\r\n\r\nhello")) << all;
                co_await srv->shutdown();
            });
        },
        {.failed = [] { return ::testing::Test::HasFailure(); }});
}

}  // namespace
