// The dead letters of a Kafka dead-letter topic (weft::bus::kafka_dead_letters) and the
// weft-bus tool over them, against the fixture's broker (WEFT_KAFKA_BROKERS).

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "weft/bus/errc.hpp"
#include "weft/bus/kafka_backend.hpp"
#include "weft/bus/kafka_dead_letters.hpp"
#include "weft/bus/publisher.hpp"
#include "weft/bus/subscriber.hpp"
#include "weft/io/reactor.hpp"
#include "weft/sched/runtime.hpp"

namespace {

using namespace weft::bus;
using namespace std::chrono_literals;

auto kafka_brokers() -> std::string {
    const char* b = std::getenv("WEFT_KAFKA_BROKERS");
    return b != nullptr ? b : "127.0.0.1:19092";
}

// A backend that creates `topic` and its dead-letter topic at start.
auto make_kafka(const std::string& topic) -> std::unique_ptr<kafka_backend> {
    kafka_backend_options o;
    o.brokers = kafka_brokers();
    o.linger = 1ms;
    o.topics = {topic};
    return std::make_unique<kafka_backend>(std::move(o));
}

auto tool(const std::string& args, std::string& out) -> int {
    out.clear();
    FILE* p = ::popen((std::string(WEFT_BUS_TOOL) + " " + args + " 2>&1").c_str(), "r");
    if (p == nullptr) {
        return -1;
    }
    char buf[4096];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) {
        out.append(buf, n);
    }
    const int status = ::pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The dead letters of `topic` on the fixture's broker. The bound on each call is generous: a
// broker restarted by the test before this one may still be loading the group coordinator's
// state, and a loaded machine stretches that (what these tests check is the answers, not how
// fast they come).
auto open_dead_letters(const std::string& topic) -> kafka_dead_letters {
    return kafka_dead_letters{{.brokers = kafka_brokers(), .topic = topic, .timeout = 60s}};
}

// One record written with plain librdkafka (waits for it to be stored).
void produce_raw(const std::string& topic,
                 const std::string& value,
                 const std::vector<std::pair<std::string, std::string>>& headers) {
    char err[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", kafka_brokers().c_str(), err, sizeof(err));
    rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
    ASSERT_NE(rk, nullptr) << err;
    rd_kafka_headers_t* hs = rd_kafka_headers_new(headers.size());
    for (const auto& [n, v] : headers) {
        rd_kafka_header_add(hs, n.c_str(), -1, v.data(), static_cast<ssize_t>(v.size()));
    }
    std::vector<rd_kafka_vu_t> vus(3);
    vus[0].vtype = RD_KAFKA_VTYPE_TOPIC;
    vus[0].u.cstr = topic.c_str();
    vus[1].vtype = RD_KAFKA_VTYPE_VALUE;
    vus[1].u.mem = {const_cast<char*>(value.data()), value.size()};
    vus[2].vtype = RD_KAFKA_VTYPE_HEADERS;
    vus[2].u.headers = hs;
    rd_kafka_error_t* e = rd_kafka_produceva(rk, vus.data(), vus.size());
    EXPECT_EQ(e, nullptr);
    if (e != nullptr) {
        rd_kafka_error_destroy(e);
        rd_kafka_headers_destroy(hs);
    }
    EXPECT_EQ(rd_kafka_flush(rk, 10'000), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_destroy(rk);
}

// list, show and the tool give the reason, topic and envelope; drop and requeue settle out of
// order (the third, then the second, then the first: the admin group's metadata holds the
// marks until the front is settled); requeue publishes the original envelope to its topic,
// where the group gets it again as a new message, attempt 1.
TEST(kafka_dead_letters, list_show_drop_and_requeue_by_api_and_tool) {
    const std::string t = "weft-test-dead-" + message_id::generate().to_string();
    const std::string dlq = t + ".dead-letter";
    auto b = make_kafka(t);
    weft::runtime rt{weft::io_runtime_options(1)};
    std::vector<envelope> sent;
    std::vector<envelope> received;
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{*b};
        subscriber sub{*b};
        for (int i = 0; i < 3; ++i) {
            envelope e;
            e.topic = t;
            e.key = "k";  // one partition: the group reads them in order
            e.type = "order.placed";
            e.headers = {{"tenant", "acme"}};
            e.payload = "p" + std::to_string(i);
            e.id = message_id::generate();
            sent.push_back(e);
            (co_await pub.publish(std::move(e))).value();
        }
        auto s = (co_await sub.subscribe(t, "g")).value();
        for (int i = 0; i < 3; ++i) {
            auto d = (co_await s.next()).value();
            received.push_back(d.message());
            EXPECT_TRUE(d.term("cannot parse"));
        }
        (co_await pub.close()).value();
    }());
    auto dead = open_dead_letters(dlq);
    std::vector<dead_letter> all;
    for (int tries = 0; tries < 100 && all.size() < 3; ++tries) {  // the terms store async
        all = dead.list(10).value();
    }
    ASSERT_EQ(all.size(), 3U);
    for (std::size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(all[i].ref, "0:" + std::to_string(i));
        EXPECT_EQ(all[i].reason, "cannot parse");
        EXPECT_EQ(all[i].topic, t);
        EXPECT_EQ(all[i].message.id, sent[i].id);
    }
    EXPECT_EQ(dead.list(2).value().size(), 2U);
    EXPECT_EQ(original_of(dead.show("0:1").value().message), received[1]);
    const std::string store = " --kafka " + kafka_brokers() + " --topic " + dlq;
    std::string out;
    EXPECT_EQ(tool("dead list" + store, out), 0) << out;
    EXPECT_NE(out.find("0:1\t" + t + "\t" + sent[1].id.to_string() + "\tcannot parse\n"),
              std::string::npos)
        << out;
    EXPECT_EQ(tool("dead show 0:1" + store, out), 0) << out;
    EXPECT_NE(out.find("header tenant: acme\n"), std::string::npos) << out;
    EXPECT_NE(out.find("\np1\n"), std::string::npos) << out;

    EXPECT_TRUE(dead.drop("0:2"));
    EXPECT_EQ(dead.show("0:2").error(), std::errc::no_such_file_or_directory);
    EXPECT_EQ(dead.drop("0:2").error(), std::errc::no_such_file_or_directory);
    EXPECT_EQ(tool("dead drop 0:1" + store, out), 0) << out;
    ASSERT_EQ(dead.list(10).value().size(), 1U);
    EXPECT_EQ(tool("dead requeue 0:0" + store, out), 0) << out;
    EXPECT_TRUE(dead.list(10).value().empty());
    EXPECT_EQ(dead.requeue("0:0").error(), std::errc::no_such_file_or_directory);
    rt.block_on([&]() -> weft::task<void> {
        subscriber sub{*b};
        auto s = (co_await sub.subscribe(t, "g")).value();
        auto d = (co_await s.next()).value();
        EXPECT_EQ(d.message(), received[0]);  // every field, as first delivered
        EXPECT_EQ(d.attempt(), 1U);
        EXPECT_TRUE(d.ack());
    }());
}

// What is not an event in the dead-letter topic (the consumer's copy of a record it could not
// read, with weft-malformed; a record someone else wrote) is listed as malformed with its
// bytes; requeue refuses it, drop settles it.
TEST(kafka_dead_letters, malformed_records_are_listed_as_malformed) {
    const std::string t = "weft-test-dead-bad-" + message_id::generate().to_string();
    const std::string dlq = t + ".dead-letter";
    auto b = make_kafka(t);
    produce_raw(dlq, "\x01\x02 not an event", {});
    produce_raw(dlq, "raw bytes",
                {{"ce_id", "not-a-uuid"},
                 {"weft-malformed", "CloudEvents binary: id 'not-a-uuid' is not a UUID"},
                 {"weft-original-topic", t}});
    auto dead = open_dead_letters(dlq);
    const auto all = dead.list(10).value();
    ASSERT_EQ(all.size(), 2U);
    EXPECT_EQ(all[0].reason.rfind("malformed: ", 0), 0U) << all[0].reason;
    EXPECT_EQ(all[0].message.payload, "\x01\x02 not an event");
    EXPECT_EQ(all[1].reason, "malformed: CloudEvents binary: id 'not-a-uuid' is not a UUID");
    EXPECT_EQ(all[1].topic, t);
    EXPECT_EQ(all[1].message.payload, "raw bytes");
    EXPECT_EQ(dead.requeue(all[1].ref).error(), bus_errc::malformed_event);
    std::string out;
    const std::string store = " --kafka " + kafka_brokers() + " --topic " + dlq;
    EXPECT_EQ(tool("dead requeue " + all[0].ref + store, out), 1) << out;
    EXPECT_TRUE(dead.drop(all[0].ref));
    EXPECT_TRUE(dead.drop(all[1].ref));
    EXPECT_TRUE(dead.list(10).value().empty());
}

// A ref that names nothing (no such offset, no such partition, not a ref) is not found, for
// every call and for the tool (exit 1, the reason on stderr); a topic that does not exist is
// no_stream.
TEST(kafka_dead_letters, unknown_refs_and_topics_are_clear_errors) {
    const std::string t = "weft-test-dead-none-" + message_id::generate().to_string();
    const std::string dlq = t + ".dead-letter";
    auto b = make_kafka(t);
    auto dead = open_dead_letters(dlq);
    const auto listed = dead.list(10);
    ASSERT_TRUE(listed) << listed.error().message();
    EXPECT_TRUE(listed->empty());
    for (const char* ref : {"0:999", "7:0", "x", "0:", ":1", "0:-1"}) {
        for (const std::error_code ec :
             {dead.show(ref).error(), dead.requeue(ref).error(), dead.drop(ref).error()}) {
            EXPECT_EQ(ec, std::errc::no_such_file_or_directory) << ref << ": " << ec.message();
        }
    }
    std::string out;
    EXPECT_EQ(tool("dead requeue 0:999 --kafka " + kafka_brokers() + " --topic " + dlq, out), 1);
    EXPECT_NE(out.find("No such file or directory"), std::string::npos) << out;
    auto none = open_dead_letters(dlq + ".none");
    EXPECT_EQ(none.list(10).error(), bus_errc::no_stream);
}

// No broker: every call returns an error value within its timeout, none throws.
TEST(kafka_dead_letters, unreachable_broker_is_an_error_value) {
    kafka_dead_letters dead{{.brokers = "127.0.0.1:1", .topic = "t.dead-letter", .timeout = 300ms}};
    auto unreachable = [](const std::error_code& ec) {
        return ec == bus_errc::broker_unreachable || ec == std::errc::timed_out;
    };
    const auto listed = dead.list(10);
    ASSERT_FALSE(listed);
    EXPECT_TRUE(unreachable(listed.error())) << listed.error().message();
    EXPECT_TRUE(unreachable(dead.show("0:0").error()));
    EXPECT_TRUE(unreachable(dead.requeue("0:0").error()));
    EXPECT_TRUE(unreachable(dead.drop("0:0").error()));
}

}  // namespace
