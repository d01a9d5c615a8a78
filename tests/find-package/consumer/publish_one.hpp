// What the NATS and Kafka consumers share: one message published to `topic` through a
// backend and acknowledged, on a runtime with a reactor, as a user's first program does it.
#pragma once

#include <string>
#include <utility>
#include <weft/bus/publisher.hpp>
#include <weft/io/reactor.hpp>
#include <weft/sched/runtime.hpp>

/// True once the broker acknowledged the message and the publisher closed cleanly.
template <class Backend>
auto publish_one(Backend& backend, std::string topic) -> bool {
    weft::runtime rt{weft::io_runtime_options(2)};
    return rt.block_on([&]() -> weft::task<bool> {
        weft::bus::publisher pub{backend};
        weft::bus::envelope env;
        env.topic = std::move(topic);
        env.payload = "hello";
        auto a = co_await pub.publish(std::move(env));
        auto closed = co_await pub.close();
        co_return a.has_value() && closed.has_value();
    }());
}
