// A user's bus program on the memory backend (weft::bus alone): publish, consume, ack.
#include <chrono>
#include <cstdio>
#include <string_view>
#include <weft/bus/memory_broker.hpp>
#include <weft/bus/publisher.hpp>
#include <weft/bus/subscriber.hpp>
#include <weft/sched/runtime.hpp>

using namespace std::chrono_literals;
using namespace std::string_view_literals;

auto run(weft::bus::memory_broker& broker) -> weft::task<int> {
    weft::bus::publisher pub{broker, {.max_pending = 16}};
    weft::bus::subscriber sub{broker, {.ack_wait = 5s, .max_deliveries = 3}};
    auto members = co_await sub.subscribe("orders", "billing");
    if (!members) {
        co_return 1;
    }
    auto billing = std::move(*members);
    weft::bus::envelope env;
    env.topic = "orders";
    env.key = "order-42";
    env.type = "order.placed";
    env.payload = R"({"total": 12})";
    auto acked = co_await pub.publish(std::move(env));
    if (!acked) {
        co_return 2;
    }
    auto d = co_await billing.next();
    if (!d) {
        co_return 3;
    }
    const bool same = d->message().key == "order-42"sv && d->message().type == "order.placed"sv;
    auto settled = d->ack();
    auto closed = co_await pub.close();
    co_return same&& settled&& closed ? 0 : 4;
}

auto main() -> int {
    weft::runtime rt{{.workers = 2}};
    weft::bus::memory_broker broker;
    const int rc = rt.block_on(run(broker));
    std::printf("bus_memory: %s\n", rc == 0 ? "published, delivered and acked" : "failed");
    return rc;
}
