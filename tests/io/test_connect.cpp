// weft::connect(host, port): the order of attempts, fallback and RFC 8305 staggering, with names
// from a name server of the test's own (dns_responder), on both reactors.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend_test.hpp"
#include "dns_responder.hpp"
#include "weft/core/scope.hpp"
#include "weft/io/connect.hpp"
#include "weft/io/tcp_listener.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"

namespace {

using namespace std::chrono_literals;
using weft::test::dns_responder;

class connect : public weft::test::backend_test {};

template <typename Body>
auto with_responder(dns_responder& dns, Body body) -> weft::task<void> {
    co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
        s.spawn(dns.serve());
        co_await body();
        s.request_stop();
    });
}

auto listen_on(const char* ip, std::uint16_t port, int backlog = 64) -> weft::tcp_listener {
    return weft::tcp_listener::bind(weft::socket_address::parse(ip, port).value(),
                                    {.backlog = backlog})
        .value();
}

TEST_P(connect, a_refused_address_falls_back_to_the_next_in_order) {
    weft::runtime rt{options()};
    dns_responder dns;
    auto live = listen_on("127.0.0.1", 0);
    const auto port = live.local_address().value().port();
    // 127.0.0.2 has no listener on the port: refused.
    dns.add("fallback.weft.test", {.a = {"127.0.0.2", "127.0.0.1"}});
    rt.block_on(with_responder(dns, [&]() -> weft::task<void> {
        const weft::connect_options o{.resolve = {.servers = dns.servers()}};
        auto s = co_await weft::connect("fallback.weft.test", port, o);
        EXPECT_TRUE(s) << s.error().message();
        if (s) {
            EXPECT_EQ(s->peer_address().value().to_string(), "127.0.0.1:" + std::to_string(port));
        }
        auto accepted = co_await live.accept();
        EXPECT_TRUE(accepted);
    }));
}

TEST_P(connect, every_address_refused_gives_the_last_error) {
    weft::runtime rt{options()};
    dns_responder dns;
    dns.add("dead.weft.test", {.a = {"127.0.0.2", "127.0.0.3"}});
    rt.block_on(with_responder(dns, [&]() -> weft::task<void> {
        const weft::connect_options o{.resolve = {.servers = dns.servers()}};
        auto s = co_await weft::connect("dead.weft.test", 9, o);
        EXPECT_EQ(s.error(), std::errc::connection_refused);
        auto missing = co_await weft::connect("missing.weft.test", 9, o);
        EXPECT_EQ(missing.error(), weft::resolve_errc::not_found);
    }));
}

TEST_P(connect, ipv6_is_tried_first_when_both_families_answer) {
    weft::runtime rt{options()};
    dns_responder dns;
    auto v6 = listen_on("::1", 0);
    const auto port = v6.local_address().value().port();
    auto v4 = listen_on("127.0.0.1", port);
    dns.add("both.weft.test", {.a = {"127.0.0.1"}, .aaaa = {"::1"}});
    rt.block_on(with_responder(dns, [&]() -> weft::task<void> {
        const weft::connect_options o{.resolve = {.servers = dns.servers()}};
        auto s = co_await weft::connect("both.weft.test", port, o);
        EXPECT_TRUE(s && s->peer_address().value().family() == AF_INET6);
    }));
}

TEST_P(connect, a_refused_ipv6_address_falls_back_to_ipv4_at_once) {
    weft::runtime rt{options()};
    dns_responder dns;
    auto v4 = listen_on("127.0.0.1", 0);
    const auto port = v4.local_address().value().port();
    dns.add("v6dead.weft.test", {.a = {"127.0.0.1"}, .aaaa = {"::1"}});
    rt.block_on(with_responder(dns, [&]() -> weft::task<void> {
        // A delay longer than the guard: only the early start after a failure can make it.
        const weft::connect_options o{.resolve = {.servers = dns.servers()}, .attempt_delay = 60s};
        auto s = co_await weft::with_timeout(5s, weft::connect("v6dead.weft.test", port, o));
        EXPECT_TRUE(s && *s && (*s)->peer_address().value().family() == AF_INET);
    }));
}

TEST_P(connect, a_blackholed_ipv6_address_is_overtaken_after_the_delay) {
    weft::runtime rt{options()};
    dns_responder dns;
    // A listener that never accepts, its backlog of 0 full: the kernel drops further SYNs, so
    // a connect to it stays pending (a black hole) until its timeout.
    auto hole = listen_on("::1", 0, 0);
    const auto port = hole.local_address().value().port();
    auto v4 = listen_on("127.0.0.1", port);
    dns.add("hole.weft.test", {.a = {"127.0.0.1"}, .aaaa = {"::1"}});
    rt.block_on(with_responder(dns, [&]() -> weft::task<void> {
        const auto hole_addr = weft::socket_address::parse("::1", port).value();
        std::vector<weft::tcp_stream> fill;
        bool blackholed = false;
        for (int i = 0; i < 8 && !blackholed; ++i) {
            auto c = co_await weft::tcp_stream::connect(hole_addr, 300ms);
            if (c) {
                fill.push_back(std::move(*c));
            } else {
                blackholed = c.error() == std::errc::timed_out;
            }
        }
        EXPECT_TRUE(blackholed) << "the full backlog did not drop SYNs";
        // Sequential attempts would wait out the 60 s attempt timeout; the guard would fire.
        const weft::connect_options o{
            .resolve = {.servers = dns.servers()}, .attempt_timeout = 60s, .attempt_delay = 50ms};
        auto s = co_await weft::with_timeout(5s, weft::connect("hole.weft.test", port, o));
        EXPECT_TRUE(s && *s && (*s)->peer_address().value().family() == AF_INET);
    }));
}

WEFT_TEST_ON_BOTH_BACKENDS(connect);

}  // namespace
