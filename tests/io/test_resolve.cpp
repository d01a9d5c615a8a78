// weft::resolve against a name server of the test's own (dns_responder), on both reactors.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>

#include "backend_test.hpp"
#include "dns_responder.hpp"
#include "io_waits.hpp"
#include "weft/core/scope.hpp"
#include "weft/io/resolve.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"

namespace {

using namespace std::chrono_literals;
using weft::test::dns_responder;

class resolve : public weft::test::backend_test {};

/// Runs `body(responder)` beside the responder's serving task, then stops the responder.
template <typename Body>
auto with_responder(dns_responder& dns, Body body) -> weft::task<void> {
    co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
        s.spawn(dns.serve());
        co_await body();
        s.request_stop();
    });
}

auto has(const std::vector<weft::socket_address>& v, const std::string& text) -> bool {
    return std::any_of(v.begin(), v.end(), [&](const auto& a) { return a.to_string() == text; });
}

TEST_P(resolve, numeric_addresses_bypass_dns) {
    weft::runtime rt{options()};
    dns_responder dns;
    rt.block_on(with_responder(dns, [&]() -> weft::task<void> {
        const weft::resolve_options o{.servers = dns.servers()};
        auto v4 = co_await weft::resolve("10.1.2.3", 80, o);
        auto v6 = co_await weft::resolve("[::1]", 81, o);
        auto v6bare = co_await weft::resolve("fe80::1", 82, o);
        EXPECT_TRUE(v4 && v4->size() == 1 && has(*v4, "10.1.2.3:80"));
        EXPECT_TRUE(v6 && v6->size() == 1 && has(*v6, "[::1]:81"));
        EXPECT_TRUE(v6bare && v6bare->size() == 1);
    }));
    EXPECT_EQ(dns.total_questions(), 0);
}

TEST_P(resolve, localhost_is_loopback_without_asking_a_server) {
    weft::runtime rt{options()};
    dns_responder dns;
    rt.block_on(with_responder(dns, [&]() -> weft::task<void> {
        const weft::resolve_options o{.servers = dns.servers()};
        auto r = co_await weft::resolve("localhost", 8080, o);
        auto sub = co_await weft::resolve("api.LOCALHOST", 8080, o);
        EXPECT_TRUE(r && has(*r, "127.0.0.1:8080") && has(*r, "[::1]:8080"));
        EXPECT_TRUE(sub && has(*sub, "127.0.0.1:8080"));
    }));
    EXPECT_EQ(dns.total_questions(), 0);
}

TEST_P(resolve, answers_carry_both_families_and_the_port) {
    weft::runtime rt{options()};
    dns_responder dns;
    dns.add("both.weft.test", {.a = {"192.0.2.7"}, .aaaa = {"2001:db8::7"}});
    dns.add("v4only.weft.test", {.a = {"192.0.2.8", "192.0.2.9"}});
    rt.block_on(with_responder(dns, [&]() -> weft::task<void> {
        const weft::resolve_options o{.servers = dns.servers()};
        auto both = co_await weft::resolve("both.weft.test", 443, o);
        EXPECT_TRUE(both) << both.message();
        if (both) {
            EXPECT_EQ(both->size(), 2U);
            EXPECT_TRUE(has(*both, "192.0.2.7:443"));
            EXPECT_TRUE(has(*both, "[2001:db8::7]:443"));
        }
        weft::resolve_options only4 = o;
        only4.family = AF_INET;
        auto v4 = co_await weft::resolve("v4only.weft.test", 80, only4);
        EXPECT_TRUE(v4 && v4->size() == 2 && has(*v4, "192.0.2.9:80"));
    }));
}

TEST_P(resolve, nxdomain_is_an_error_naming_the_host) {
    weft::runtime rt{options()};
    dns_responder dns;
    rt.block_on(with_responder(dns, [&]() -> weft::task<void> {
        const weft::resolve_options o{.servers = dns.servers()};
        auto r = co_await weft::resolve("missing.weft.test", 80, o);
        EXPECT_FALSE(r);
        EXPECT_EQ(r.error(), weft::resolve_errc::not_found);
        EXPECT_EQ(r.host(), "missing.weft.test");
        EXPECT_NE(r.message().find("missing.weft.test"), std::string::npos) << r.message();
        try {
            (void)r.value();
            ADD_FAILURE() << "value() of an error did not throw";
        } catch (const std::system_error& e) {
            EXPECT_NE(std::string(e.what()).find("missing.weft.test"), std::string::npos);
        }
    }));
    EXPECT_GE(dns.questions("missing.weft.test"), 1);
}

TEST_P(resolve, a_server_that_never_answers_times_out) {
    weft::runtime rt{options()};
    dns_responder dns;
    dns.add("silent.weft.test", {.silent = true});
    rt.block_on(with_responder(dns, [&]() -> weft::task<void> {
        const weft::resolve_options o{
            .servers = dns.servers(), .timeout = 300ms, .attempt_timeout = 100ms};
        auto r = co_await weft::resolve("silent.weft.test", 80, o);
        EXPECT_EQ(r.error(), weft::resolve_errc::timed_out);
        EXPECT_EQ(r.error(), std::errc::timed_out);  // the generic condition too
    }));
    EXPECT_GE(dns.questions("silent.weft.test"), 2);  // retried: more than one question
}

TEST_P(resolve, a_pending_lookup_is_cancelled) {
    weft::runtime rt{options()};
    dns_responder dns;
    dns.add("silent.weft.test", {.silent = true});
    std::error_code ec;
    rt.block_on(with_responder(dns, [&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {
                const weft::resolve_options o{.servers = dns.servers(), .timeout = 60s};
                auto r = co_await weft::resolve("silent.weft.test", 80, o);
                ec = r.error();
            });
            co_await weft::test::until([&] { return dns.total_questions() >= 1; });
            s.request_stop();
        });
    }));
    EXPECT_EQ(ec, std::errc::operation_canceled);
}

TEST_P(resolve, waiting_on_a_server_leaves_the_worker_free) {
    weft::runtime rt{options(1)};  // one worker: a blocked worker would stop the ticker
    dns_responder dns;
    dns.add("silent.weft.test", {.silent = true});
    int ticks = 0;
    rt.block_on(with_responder(dns, [&]() -> weft::task<void> {
        std::atomic<bool> done{false};
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {
                const weft::resolve_options o{.servers = dns.servers(), .timeout = 200ms};
                (void)co_await weft::resolve("silent.weft.test", 80, o);
                done = true;
            });
            while (!done) {
                (void)co_await weft::sleep_for(5ms);
                ++ticks;
            }
        });
    }));
    EXPECT_GE(ticks, 2);
}

TEST_P(resolve, answers_are_cached_for_their_ttl) {
    weft::runtime rt{options()};
    dns_responder dns;
    dns.add("cached.weft.test", {.a = {"192.0.2.1"}, .aaaa = {"2001:db8::1"}, .ttl = 300});
    dns.add("expired.weft.test", {.a = {"192.0.2.2"}, .aaaa = {"2001:db8::2"}, .ttl = 0});
    dns.add("capped.weft.test", {.a = {"192.0.2.3"}, .ttl = 300});
    rt.block_on(with_responder(dns, [&]() -> weft::task<void> {
        const weft::resolve_options o{.servers = dns.servers()};
        for (int i = 0; i < 3; ++i) {
            auto a =
                co_await weft::resolve("cached.weft.test", static_cast<std::uint16_t>(80 + i), o);
            EXPECT_TRUE(a && has(*a, "192.0.2.1:" + std::to_string(80 + i)));  // port per call
            auto b = co_await weft::resolve("expired.weft.test", 80, o);
            EXPECT_TRUE(b);
            weft::resolve_options no_cache = o;
            no_cache.max_ttl = 0s;
            auto c = co_await weft::resolve("capped.weft.test", 80, no_cache);
            EXPECT_TRUE(c);
        }
    }));
    EXPECT_EQ(dns.questions("cached.weft.test"), 2);   // A and AAAA once
    EXPECT_EQ(dns.questions("expired.weft.test"), 6);  // TTL 0: asked every time
    EXPECT_EQ(dns.questions("capped.weft.test"), 6);   // max_ttl 0: nothing kept
}

TEST_P(resolve, a_cached_answer_expires) {
    weft::runtime rt{options()};
    dns_responder dns;
    dns.add("short.weft.test", {.a = {"192.0.2.4"}, .ttl = 1});
    rt.block_on(with_responder(dns, [&]() -> weft::task<void> {
        const weft::resolve_options o{.servers = dns.servers(), .family = AF_INET};
        EXPECT_TRUE(co_await weft::resolve("short.weft.test", 80, o));
        EXPECT_TRUE(co_await weft::resolve("short.weft.test", 80, o));
        EXPECT_EQ(dns.questions("short.weft.test"), 1);  // the second was a hit
        (void)co_await weft::sleep_for(1100ms);          // past the 1 s TTL
        EXPECT_TRUE(co_await weft::resolve("short.weft.test", 80, o));
        EXPECT_EQ(dns.questions("short.weft.test"), 2);  // expired: asked again
    }));
}

TEST_P(resolve, malformed_servers_and_names_are_errors) {
    weft::runtime rt{options()};
    rt.block_on([]() -> weft::task<void> {
        const weft::resolve_options o{.servers = "not an address"};
        auto bad = co_await weft::resolve("x.weft.test", 80, o);
        EXPECT_EQ(bad.error(), weft::resolve_errc::bad_servers);
        auto empty = co_await weft::resolve("", 80);
        EXPECT_EQ(empty.error(), weft::resolve_errc::bad_name);
    }());
}

WEFT_TEST_ON_BOTH_BACKENDS(resolve);

}  // namespace
