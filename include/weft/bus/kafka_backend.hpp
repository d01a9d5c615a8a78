#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "weft/bus/backend.hpp"
#include "weft/bus/broker_tls.hpp"
#include "weft/bus/wire_format.hpp"

namespace weft::bus {

/// Where a publisher's delivery reports are turned into outcomes (docs/design/decisions.md has
/// the figures that chose the default).
enum class kafka_ack_path {
    /// The producer's main queue signals an eventfd when it turns non-empty; one weft task
    /// per publisher waits on it through the reactor and drains the queue to empty.
    reactor_queue,
    /// librdkafka's background thread takes each report, writes the outcome into the
    /// message's completion slot (allocated up front, one per max_pending) and writes an
    /// eventfd once per batch; one weft task per publisher hands the batch to the publisher.
    background_thread,
};

struct kafka_backend_options {
    /// bootstrap.servers: "host:port[,host:port...]".
    std::string brokers = "127.0.0.1:9092";
    /// Created at start (each with its dead-letter topic "<topic>.dead-letter") through the
    /// admin API; a topic that exists already is kept as it is.
    std::vector<std::string> topics{};
    /// A topic published to or subscribed to that is neither in `topics` nor known to exist is
    /// created on its first use (once per topic per backend; a publish never waits for it: the
    /// message waits inside librdkafka until the topic appears). false: such a publish fails
    /// with `no_stream` once librdkafka gives up on the topic.
    bool create_topics_on_use = true;
    int partitions = 1;          ///< of the topics the backend creates
    int replication_factor = 1;  ///< of the topics the backend creates
    /// linger.ms: how long the producer holds a batch open for more messages.
    std::chrono::milliseconds linger{5};
    /// batch.num.messages: a batch is sent once it holds this many messages, linger or not.
    /// 0: a quarter of the publisher's max_pending (at least 1, at most 10,000, librdkafka's
    /// default). A publisher never has more than max_pending messages out, so with
    /// librdkafka's own 10,000 a batch could only ever leave by linger: every window waited
    /// out `linger` (docs/design/decisions.md has the cost). A
    /// quarter keeps batches ready behind the one in flight (librdkafka 2.0's idempotent
    /// producer sends one produce request per partition at a time).
    std::uint32_t batch_messages = 0;
    /// How delivery reports reach the publisher (see kafka_ack_path).
    kafka_ack_path ack_path = kafka_ack_path::reactor_queue;
    /// message.timeout.ms: an unacknowledged publish fails with `timed_out` after this.
    std::chrono::milliseconds publish_timeout{30'000};
    /// heartbeat.interval.ms: how soon a member learns that its group rebalances (a member
    /// that joined or left); the broker bounds it from below.
    std::chrono::milliseconds heartbeat_interval{500};
    /// Setup calls (topic creation, its metadata): the bound before they fail with timed_out.
    std::chrono::milliseconds admin_timeout{10'000};
    /// How publishes are put on the wire (CloudEvents binary by default; see wire_format.hpp).
    wire_options wire{};
    /// TLS to the brokers (security.protocol=ssl; the host name verified): `brokers` names
    /// their SSL listeners.
    broker_tls tls{};
};

/// Counters of one backend (all producers, all consumers), for measurements and tests.
struct kafka_backend_stats {
    std::uint64_t acks = 0;                 ///< publish outcomes completed
    std::uint64_t wakes = 0;                ///< drain wake-ups (eventfd signals from librdkafka)
    std::uint64_t producers_recreated = 0;  ///< after a fatal error (idempotence broken)
    std::uint64_t resent = 0;  ///< messages re-sent on the new producer after a fatal error
    /// Messages the consumers keep bookkeeping for now (all members together).
    std::uint64_t consumer_entries = 0;
    /// Delivery counts the backend holds now.
    std::uint64_t delivery_counts = 0;
    /// Consumers whose client has left its group and been destroyed, so far.
    std::uint64_t consumers_closed = 0;
};

/// weft::bus over Apache Kafka, through librdkafka (2.0).
///
/// - Start (the constructor): connects an administrative client and creates `topics`
///   (blocking; call it before the runtime starts or in spawn_blocking). Throws
///   std::system_error naming the brokers when none answers within admin_timeout.
/// - Publish: one idempotent producer per publisher (enable.idempotence, acks=all, batching by
///   linger, murmur2_random partitioning as Java clients do): key = the envelope key (order per
///   key within its partition), value = the binary envelope, header `weft-id` = the envelope
///   id. A publish never blocks: librdkafka's queue holds more than max_pending. Delivery
///   reports (by default, kafka_ack_path::reactor_queue; the other path is described there)
///   are events on the producer's main queue, which librdkafka signals on an eventfd
///   when it turns non-empty; one weft task per publisher waits on that with wait_readable and
///   drains the queue to empty, completing each report into the slot the publisher reserved
///   (the slot number travels as the message's opaque). One wake-up per batch; never a task or
///   thread per message, and no weft worker ever waits inside librdkafka. Publishers must be
///   made on a worker of a runtime with a reactor (weft::io_runtime_options).
///   A fatal error of the idempotent producer (librdkafka then fails every message it had not
///   sent yet and refuses new ones) recreates the producer: every message reported failed by
///   the broken one is sent again on the new one, and publishes go on there. Publishes made
///   meanwhile are held (publish_async still returns at once) until the broken producer has
///   reported everything; then the re-sends and the held messages go to the new producer in
///   the order they were first published, so order per key holds across the recreation. The
///   re-sent messages' outcomes come from the new producer; one the broker had stored before
///   the failure may be stored twice (at-least-once; its first copy is in order).
/// - Subscribe: a consumer per member, group.id = the group (cooperative-sticky assignment, so
///   a member joining does not take partitions away from one that is working). A thread per
///   member serves its group events (rebalances) at all times; next() takes messages from a
///   queue of their own without waiting, and otherwise waits on that queue's eventfd. A member
///   keeps bookkeeping for the messages it has not settled only. Offsets are stored on ack (per
///   partition, up to the first message not settled) and committed by librdkafka every 100 ms,
///   before a revoke and at close. nack (with its delay), redelivery after ack_wait and
///   in_progress are the client's: the member holding the partition delivers the message again,
///   due retries and fresh messages in turn, so a retry never waits for the backlog and the
///   backlog moves on meanwhile. A message left unsettled while 1,000 later ones were fetched
///   is requeued: a copy goes to the end of its partition (headers weft-requeued-for = the
///   group, weft-deliveries = its deliveries so far), and once Kafka has it the committed offset
///   passes the original; other groups skip the copy. term, and the failure of the last of
///   max_deliveries, publish the envelope to the dead-letter topic; it counts as settled once
///   Kafka has the dead letter. Delivery counts (attempt) are kept by the member holding the
///   partition; a member that loses a partition hands them to the next member in this process
///   (kept only while the group has another member in this backend), and a requeued copy
///   carries them anywhere. A member that closes leaves its group at once; what it had not
///   settled goes to the member that takes its partitions, from the last committed offset, as
///   do the unsettled deliveries of a partition revoked from a member. Dropping a member's last
///   reference (a delivery, a subscription never closed) never waits: its client is closed on
///   the backend's closer thread.
/// Any thread may call any member. Must outlive every publisher, subscriber and delivery made
/// from it.
///
///     weft::bus::kafka_backend kafka{{.brokers = "127.0.0.1:9092", .topics = {"orders"}}};
///     weft::runtime rt{weft::io_runtime_options(2)};
///     rt.block_on([&]() -> weft::task<void> { weft::bus::publisher pub{kafka}; ... });
class kafka_backend final : public backend {
public:
    explicit kafka_backend(kafka_backend_options options);
    kafka_backend(const kafka_backend&) = delete;
    auto operator=(const kafka_backend&) -> kafka_backend& = delete;
    ~kafka_backend() override;

    [[nodiscard]] auto name() const noexcept -> std::string_view override { return "kafka"; }
    [[nodiscard]] auto features() const noexcept -> backend_features override;
    auto make_producer(publish_sink& sink, std::uint32_t max_pending)
        -> result<std::unique_ptr<backend_producer>> override;
    auto make_consumer(consumer_config config)
        -> task<result<std::shared_ptr<backend_consumer>>> override;

    [[nodiscard]] auto stats() const noexcept -> kafka_backend_stats;

    /// For tests: raises a fatal error in every producer of this backend now
    /// (rd_kafka_test_fatal_error), as librdkafka does itself when the idempotent producer's
    /// state cannot be recovered (an out-of-order sequence after a broker lost messages...).
    /// Each producer is recreated and what it had not had acknowledged is re-sent.
    void raise_fatal_error_for_test(const std::string& reason);

    /// For tests: runs `job` on the thread that closes the backend's clients, before any client
    /// handed to that thread after this call (a job that waits holds their closing).
    void run_on_closer_for_test(std::function<void()> job);

    struct connection;

private:
    std::shared_ptr<connection> conn_;
};

}  // namespace weft::bus
