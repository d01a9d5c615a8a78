// weft::testing's simulated network: latency, partitions, resets, half-close and byte-by-byte
// delivery on the runtime's test clock. Times asserted are the test clock's readings, never the
// wall clock's.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "weft/io/error.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/runtime_clock.hpp"
#include "weft/sched/timer.hpp"
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

}  // namespace
