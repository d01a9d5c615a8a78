// weft::testing's test clock: timers of a runtime on it follow a clock that moves only when
// the runtime is idle (auto-advance) or inside advance(). The tests assert what fired, in
// which order and what the clock read; none depends on the wall clock.

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "weft/bus/errc.hpp"
#include "weft/bus/memory_broker.hpp"
#include "weft/bus/publisher.hpp"
#include "weft/bus/subscriber.hpp"
#include "weft/core/join_handle.hpp"
#include "weft/core/scope.hpp"
#include "weft/http.hpp"
#include "weft/io/tcp_listener.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"
#include "weft/sched/yield.hpp"
#include "weft/sync/event.hpp"
#include "weft/testing/test_clock.hpp"

namespace {

using namespace std::chrono_literals;
using weft::runtime_clock;
using weft::task;

TEST(test_clock, advance_fires_what_is_due_in_deadline_order) {
    weft::runtime rt{weft::testing::test_clock_runtime({.auto_advance = false})};
    rt.block_on([]() -> task<void> {
        const auto start = runtime_clock::now();
        std::mutex mu;
        std::vector<int> fired;
        std::vector<weft::join_handle<void>> sleepers;
        for (int ms : {30, 10, 20, 40}) {
            sleepers.push_back(weft::spawn([&, ms]() -> task<void> {
                (co_await weft::sleep_for(std::chrono::milliseconds(ms))).value();
                std::lock_guard lock(mu);
                fired.push_back(ms);
                // A wave runs before time moves on: the clock reads this timer's deadline.
                EXPECT_EQ(runtime_clock::now() - start, std::chrono::milliseconds(ms));
            }));
        }
        for (int i = 0; i < 8; ++i) {
            co_await weft::yield();  // paused: nothing is due however long they run
        }
        EXPECT_TRUE(fired.empty());
        EXPECT_EQ(runtime_clock::now(), start);
        co_await weft::testing::advance(25ms);
        EXPECT_EQ(fired, (std::vector<int>{10, 20}));
        EXPECT_EQ(runtime_clock::now() - start, 25ms);
        co_await weft::testing::advance(15ms);
        EXPECT_EQ(fired, (std::vector<int>{10, 20, 30, 40}));
        for (auto& h : sleepers) {
            co_await std::move(h);
        }
    }());
}

TEST(test_clock, auto_advance_jumps_to_the_next_deadline_when_idle) {
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on([]() -> task<void> {
        const auto start = runtime_clock::now();
        (co_await weft::sleep_for(2h)).value();
        EXPECT_EQ(runtime_clock::now() - start, 2h);
        weft::deadline_timer dl;
        dl.expires_after(90s);
        EXPECT_FALSE(dl.expired());
        (co_await dl.wait()).value();
        EXPECT_TRUE(dl.expired());
        EXPECT_EQ(runtime_clock::now() - start, 2h + 90s);
    }());
}

TEST(test_clock, with_timeout_times_out_on_the_test_clock) {
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on([]() -> task<void> {
        const auto start = runtime_clock::now();
        weft::event never;
        auto r = co_await weft::with_timeout(
            10min, [&]() -> task<void> { (co_await never.wait()).value(); }());
        EXPECT_EQ(r.error(), std::errc::timed_out);
        EXPECT_EQ(runtime_clock::now() - start, 10min);
        // Work that finishes first is not timed out: the clock stops at its own deadline.
        auto ok = co_await weft::with_timeout(10min, []() -> task<int> {
            (co_await weft::sleep_for(1min)).value();
            co_return 7;
        }());
        EXPECT_EQ(ok.value(), 7);
        EXPECT_EQ(runtime_clock::now() - start, 11min);
    }());
}

TEST(test_clock, steady_clock_runtime_is_untouched) {
    weft::runtime rt{{.workers = 1}};
    rt.block_on([]() -> task<void> {
        EXPECT_EQ(weft::runtime_clock::manual(), nullptr);
        const auto before = std::chrono::steady_clock::now();
        (co_await weft::sleep_for(2ms)).value();
        EXPECT_GE(runtime_clock::now(), before + 2ms);
        co_return;
    }());
    EXPECT_THROW(rt.block_on(weft::testing::advance(1ms)), std::logic_error);
}

// A delivery left unsettled comes back after the subscriber's ten-minute ack timeout, in
// order behind what was acked meanwhile; with auto-advance the wait costs no wall time.
TEST(test_clock, ten_minute_ack_timeout_redelivers_on_the_memory_broker) {
    weft::bus::memory_broker broker;
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on([&]() -> task<void> {
        using namespace weft::bus;
        const auto start = runtime_clock::now();
        publisher pub{broker};
        subscriber sub{broker, {.ack_wait = 10min}};
        for (const char* p : {"A", "B"}) {
            envelope e;
            e.topic = "orders";
            e.key = "k";
            e.payload = p;
            (co_await pub.publish(std::move(e))).value();
        }
        auto s = (co_await sub.subscribe("orders", "g")).value();
        auto a = (co_await s.next()).value();  // left unsettled
        auto b = (co_await s.next()).value();
        EXPECT_TRUE(b.ack());
        auto again = (co_await s.next()).value();
        EXPECT_EQ(again.message().payload, "A");
        EXPECT_EQ(again.attempt(), 2U);
        EXPECT_EQ(a.ack().error(), bus_errc::not_pending);
        EXPECT_GE(runtime_clock::now() - start, 10min);
        EXPECT_TRUE(again.ack());
        (co_await pub.close()).value();
    }());
}

// The HTTP server's header timeout runs on the runtime's clock: a client that sends half a
// head is dropped when the test clock reaches the timeout, and not before.
TEST(test_clock, http_header_timeout_follows_the_test_clock) {
    weft::runtime rt{weft::testing::test_clock_runtime({.auto_advance = false})};
    rt.block_on([]() -> task<void> {
        using namespace weft::http;
        server_options o;
        o.header_timeout = 30s;
        server srv{std::move(o)};
        srv.route(method::get, "/",
                  [](request&) -> task<response> { co_return response::text("hi"); });
        auto l =
            weft::tcp_listener::bind(weft::socket_address::parse("127.0.0.1", 0).value()).value();
        const auto addr = l.local_address().value();
        co_await weft::with_scope([&](weft::scope& sc) -> task<void> {
            sc.spawn(srv.serve(l));
            auto c = (co_await client::connect(addr)).value();
            (co_await c.send_raw("GET / HTTP/1.1\r\nHost:")).value();
            co_await weft::testing::advance(29s);
            EXPECT_EQ(srv.stats().timed_out, 0U);
            co_await weft::testing::advance(2s);
            auto rest = co_await c.read_until_close();  // closed; nothing is answered
            EXPECT_TRUE(rest.has_value() && rest->empty());
            EXPECT_EQ(srv.stats().timed_out, 1U);
            co_await srv.shutdown();
        });
    }());
}

}  // namespace
