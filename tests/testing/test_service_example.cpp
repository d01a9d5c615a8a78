// The worked example of docs/testing.md ("Testing your service"), run: an HTTP handler that
// publishes through the SQLite outbox, tested on the simulated network under a partition and
// while the memory broker restarts (ten minutes of test time).

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <weft/bus/memory_broker.hpp>
#include <weft/bus/publisher.hpp>
#include <weft/bus/sqlite_outbox.hpp>
#include <weft/bus/sqlite_txn.hpp>
#include <weft/bus/subscriber.hpp>
#include <weft/http.hpp>
#include <weft/testing/sim_network.hpp>
#include <weft/testing/test_clock.hpp>
#include <weft/weft.hpp>

namespace bus = weft::bus;
namespace http = weft::http;
using namespace std::chrono_literals;

// The service: POST /orders stages an order.placed event in the caller's transaction; the
// outbox's relay publishes it.
void add_routes(http::server& srv, sqlite3* db, bus::sqlite_outbox& outbox) {
    srv.route(http::method::post, "/orders",
              [db, &outbox](http::request& req) -> weft::task<http::response> {
                  auto body = co_await req.body().read_all();
                  auto stage = [db, &outbox, b = body ? *body : std::string{}] {
                      bus::sqlite_txn txn{db};
                      bus::envelope env;
                      env.topic = "orders";
                      env.key = "order-1";
                      env.type = "order.placed";
                      env.payload = b;
                      return outbox.stage(txn, std::move(env)).has_value() &&
                             txn.commit().has_value();
                  };
                  auto staged = co_await weft::spawn_blocking(std::move(stage));
                  const bool ok = staged && *staged;
                  co_return http::response::text(ok ? "accepted\n" : "failed\n", ok ? 202 : 500);
              });
}

// The test, on a runtime with a test clock (auto-advance), the service on a simulated network
// (5 ms each way): the broker restarts (away from before the order until ten minutes after);
// the network between the client and the shop parts while the response is on its way, so the
// client times out without knowing the order was taken. The relay retries (its back-off on the
// test clock) and the event arrives once the broker is back: exactly once. Ten minutes pass
// in no wall time.
//
//     weft::runtime rt{weft::testing::test_clock_runtime()};
//     rt.block_on(order_survives_a_partition_and_a_broker_restart("orders.db"));
auto order_survives_a_partition_and_a_broker_restart(std::string path) -> weft::task<void> {
    sqlite3* db = nullptr;
    if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
        throw std::runtime_error("cannot open " + path);
    }
    sqlite3_busy_timeout(db, 5'000);
    bus::sqlite_outbox outbox{path};
    bus::memory_broker broker;
    bus::publisher pub{broker};
    bus::subscriber sub{broker, {.ack_wait = 30s}};
    auto billing = (co_await sub.subscribe("orders", "billing")).value();
    http::server srv;
    add_routes(srv, db, outbox);
    weft::testing::sim_network net{{.latency = 5ms}};
    auto l = net.listen("shop", 80);
    co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
        s.spawn(srv.serve(*l));
        s.spawn([&]() -> weft::task<void> { (void)co_await outbox.run_relay(pub); });
        broker.go_away();
        http::client c{(co_await net.connect("client", "shop", 80)).value()};
        (co_await c.send("POST", "/orders", R"({"tea": 1})")).value();
        (void)co_await weft::sleep_for(6ms);  // answered at 5 ms; the response lands at 10 ms
        net.partition("client", "shop");
        auto r = co_await weft::with_timeout(2s, c.read_response());
        if (r || r.error() != std::errc::timed_out) {
            throw std::runtime_error("the response crossed the partition");
        }
        co_await weft::testing::advance(10min);  // the relay backs off and retries meanwhile
        if (broker.stored("orders") != 0) {
            throw std::runtime_error("stored while the broker was away");
        }
        broker.come_back();
        net.heal("client", "shop");
        auto d = (co_await billing.next()).value();  // once the relay's next retry is due
        if (d.message().type != "order.placed" || d.message().payload != R"({"tea": 1})") {
            throw std::runtime_error("unexpected event " + d.message().type);
        }
        (void)d.ack();
        auto again = co_await weft::with_timeout(1h, billing.next());
        if (again) {
            throw std::runtime_error("the order was published twice");
        }
        outbox.stop_relay();
        co_await srv.shutdown();
    });
    (void)co_await pub.close();
    outbox.release(db);
    sqlite3_close(db);
}

TEST(testing_your_service, order_survives_a_partition_and_a_broker_restart) {
    const std::string path =
        ::testing::TempDir() + "weft-service-example-" + std::to_string(::getpid()) + ".db";
    for (const char* suffix : {"", "-wal", "-shm", "-relay.lock"}) {
        std::remove((path + suffix).c_str());
    }
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on(order_survives_a_partition_and_a_broker_restart(path));
    for (const char* suffix : {"", "-wal", "-shm", "-relay.lock"}) {
        std::remove((path + suffix).c_str());
    }
}
