// The Kafka producer against librdkafka's in-process mock cluster (no broker needed): a
// delivery report that librdkafka gives without an offset is not taken for an ack.
//
// The case the outbox chaos test lost events to (docs/testing.md, "Chaos"): a fresh producer's
// first batch to a partition is refused (NOT_LEADER_OR_FOLLOWER: a new topic's partition, or a
// restarted broker's, without its leader yet) while its second batch, already on the wire, is
// stored: a broker without state for the producer on that partition takes a first batch that
// does not start at sequence 0. librdkafka 2.0.2 then reports the first message delivered
// ("implicitly acked by subsequent batch success", offset RD_KAFKA_OFFSET_INVALID) although it
// was never written; the relay deleted its outbox row. The mock cluster takes such a batch as
// the broker did (it checks sequences for transactional producers only), and its per-request
// error with a response delay recreates the refused first batch.

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "weft/bus/errc.hpp"
#include "weft/bus/kafka_backend.hpp"
#include "weft/bus/publisher.hpp"
#include "weft/io/reactor.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"

namespace {

using namespace weft::bus;
using namespace std::chrono_literals;

constexpr std::int16_t produce_api_key = 0;  // ProduceRequest (librdkafka's RD_KAFKAP_Produce)

/// A mock cluster of one broker, owned by a client of its own (the mock lives in a client).
class mock_cluster {
public:
    mock_cluster() {
        char err[512];
        owner_ = rd_kafka_new(RD_KAFKA_PRODUCER, rd_kafka_conf_new(), err, sizeof(err));
        if (owner_ != nullptr) {
            cluster_ = rd_kafka_mock_cluster_new(owner_, 1);
        }
    }
    mock_cluster(const mock_cluster&) = delete;
    auto operator=(const mock_cluster&) -> mock_cluster& = delete;
    ~mock_cluster() {
        if (cluster_ != nullptr) {
            rd_kafka_mock_cluster_destroy(cluster_);
        }
        if (owner_ != nullptr) {
            rd_kafka_destroy(owner_);
        }
    }
    [[nodiscard]] auto get() const -> rd_kafka_mock_cluster_t* { return cluster_; }
    [[nodiscard]] auto bootstraps() const -> std::string {
        return rd_kafka_mock_cluster_bootstraps(cluster_);
    }

    /// How many messages partition 0 of `topic` holds (high - low watermark), asked of the
    /// cluster by a client of its own.
    [[nodiscard]] auto stored(const char* topic) const -> std::int64_t {
        char err[512];
        rd_kafka_conf_t* conf = rd_kafka_conf_new();
        rd_kafka_conf_set(conf, "bootstrap.servers", bootstraps().c_str(), err, sizeof(err));
        rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
        if (rk == nullptr) {
            return -1;
        }
        std::int64_t low = -1;
        std::int64_t high = -1;
        const auto e = rd_kafka_query_watermark_offsets(rk, topic, 0, &low, &high, 10'000);
        rd_kafka_destroy(rk);
        return e == RD_KAFKA_RESP_ERR_NO_ERROR ? high - low : -1;
    }

private:
    rd_kafka_t* owner_ = nullptr;
    rd_kafka_mock_cluster_t* cluster_ = nullptr;
};

auto event(const char* topic, const char* payload) -> envelope {
    envelope e;
    e.topic = topic;
    e.key = "k";
    e.type = "t";
    e.payload = payload;
    return e;
}

TEST(kafka_unconfirmed, a_report_without_offset_after_a_refused_first_batch_is_no_ack) {
    mock_cluster mock;
    ASSERT_NE(mock.get(), nullptr);
    constexpr const char* topic = "unconfirmed";
    ASSERT_EQ(rd_kafka_mock_topic_create(mock.get(), topic, 1, 1), RD_KAFKA_RESP_ERR_NO_ERROR);
    // The first ProduceRequest is refused, its response held back 500 ms: the second message
    // goes out in a request of its own meanwhile and is stored.
    ASSERT_EQ(
        rd_kafka_mock_broker_push_request_error_rtts(
            mock.get(), 1, produce_api_key, 1, RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION, 500),
        RD_KAFKA_RESP_ERR_NO_ERROR);

    kafka_backend_options o;
    o.brokers = mock.bootstraps();
    o.create_topics_on_use = false;  // the mock has no CreateTopics; the topic exists
    o.linger = 1ms;
    o.publish_timeout = 20s;
    kafka_backend broker{o};
    std::unordered_map<message_id, weft::result<ack>> outcomes;
    message_id first;
    message_id second;
    weft::runtime rt{weft::io_runtime_options(1)};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{broker, {.max_pending = 16}};
        first = (co_await pub.publish_async(event(topic, "1"))).value();
        (void)co_await weft::sleep_for(200ms);  // its request is out, the response held back
        second = (co_await pub.publish_async(event(topic, "2"))).value();
        for (int i = 0; i < 2; ++i) {
            auto r = (co_await pub.results().recv()).value();
            outcomes.emplace(r.id, std::move(r.outcome));
        }
        (void)co_await pub.close();
    }());

    ASSERT_EQ(outcomes.size(), 2U);
    ASSERT_TRUE(outcomes.at(second)) << outcomes.at(second).error().message();
    EXPECT_EQ(outcomes.at(second)->partition, 0);
    // The partition holds one message, the second: the first was never written. Reporting it
    // acknowledged (what librdkafka's report says) would have lost it.
    EXPECT_EQ(mock.stored(topic), 1);
    ASSERT_FALSE(outcomes.at(first)) << "acknowledged at offset " << outcomes.at(first)->sequence;
    EXPECT_EQ(outcomes.at(first).error(), make_error_code(bus_errc::unconfirmed));
}

}  // namespace
