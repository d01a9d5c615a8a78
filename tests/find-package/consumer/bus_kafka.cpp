// A user's program on weft::bus_kafka, built against the installed tree. Given no broker, it
// points librdkafka at a port where nothing listens and expects weft's start-up error naming
// it; given "host:port", it publishes one message there and waits for the ack.
#include <chrono>
#include <cstdio>
#include <string>
#include <system_error>
#include <weft/bus/errc.hpp>
#include <weft/bus/kafka_backend.hpp>

#include "publish_one.hpp"

auto main(int argc, char** argv) -> int {
    const std::string brokers = argc > 1 ? argv[1] : "127.0.0.1:1";
    try {
        weft::bus::kafka_backend kafka{{.brokers = brokers,
                                        .topics = {"consumer_orders"},
                                        .admin_timeout = std::chrono::milliseconds{1'000}}};
        const bool ok = publish_one(kafka, "consumer_orders");
        std::printf("bus_kafka: publish to %s %s\n", brokers.c_str(), ok ? "acked" : "failed");
        return ok ? 0 : 1;
    } catch (const std::system_error& e) {
        std::printf("bus_kafka: %s\n", e.what());
        const bool expected = e.code() == weft::bus::bus_errc::broker_unreachable &&
                              std::string(e.what()).find("127.0.0.1:1") != std::string::npos;
        return argc == 1 && expected ? 0 : 1;
    }
}
