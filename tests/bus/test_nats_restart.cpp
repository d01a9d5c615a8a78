// The NATS backend while its server goes away: killed (SIGKILL) or stopped, and started again by
// scripts/brokers.sh with the same store, on these tests' own private port (WEFT_NATS_RESTART_PORT,
// compiled in: never the shared fixture's server). Each test starts the server it needs and
// stops it when it ends; CTest runs them one at a time (RESOURCE_LOCK).

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bus/conformance.hpp"
#include "weft/bus/errc.hpp"
#include "weft/bus/nats_backend.hpp"
#include "weft/bus/publisher.hpp"
#include "weft/bus/subscriber.hpp"
#include "weft/core/scope.hpp"
#include "weft/io/reactor.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/spawn_blocking.hpp"
#include "weft/sched/timer.hpp"

namespace {

using namespace weft::bus;
using weft::bus::test::bus_conformance;
using namespace std::chrono_literals;
using namespace std::string_view_literals;

/// scripts/brokers.sh with this binary's own ports (compiled in; never the environment's).
/// `env`: further variables for this call ("WEFT_NATS_FRESH=1").
auto brokers(const std::string& args, const std::string& env = {}) -> int {
    const std::string cmd =
        env + " WEFT_NATS_PORT=" + std::to_string(WEFT_NATS_RESTART_PORT) +
        " WEFT_NATS_HTTP_PORT= WEFT_NATS_CLUSTER_PORT=" + std::to_string(WEFT_NATS_CLUSTER_PORT) +
        " " + WEFT_BROKERS_SH + " " + args + " >&2";
    return std::system(cmd.c_str());
}

auto port() -> std::string { return std::to_string(WEFT_NATS_RESTART_PORT); }

auto url() -> std::string { return "nats://127.0.0.1:" + port(); }

/// Starts this test's server, and stops it when the test ends, however it ends.
struct server_guard {
    server_guard() { EXPECT_EQ(brokers("start nats", "WEFT_NATS_FRESH=1"), 0); }
    server_guard(const server_guard&) = delete;
    auto operator=(const server_guard&) -> server_guard& = delete;
    ~server_guard() { brokers("stop nats"); }
};

/// The pid of this test's server (from `brokers.sh status nats`), or 0.
auto server_pid() -> pid_t {
    const std::string cmd = "WEFT_NATS_PORT=" + std::to_string(WEFT_NATS_RESTART_PORT) +
                            " WEFT_NATS_HTTP_PORT= " + WEFT_BROKERS_SH + " status nats";
    FILE* p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) {
        return 0;
    }
    std::string out;
    char buf[256];
    while (std::fgets(buf, sizeof(buf), p) != nullptr) {
        out += buf;
    }
    ::pclose(p);
    const auto at = out.find("(pid ");
    return at == std::string::npos ? 0 : static_cast<pid_t>(std::atol(out.c_str() + at + 5));
}

/// SIGSTOP on construction, SIGCONT by resume() or at the latest on destruction: the server
/// is never left stopped for the guard's `stop nats`.
struct server_stopped {
    explicit server_stopped(pid_t p) : pid(p) {
        EXPECT_EQ(::kill(pid, SIGSTOP), 0);
        // kill() returns before every thread of the server has stopped: a thread running on the
        // other CPU could still answer a few publishes. Wait until the kernel reports each of
        // its threads stopped (state T in /proc/PID/task/TID/stat).
        for (int i = 0; i < 10'000 && !stopped(); ++i) {
            std::this_thread::sleep_for(std::chrono::microseconds{100});
        }
        EXPECT_TRUE(stopped());
    }
    server_stopped(const server_stopped&) = delete;
    auto operator=(const server_stopped&) -> server_stopped& = delete;
    ~server_stopped() { resume(); }
    void resume() {
        if (pid > 0) {
            EXPECT_EQ(::kill(pid, SIGCONT), 0);
            pid = 0;
        }
    }
    [[nodiscard]] auto stopped() const -> bool {
        std::error_code ec;
        const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
        bool any = false;
        for (const auto& t : std::filesystem::directory_iterator(tasks, ec)) {
            std::ifstream in(t.path() / "stat");
            std::string line;
            std::getline(in, line);
            const auto paren = line.rfind(')');
            if (paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] != 'T') {
                return false;
            }
            any = true;
        }
        return any;
    }
    pid_t pid;
};

/// A name no earlier run used (the file store outlives runs).
auto unique() -> std::string { return message_id::generate().to_string().substr(24); }

auto options_for(const std::string& u, nats_storage storage) -> nats_backend_options {
    nats_backend_options o;
    o.url = url();
    o.streams = {nats_stream_config{
        .name = "RESTART_" + u, .subjects = {"weft.restart." + u}, .storage = storage}};
    o.publish_timeout = 2'000ms;
    return o;
}

auto make_env(std::string_view topic, std::string_view payload) -> envelope {
    envelope e;
    e.id = message_id::generate();
    e.topic = topic;
    e.type = "test.event";
    e.payload = payload;
    return e;
}

/// Publishes `env` until the broker acknowledges it (the same id each time: the server drops
/// a copy it already has); the attempts it took, or 0 when it never did within `tries`.
auto publish_until_acked(publisher& pub, envelope env, int tries) -> weft::task<int> {
    for (int i = 1; i <= tries; ++i) {
        envelope copy = env;
        auto r = co_await pub.publish(std::move(copy));
        if (r) {
            co_return i;
        }
        (void)co_await weft::sleep_for(100ms);
    }
    co_return 0;
}

auto kill_and_restart() -> weft::task<void> {
    auto r = co_await weft::spawn_blocking(
        [] { return brokers("kill nats") == 0 && brokers("start nats") == 0; });
    EXPECT_TRUE(r && *r);
}

struct after_crash {
    std::set<std::string> acked;  // acknowledged before the kill
    std::uint64_t marker_sequence = 0;
    std::set<std::string> read;  // in the stream after the restart, the marker excluded
};

// Publishes n messages to a new stream of `storage`, each acknowledged, kills the server
// (SIGKILL) and starts it on the same store; then publishes a marker and reads the stream
// from its start up to the marker (a consumer delivers a stream in order, so whatever
// survived comes before it).
auto publish_kill_restart_read(nats_storage storage, int n) -> after_crash {
    server_guard server;
    const std::string u = unique();
    const std::string topic = "weft.restart." + u;
    after_crash out;
    {
        nats_backend b{options_for(u, storage)};
        weft::runtime rt{weft::io_runtime_options(2)};
        rt.block_on([&]() -> weft::task<void> {
            publisher pub{b};
            for (int i = 0; i < n; ++i) {
                envelope e = make_env(topic, "before the crash");
                const std::string id = e.id.to_string();
                auto r = co_await pub.publish(std::move(e));
                EXPECT_TRUE(r) << r.error().message();
                if (r) {
                    out.acked.insert(id);
                }
            }
            (co_await pub.close()).value();
        }());
    }
    EXPECT_EQ(brokers("kill nats"), 0);
    EXPECT_EQ(brokers("start nats"), 0);
    nats_backend b{options_for(u, storage)};  // a memory stream that went is made again
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{b};
        envelope marker = make_env(topic, "after the restart");
        const std::string marker_id = marker.id.to_string();
        auto a = co_await pub.publish(std::move(marker));
        EXPECT_TRUE(a) << a.error().message();
        if (!a) {
            co_return;
        }
        out.marker_sequence = a->sequence;
        subscriber sub{b};
        auto s = co_await sub.subscribe(topic, "reader");
        EXPECT_TRUE(s) << s.error().message();
        if (!s) {
            co_return;
        }
        for (int i = 0; i <= n; ++i) {
            auto d = co_await s->next();
            EXPECT_TRUE(d) << d.error().message();
            if (!d) {
                break;
            }
            (void)d->ack();
            const std::string id = d->message().id.to_string();
            if (id == marker_id) {
                break;
            }
            out.read.insert(id);
        }
        s->close();
        (co_await pub.close()).value();
    }());
    return out;
}

// Back-pressure with a server that takes messages and never answers (SIGSTOP): publish_async
// returns max_pending times and then waits; in_flight() stays at max_pending, never above,
// however long the publishing task keeps trying; once the server runs again every message is
// acknowledged, each once. Counts only (the pause is far below publish_timeout).
TEST(nats_restart, publish_async_waits_at_max_pending_while_the_server_is_stopped) {
    server_guard server;
    const pid_t pid = server_pid();
    ASSERT_GT(pid, 0);
    const std::string u = unique();
    const std::string topic = "weft.restart." + u;
    nats_backend b{options_for(u, nats_storage::memory)};
    constexpr int window = 64;
    constexpr int n = 300;
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{b, {.max_pending = window}};
        auto warm = co_await pub.publish(make_env(topic, "warm-up"));
        EXPECT_TRUE(warm) << warm.error().message();
        std::atomic<int> returned{0};
        std::set<std::uint64_t> sequences;
        int ok = 0;
        server_stopped stopped{pid};
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {
                for (int i = 0; i < n; ++i) {
                    auto r = co_await pub.publish_async(make_env(topic, "held"));
                    EXPECT_TRUE(r) << r.error().message();
                    returned.fetch_add(1);
                }
            });
            for (int i = 0; i < 1000 && pub.in_flight() < window; ++i) {
                (void)co_await weft::sleep_for(1ms);
            }
            std::ptrdiff_t most = 0;
            for (int k = 0; k < 20; ++k) {  // 200 ms of the publisher trying
                (void)co_await weft::sleep_for(10ms);
                most = std::max(most, pub.in_flight());
                EXPECT_EQ(pub.in_flight(), window);
            }
            EXPECT_EQ(most, window);
            EXPECT_EQ(returned.load(), window);
            EXPECT_EQ(pub.results().size(), 0U);
            stopped.resume();
            for (int i = 0; i < n; ++i) {
                auto r = co_await pub.results().recv();
                EXPECT_TRUE(r);
                if (!r) {
                    break;
                }
                EXPECT_LE(pub.in_flight(), window);
                if (r->outcome) {
                    ++ok;
                    sequences.insert(r->outcome->sequence);
                } else {
                    ADD_FAILURE() << r->outcome.error().message();
                }
            }
        });
        EXPECT_EQ(ok, n);
        EXPECT_EQ(sequences.size(), std::size_t{n});  // each stored once
        EXPECT_EQ(returned.load(), n);
        (co_await pub.close()).value();
    }());
}

// File storage, the server syncing every write (brokers.sh: sync_interval: always): every
// acknowledged message is there after a SIGKILL and a restart. (It passed with
// WEFT_NATS_SYNC=2m too: a process crash leaves the writes in the kernel; the fsync is for a
// crash of the machine, which this cannot make.)
// The shared conformance suite once more, on this binary's own server with a file-storage stream,
// so that its broker-outage cases (a publisher's errors while the server is down and its
// recovery; a subscriber reconnecting after a restart) run against NATS too: they stop and
// start the server, which the shared fixture's tests must never see. The server is started by
// the first backend a test makes and stopped when the test process ends.
auto make_outage_nats(std::chrono::milliseconds publish_timeout) -> std::unique_ptr<backend> {
    static const server_guard server;
    nats_backend_options o;
    o.url = url();
    o.streams = {nats_stream_config{
        .name = "WEFT_TEST", .subjects = {"weft.test.>"}, .storage = nats_storage::file}};
    o.publish_timeout = publish_timeout;
    return std::make_unique<nats_backend>(std::move(o));
}

INSTANTIATE_TEST_SUITE_P(
    nats_outage,
    bus_conformance,
    ::testing::Values(test::backend_factory{
        .make = []() -> std::unique_ptr<backend> { return make_outage_nats(5'000ms); },
        .pause = {},
        .resume = {},
        .runtime_for = [](unsigned workers) { return weft::io_runtime_options(workers); },
        .topic_prefix = "weft.test.",
        .stop_broker = [] { EXPECT_EQ(brokers("stop nats"), 0); },
        .start_broker = [] { EXPECT_EQ(brokers("start nats"), 0); },
        .make_for_outage = []() -> std::unique_ptr<backend> { return make_outage_nats(2'000ms); }}),
    [](const auto&) { return std::string("jetstream_file"); });

TEST(nats_restart, file_storage_keeps_every_acked_message_through_a_sigkill) {
    constexpr int n = 200;
    const auto r = publish_kill_restart_read(nats_storage::file, n);
    EXPECT_EQ(r.acked.size(), std::size_t{n});
    EXPECT_EQ(r.read, r.acked);
    EXPECT_EQ(r.marker_sequence, std::uint64_t{n} + 1);
}

// The control: the same kill on memory storage loses them all (the stream starts again empty,
// so the marker is its first message).
TEST(nats_restart, memory_storage_loses_them_in_the_same_sigkill) {
    constexpr int n = 200;
    const auto r = publish_kill_restart_read(nats_storage::memory, n);
    EXPECT_EQ(r.acked.size(), std::size_t{n});
    EXPECT_TRUE(r.read.empty()) << r.read.size() << " survived";
    EXPECT_EQ(r.marker_sequence, 1U);
}

// A subscription made before the server is killed goes on after it is back: it gets what was
// published after the restart, through the same subscription, with no new subscribe.
TEST(nats_restart, subscriber_reconnects_after_the_broker_restarts) {
    server_guard server;
    const std::string u = unique();
    const std::string topic = "weft.restart." + u;
    nats_backend b{options_for(u, nats_storage::file)};
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{b};
        subscriber sub{b};
        auto s = co_await sub.subscribe(topic, "survivors");
        EXPECT_TRUE(s) << s.error().message();
        if (!s) {
            co_return;
        }
        envelope one = make_env(topic, "one");
        auto first = co_await pub.publish(std::move(one));
        EXPECT_TRUE(first);
        auto d1 = co_await s->next();
        EXPECT_TRUE(d1);
        if (d1) {
            EXPECT_EQ(d1->message().payload, "one"sv);
            EXPECT_TRUE(d1->ack());
        }

        co_await kill_and_restart();

        envelope two = make_env(topic, "two");
        const std::string two_id = two.id.to_string();
        // The first publish after the restart goes through: it waits in the publisher while
        // the connection comes back.
        const int attempts = co_await publish_until_acked(pub, std::move(two), 100);
        EXPECT_EQ(attempts, 1) << "0: never acknowledged after the restart";
        // Through the subscription from before the kill. "one" may come again first: its ack
        // is sent without waiting, and the SIGKILL may have come before the server stored it
        // (at least once). Nothing else may.
        int one_again = 0;
        for (;;) {
            auto d = co_await s->next();
            EXPECT_TRUE(d) << d.error().message();
            if (!d) {
                break;
            }
            EXPECT_TRUE(d->ack());
            if (d->message().id.to_string() == two_id) {
                EXPECT_EQ(d->message().payload, "two"sv);
                EXPECT_EQ(d->attempt(), 1U);
                break;
            }
            EXPECT_EQ(d->message().payload, "one"sv);
            EXPECT_LE(++one_again, 1) << "one delivered again more than once";
        }
        std::printf("\"one\" delivered again after the kill: %d\n", one_again);
        s->close();
        (co_await pub.close()).value();
    }());
}

// While the server is down a publish fails (after publish_timeout) with broker_unreachable,
// which describe() spells out with the server's address, and is never stored; once the server
// is back, publishes are acknowledged again and delivered (through the same publisher and
// subscription).
TEST(nats_restart, publisher_errors_while_the_broker_is_down_and_recovers) {
    server_guard server;
    const std::string u = unique();
    const std::string topic = "weft.restart." + u;
    nats_backend b{options_for(u, nats_storage::file)};
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{b};
        subscriber sub{b};
        auto s = co_await sub.subscribe(topic, "g");
        EXPECT_TRUE(s);
        if (!s) {
            co_return;
        }
        auto stopped = co_await weft::spawn_blocking([] { return brokers("stop nats"); });
        EXPECT_TRUE(stopped && *stopped == 0);

        // cnats notices the closed socket on its reader thread: until then a publish is sent
        // into the void and times out, after that it is held and fails as unreachable. Both
        // are errors; until the first broker_unreachable.
        std::error_code ec;
        std::set<std::string> unreachable;  // ids that failed as unreachable
        for (int i = 0; i < 100 && ec != bus_errc::broker_unreachable; ++i) {
            envelope e = make_env(topic, "while down");
            const std::string id = e.id.to_string();
            auto r = co_await pub.publish(std::move(e));
            EXPECT_FALSE(r) << "acknowledged with the server stopped";
            if (r) {
                break;
            }
            ec = r.error();
            if (ec == bus_errc::broker_unreachable) {
                unreachable.insert(id);
            } else {
                (void)co_await weft::sleep_for(50ms);
            }
        }
        EXPECT_EQ(ec, bus_errc::broker_unreachable) << ec.message();
        const std::string text = b.describe(ec);
        EXPECT_NE(text.find(url()), std::string::npos) << text;
        EXPECT_NE(text.find("unreachable"), std::string::npos) << text;
        EXPECT_EQ(b.connected_url(), "");
        // Another one while still down: the same value.
        envelope refused = make_env(topic, "still down");
        const std::string refused_id = refused.id.to_string();
        auto again = co_await pub.publish(std::move(refused));
        EXPECT_FALSE(again);
        if (!again) {
            EXPECT_EQ(again.error(), bus_errc::broker_unreachable);
            unreachable.insert(refused_id);
        }

        auto started = co_await weft::spawn_blocking([] { return brokers("start nats"); });
        EXPECT_TRUE(started && *started == 0);
        envelope back = make_env(topic, "back");
        const std::string back_id = back.id.to_string();
        const int attempts = co_await publish_until_acked(pub, std::move(back), 100);
        EXPECT_EQ(attempts, 1) << "0: never acknowledged after the server came back";
        EXPECT_NE(b.connected_url(), "");
        // Delivered, through the subscription from before the stop. A publish that timed out
        // may or may not have been stored (at least once); the ones failed as unreachable
        // never reached cnats, so they must not be.
        int before_back = 0;
        for (int i = 0; i < 200; ++i) {
            auto d = co_await s->next();
            EXPECT_TRUE(d) << d.error().message();
            if (!d) {
                break;
            }
            EXPECT_TRUE(d->ack());
            const std::string id = d->message().id.to_string();
            EXPECT_EQ(unreachable.count(id), 0U) << "a publish failed as unreachable was stored";
            if (id == back_id) {
                break;
            }
            ++before_back;
        }
        std::printf("timed-out publishes that were stored anyway: %d\n", before_back);
        s->close();
        (co_await pub.close()).value();
    }());
}

}  // namespace
