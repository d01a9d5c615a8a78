// weft and a service written without it (tests/interop/go: Go, nats.go only) read each other's
// events through a real nats-server (the fixture's, WEFT_NATS_URL): the Go program checks every
// CloudEvents attribute and the payload of an event weft published, and weft checks the event
// the Go program published. The build makes the Go program; a missing one fails the test, never
// skips it.

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "go_program.hpp"
#include "weft/bus/nats_backend.hpp"
#include "weft/bus/publisher.hpp"
#include "weft/bus/subscriber.hpp"
#include "weft/io/reactor.hpp"
#include "weft/sched/runtime.hpp"

namespace {

using namespace weft::bus;
using weft::interop::go_program;
using weft::interop::run;

auto nats_url() -> std::string {
    const char* u = std::getenv("WEFT_NATS_URL");
    return u != nullptr ? u : "nats://127.0.0.1:14222";
}

auto make_nats() -> std::unique_ptr<nats_backend> {
    nats_backend_options o;
    o.url = nats_url();
    o.streams = {nats_stream_config{
        .name = "WEFT_INTEROP", .subjects = {"weft.interop.>"}, .storage = nats_storage::memory}};
    o.wire.source = "/orders-service";
    return std::make_unique<nats_backend>(std::move(o));
}

TEST(interop_go, a_go_service_reads_every_attribute_weft_published) {
    const std::string go = go_program();
    ASSERT_FALSE(go.empty()) << "the Go program was not built: " WEFT_INTEROP_GO_BIN;
    auto b = make_nats();
    const std::string t = "weft.interop.to-go-" + message_id::generate().to_string();
    const message_id id = message_id::generate();
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{*b};
        envelope e;
        e.id = id;
        e.topic = t;
        e.key = "order 42 \xe2\x82\xac";
        e.type = "order.placed";
        e.headers = {{"tenant", "acme \"quoted\" 100%"}};
        e.payload = R"({"total": 12, "note": "caf\u00e9"})";
        (co_await pub.publish(std::move(e))).value();
        (co_await pub.close()).value();
    }());
    EXPECT_EQ(run("'" + go + "' consume '" + nats_url() + "' '" + t + "' " + id.to_string() +
                  " /orders-service order.placed 'order 42 \xe2\x82\xac' 'acme \"quoted\" 100%' " +
                  "'{\"total\": 12, \"note\": \"caf\\u00e9\"}'"),
              0);
}

TEST(interop_go, weft_reads_the_event_a_go_service_published) {
    const std::string go = go_program();
    ASSERT_FALSE(go.empty()) << "the Go program was not built: " WEFT_INTEROP_GO_BIN;
    auto b = make_nats();
    const std::string t = "weft.interop.from-go-" + message_id::generate().to_string();
    const message_id id = message_id::generate();
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        subscriber sub{*b};
        auto s = (co_await sub.subscribe(t, "g")).value();
        EXPECT_EQ(run("'" + go + "' publish '" + nats_url() + "' '" + t + "' " + id.to_string() +
                      " 'plain text from Go'"),
                  0);
        auto d = (co_await s.next()).value();
        const envelope& e = d.message();
        EXPECT_EQ(e.id, id);
        EXPECT_EQ(e.topic, t);
        EXPECT_EQ(e.type, "go.event");
        EXPECT_EQ(e.key, "go key");
        EXPECT_EQ(e.payload, "plain text from Go");
        EXPECT_EQ(e.time, std::chrono::system_clock::time_point{
                              std::chrono::milliseconds{1'772'600'767'089}});
        for (const auto& [name, value] :
             {std::pair{"source", "/go-service"}, std::pair{"datacontenttype", "text/plain"},
              std::pair{"lang", "go"}}) {
            const header* h = e.find_header(name);
            EXPECT_EQ(h != nullptr ? h->value : "<absent>", value) << name;
        }
        EXPECT_TRUE(d.ack());
    }());
}

}  // namespace
