// The worked example of docs/testing.md ("Testing your service"), run: an HTTP handler that
// publishes through the SQLite outbox, tested while the memory broker is away for ten minutes
// of test time.

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

// The test, on a runtime with a test clock (auto-advance): the broker is away when the order comes
// in and for ten minutes after; the relay retries (its back-off runs on the test clock), and the
// event arrives once the broker is back. Ten minutes pass in no wall time.
//
//     weft::runtime rt{weft::testing::test_clock_runtime()};
//     rt.block_on(order_survives_a_broker_outage("orders.db"));
auto order_survives_a_broker_outage(std::string path) -> weft::task<void> {
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
    auto l = weft::tcp_listener::bind(weft::socket_address::parse("127.0.0.1", 0).value());
    const auto addr = l.value().local_address().value();
    co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
        s.spawn(srv.serve(*l));
        s.spawn([&]() -> weft::task<void> { (void)co_await outbox.run_relay(pub); });
        broker.go_away();
        auto c = (co_await http::client::connect(addr)).value();
        auto r = (co_await c.request("POST", "/orders", R"({"tea": 1})")).value();
        if (r.status != 202) {
            throw std::runtime_error("the order was not accepted: " + r.body);
        }
        co_await weft::testing::advance(10min);  // the relay backs off and retries meanwhile
        if (broker.stored("orders") != 0) {
            throw std::runtime_error("stored while the broker was away");
        }
        broker.come_back();
        auto d = (co_await billing.next()).value();  // once the relay's next retry is due
        if (d.message().type != "order.placed" || d.message().payload != R"({"tea": 1})") {
            throw std::runtime_error("unexpected event " + d.message().type);
        }
        (void)d.ack();
        outbox.stop_relay();
        co_await srv.shutdown();
    });
    (void)co_await pub.close();
    outbox.release(db);
    sqlite3_close(db);
}

TEST(testing_your_service, order_survives_a_broker_outage) {
    const std::string path =
        ::testing::TempDir() + "weft-service-example-" + std::to_string(::getpid()) + ".db";
    for (const char* suffix : {"", "-wal", "-shm", "-relay.lock"}) {
        std::remove((path + suffix).c_str());
    }
    weft::runtime rt{weft::testing::test_clock_runtime()};
    rt.block_on(order_survives_a_broker_outage(path));
    for (const char* suffix : {"", "-wal", "-shm", "-relay.lock"}) {
        std::remove((path + suffix).c_str());
    }
}
