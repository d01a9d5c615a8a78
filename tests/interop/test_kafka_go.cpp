// weft and a service written without it (tests/interop/go: Go, franz-go only) read each other's
// events through the fixture's Kafka broker (WEFT_KAFKA_BROKERS): the Go program checks every
// ce_ header, the record key and the value of an event weft published, and weft checks the
// record the Go program produced; kcat -J (apt's kcat, a librdkafka tool) shows the attributes
// as headers and the payload as text. Few cases: the JVM broker is the suite's slowest part.

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "go_program.hpp"
#include "weft/bus/kafka_backend.hpp"
#include "weft/bus/publisher.hpp"
#include "weft/bus/subscriber.hpp"
#include "weft/io/reactor.hpp"
#include "weft/sched/runtime.hpp"

namespace {

using namespace weft::bus;
using namespace std::chrono_literals;
using weft::interop::go_program;
using weft::interop::output_of;
using weft::interop::run;

auto kafka_brokers() -> std::string {
    const char* b = std::getenv("WEFT_KAFKA_BROKERS");
    return b != nullptr ? b : "127.0.0.1:19092";
}

auto make_kafka(const std::string& topic) -> std::unique_ptr<kafka_backend> {
    kafka_backend_options o;
    o.brokers = kafka_brokers();
    o.linger = 1ms;
    o.topics = {topic};
    o.wire.source = "/orders-service";
    return std::make_unique<kafka_backend>(std::move(o));
}

TEST(interop_go, a_go_service_reads_every_attribute_weft_published_on_kafka) {
    const std::string go = go_program();
    ASSERT_FALSE(go.empty()) << "the Go program was not built: " WEFT_INTEROP_GO_BIN;
    const std::string t = "weft-interop-to-go-" + message_id::generate().to_string();
    auto b = make_kafka(t);
    const message_id id = message_id::generate();
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{*b};
        envelope e;
        e.id = id;
        e.topic = t;
        e.key = "order-42";
        e.type = "order.placed";
        e.headers = {{"tenant", "acme \"quoted\" 100%"}};
        e.payload = R"({"total": 12})";
        (co_await pub.publish(std::move(e))).value();
        (co_await pub.close()).value();
    }());
    EXPECT_EQ(
        run("'" + go + "' kafka-consume '" + kafka_brokers() + "' '" + t + "' " + id.to_string() +
            " /orders-service order.placed order-42 " + "'acme \"quoted\" 100%' '{\"total\": 12}'"),
        0);
}

TEST(interop_go, weft_reads_the_record_a_go_service_produced) {
    const std::string go = go_program();
    ASSERT_FALSE(go.empty()) << "the Go program was not built: " WEFT_INTEROP_GO_BIN;
    const std::string t = "weft-interop-from-go-" + message_id::generate().to_string();
    auto b = make_kafka(t);
    const message_id id = message_id::generate();
    ASSERT_EQ(run("'" + go + "' kafka-publish '" + kafka_brokers() + "' '" + t + "' " +
                  id.to_string() + " 'plain text from Go'"),
              0);
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        subscriber sub{*b};
        auto s = (co_await sub.subscribe(t, "g")).value();
        auto d = (co_await s.next()).value();
        const envelope& e = d.message();
        EXPECT_EQ(e.id, id);
        EXPECT_EQ(e.topic, t);
        EXPECT_EQ(e.type, "go.event");
        EXPECT_EQ(e.key, "go key");  // the record key: the Go side sent no ce_subject
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

TEST(interop_go, kcat_shows_attributes_as_headers_and_the_payload_as_text) {
    const std::string t = "weft-interop-kcat-" + message_id::generate().to_string();
    auto b = make_kafka(t);
    const message_id id = message_id::generate();
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{*b};
        envelope e;
        e.id = id;
        e.topic = t;
        e.key = "order-42";
        e.type = "order.placed";
        e.headers = {{"tenant", "acme"}};
        e.payload = "hello from weft";
        (co_await pub.publish(std::move(e))).value();
        (co_await pub.close()).value();
    }());
    const std::string out =
        output_of("kcat -C -b '" + kafka_brokers() + "' -t '" + t + "' -o beginning -c 1 -e -J");
    for (const std::string& part :
         {std::string(R"("payload":"hello from weft")"), std::string(R"("key":"order-42")"),
          std::string(R"("ce_specversion","1.0")"), R"("ce_id",")" + id.to_string() + R"(")",
          std::string(R"("ce_source","/orders-service")"),
          std::string(R"("ce_type","order.placed")"), std::string(R"("ce_subject","order-42")"),
          std::string(R"("ce_tenant","acme")"), std::string(R"("ce_time",")")}) {
        EXPECT_NE(out.find(part), std::string::npos) << part;
    }
}

}  // namespace
