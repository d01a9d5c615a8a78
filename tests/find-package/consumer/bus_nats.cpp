// A user's program on weft::bus_nats, built against the installed tree. Given no server, it
// asks cnats to connect to a port where nothing listens and expects weft's start-up error
// naming that address; given a URL, it publishes one message there and waits for the ack.
#include <chrono>
#include <cstdio>
#include <string>
#include <system_error>
#include <weft/bus/nats_backend.hpp>

#include "publish_one.hpp"

auto main(int argc, char** argv) -> int {
    const std::string url = argc > 1 ? argv[1] : "nats://127.0.0.1:1";
    try {
        weft::bus::nats_backend nats{{.url = url,
                                      .topics = {"consumer_orders"},
                                      .storage = weft::bus::nats_storage::memory,
                                      .connect_timeout = std::chrono::milliseconds{500}}};
        const bool ok = publish_one(nats, "consumer_orders");
        std::printf("bus_nats: publish to %s %s\n", url.c_str(), ok ? "acked" : "failed");
        return ok ? 0 : 1;
    } catch (const std::system_error& e) {
        std::printf("bus_nats: %s\n", e.what());
        // Without a server, the only right outcome is the start-up error naming the address.
        return argc == 1 && std::string(e.what()).find("127.0.0.1:1") != std::string::npos ? 0 : 1;
    }
}
