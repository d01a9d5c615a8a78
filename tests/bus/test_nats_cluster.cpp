// The NATS backend on a three-node cluster: three nats-server processes on private ports
// (scripts/brokers.sh start nats-cluster, client ports WEFT_NATS_CLUSTER_PORT + 0, 1, 2), each
// with its own store, and an R3 stream. The node the backend is connected to is killed
// (SIGKILL) while publishers and consumers run (the publishers wait at a third of their messages
// for the kill, so two thirds are published with the node dead); both must go on, and every
// acknowledged id must be consumed. The test starts the cluster and stops it when it ends.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

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
using namespace std::chrono_literals;

/// scripts/brokers.sh with this binary's own ports (compiled in; never the environment's).
/// `env`: further variables for this call ("WEFT_NATS_FRESH=1").
auto brokers(const std::string& args, const std::string& env = {}) -> int {
    const std::string cmd =
        env + " WEFT_NATS_PORT=" + std::to_string(WEFT_NATS_RESTART_PORT) +
        " WEFT_NATS_HTTP_PORT= WEFT_NATS_CLUSTER_PORT=" + std::to_string(WEFT_NATS_CLUSTER_PORT) +
        " " + WEFT_BROKERS_SH + " " + args + " >&2";
    return std::system(cmd.c_str());
}

auto base_port() -> int { return WEFT_NATS_CLUSTER_PORT; }

struct cluster_guard {
    cluster_guard() { EXPECT_EQ(brokers("start nats-cluster", "WEFT_NATS_FRESH=1"), 0); }
    cluster_guard(const cluster_guard&) = delete;
    auto operator=(const cluster_guard&) -> cluster_guard& = delete;
    ~cluster_guard() { brokers("stop nats-cluster"); }
};

/// The backend, once the cluster has a JetStream leader to make the R3 stream (the nodes
/// answer /healthz before they have elected one).
auto connect(const nats_backend_options& o) -> std::unique_ptr<nats_backend> {
    for (int attempt = 1;; ++attempt) {
        try {
            return std::make_unique<nats_backend>(o);
        } catch (const std::system_error& e) {
            if (attempt == 100) {
                throw;
            }
            std::this_thread::sleep_for(200ms);
        }
    }
}

TEST(nats_cluster, publishing_and_consuming_go_on_when_a_node_is_killed) {
    cluster_guard cluster;
    const std::string u = message_id::generate().to_string().substr(24);
    const std::string topic = "weft.cluster." + u;
    nats_backend_options o;
    const int base = base_port();
    for (int i = 0; i < 3; ++i) {
        o.servers.push_back("nats://127.0.0.1:" + std::to_string(base + i));
    }
    o.streams = {nats_stream_config{
        .name = "CLUSTER_" + u, .subjects = {topic}, .storage = nats_storage::file, .replicas = 3}};
    o.publish_timeout = 2'000ms;
    auto b = connect(o);

    constexpr int publishers = 8;
    constexpr int per_publisher = 250;
    constexpr int n = publishers * per_publisher;
    std::mutex mu;
    std::set<std::string> acked;     // guarded by mu
    std::set<std::string> consumed;  // guarded by mu
    int duplicates = 0;              // guarded by mu
    int publish_errors = 0;          // guarded by mu
    std::atomic<int> acked_count{0};
    std::atomic<bool> killed{false};
    std::atomic<int> acked_after_kill{0};
    std::atomic<int> consumed_after_kill{0};
    std::atomic<bool> publishing_done{false};
    int killed_node = -1;

    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{*b, {.max_pending = 256}};
        subscriber sub{*b};
        std::vector<subscription> members;
        for (int m = 0; m < 2; ++m) {
            for (int attempt = 0; attempt < 50; ++attempt) {
                auto s = co_await sub.subscribe(topic, "cluster-readers");
                if (s) {
                    members.push_back(std::move(*s));
                    break;
                }
                (void)co_await weft::sleep_for(200ms);
            }
        }
        EXPECT_EQ(members.size(), 2U);
        if (members.size() != 2) {
            co_return;
        }
        co_await weft::with_scope([&](weft::scope& sc) -> weft::task<void> {
            for (auto& member : members) {
                sc.spawn([&]() -> weft::task<void> {
                    for (;;) {
                        auto d = co_await member.next();
                        if (!d) {
                            EXPECT_EQ(d.error(), bus_errc::subscription_closed)
                                << d.error().message();
                            co_return;
                        }
                        (void)d->ack();  // a failed ack is redelivered: counted as duplicate
                        std::lock_guard lock(mu);
                        if (!consumed.insert(d->message().id.to_string()).second) {
                            ++duplicates;
                        }
                        if (killed.load()) {
                            consumed_after_kill.fetch_add(1);
                        }
                    }
                });
            }
            // The killer: once every publisher has its first third acknowledged (and waits),
            // the node the backend is connected to.
            sc.spawn([&]() -> weft::task<void> {
                while (acked_count.load() < publishers * (per_publisher / 3)) {
                    (void)co_await weft::sleep_for(10ms);
                }
                const std::string at = b->connected_url();
                const auto colon = at.rfind(':');
                killed_node =
                    colon == std::string::npos ? 0 : std::atoi(at.c_str() + colon + 1) - base;
                if (killed_node < 0 || killed_node > 2) {
                    killed_node = 0;
                }
                auto r = co_await weft::spawn_blocking([node = killed_node] {
                    return brokers("kill nats-cluster " + std::to_string(node));
                });
                EXPECT_TRUE(r && *r == 0);
                killed.store(true);
            });
            for (int p = 0; p < publishers; ++p) {
                sc.spawn([&, p]() -> weft::task<void> {
                    for (int i = 0; i < per_publisher; ++i) {
                        // The rest is published with the node dead (a publisher that could
                        // finish before the kill would show nothing).
                        while (i == per_publisher / 3 && !killed.load()) {
                            (void)co_await weft::sleep_for(10ms);
                        }
                        envelope e;
                        e.id = message_id::generate();
                        e.topic = topic;
                        e.type = "test.event";
                        e.payload = "p" + std::to_string(p) + "-" + std::to_string(i);
                        const std::string id = e.id.to_string();
                        // Until acknowledged, with the same id: the stream drops a copy it
                        // already has (a publish that timed out may have been stored).
                        bool ok = false;
                        for (int attempt = 0; attempt < 300 && !ok; ++attempt) {
                            envelope copy = e;
                            auto r = co_await pub.publish(std::move(copy));
                            ok = r.has_value();
                            if (!ok) {
                                {
                                    std::lock_guard lock(mu);
                                    ++publish_errors;
                                }
                                (void)co_await weft::sleep_for(50ms);
                            }
                        }
                        EXPECT_TRUE(ok) << "never acknowledged: " << id;
                        if (ok) {
                            {
                                std::lock_guard lock(mu);
                                acked.insert(id);
                            }
                            acked_count.fetch_add(1);
                            if (killed.load()) {
                                acked_after_kill.fetch_add(1);
                            }
                        }
                    }
                });
            }
            // The closer: once publishing is over, waits until every acknowledged id has been
            // consumed (or gives up after 60 s: then the missing ids are counted below).
            sc.spawn([&]() -> weft::task<void> {
                while (acked_count.load() < n || !killed.load()) {
                    (void)co_await weft::sleep_for(20ms);
                }
                publishing_done.store(true);
                for (int i = 0; i < 3'000; ++i) {
                    {
                        std::lock_guard lock(mu);
                        if (std::includes(consumed.begin(), consumed.end(), acked.begin(),
                                          acked.end())) {
                            break;
                        }
                    }
                    (void)co_await weft::sleep_for(20ms);
                }
                for (auto& member : members) {
                    member.close();
                }
            });
            co_return;
        });
        (co_await pub.close()).value();
    }());

    // The connection moved to a node that is alive.
    const std::string now_at = b->connected_url();
    EXPECT_NE(now_at, "");
    EXPECT_EQ(now_at.find(":" + std::to_string(base + killed_node)), std::string::npos) << now_at;
    std::size_t missing = 0;
    for (const auto& id : acked) {
        missing += consumed.count(id) == 0 ? 1 : 0;
    }
    std::printf(
        "cluster: node %d killed; acked %zu (%d after the kill), consumed %zu (%d after the kill, "
        "%d duplicates), %d publish errors retried, %zu acked and not consumed\n",
        killed_node, acked.size(), acked_after_kill.load(), consumed.size(),
        consumed_after_kill.load(), duplicates, publish_errors, missing);
    EXPECT_TRUE(publishing_done.load());
    EXPECT_EQ(acked.size(), std::size_t{n});
    EXPECT_GT(acked_after_kill.load(), 0);     // publishing went on
    EXPECT_GT(consumed_after_kill.load(), 0);  // and consuming
    EXPECT_EQ(missing, 0U);                    // nothing acknowledged was lost
}

}  // namespace
