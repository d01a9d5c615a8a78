#pragma once

// What the Kafka backend's producers and consumers share: the options, an administrative
// client (topic creation, dead letters, requeued copies), the set of topics known to exist,
// delivery counts handed over between members, and the thread that closes clients
// (librdkafka's close and destroy block).

#include <librdkafka/rdkafka.h>

#include <atomic>
#include <compare>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cloudevents.hpp"
#include "weft/bus/kafka_backend.hpp"

namespace weft::bus {

/// The error value of a librdkafka error code.
[[nodiscard]] auto kafka_error(rd_kafka_resp_err_t err) -> std::error_code;

/// Whether a delivery report proves the message stored: no error and an offset. librdkafka
/// (2.0.2 here) also reports success without an offset (RD_KAFKA_OFFSET_INVALID) for a message
/// it never saw acknowledged, when a later batch of its partition was ("implicitly acked by
/// subsequent batch success"), assuming the broker refuses a sequence gap. A broker without
/// state for the producer on that partition accepts a first batch that does not start at
/// sequence 0, though: a fresh producer whose first batch was refused (NOT_LEADER while a new
/// topic's or a restarted broker's partition got its leader) and whose second was stored is
/// told the first was delivered, and it never was (the outbox chaos test lost events this way:
/// docs/testing.md, "Chaos"). Such a report is bus_errc::unconfirmed, which the publisher's caller
/// retries; a re-sent message that had been stored is stored twice (at least once).
[[nodiscard]] inline auto kafka_confirmed(const rd_kafka_message_t* m) noexcept -> bool {
    return m->err == RD_KAFKA_RESP_ERR_NO_ERROR && m->offset >= 0;
}

/// A librdkafka configuration with `bootstrap.servers` and the given properties set; throws
/// std::system_error (invalid_argument) naming a property librdkafka refuses.
[[nodiscard]] auto kafka_conf(const kafka_backend_options& options,
                              std::initializer_list<std::pair<const char*, std::string>> props)
    -> rd_kafka_conf_t*;

/// Produces one message (copied; an empty key is no key) through rd_kafka_produceva rather
/// than rd_kafka_producev's RD_KAFKA_V_ macros (GNU statement expressions, which clang refuses
/// under -Wpedantic -Werror). Never blocks. `headers` (may be null) is the message's once
/// produced; on an error it is still the caller's. `rkt`, when given, is `topic`'s handle in
/// `rk` (rd_kafka_topic_new): librdkafka then skips looking the name up under its client's
/// write lock, as it does for every message produced by name. `partition`: where it goes
/// (RD_KAFKA_PARTITION_UA: the partitioner decides).
[[nodiscard]] auto kafka_produce(rd_kafka_t* rk,
                                 const char* topic,
                                 std::string_view key,
                                 std::string_view value,
                                 rd_kafka_headers_t* headers,
                                 void* opaque,
                                 rd_kafka_topic_t* rkt = nullptr,
                                 std::int32_t partition = RD_KAFKA_PARTITION_UA)
    -> rd_kafka_resp_err_t;

/// The record value and headers of `env` as `wire` says: in binary mode the payload (a view of
/// env.payload) and the ce_ headers with content-type; structured, the JSON event (in
/// `buffer`) with content-type application/cloudevents+json; weft, the binary encoding (in
/// `buffer`) with `weft-id`. `headers` is new and the caller's (null on an error). Errors:
/// not_expressible (the CloudEvents modes).
[[nodiscard]] auto kafka_record(const envelope& env,
                                const wire_options& wire,
                                std::string& buffer,
                                std::string_view& value,
                                rd_kafka_headers_t*& headers) -> std::error_code;

/// The headers of a received record, appended to `out` (views into `m`, valid while it is).
void kafka_headers(const rd_kafka_message_t* m, std::vector<cloudevents::wire_header>& out);

/// Where a message of a group is: the key of its delivery count. Ordered by group, partition,
/// offset, so that a partition's counts below an offset are one range.
struct kafka_message_key {
    std::string group_topic;  // group '\0' topic
    std::int32_t partition = 0;
    std::int64_t offset = 0;
    auto operator<=>(const kafka_message_key&) const = default;
};

/// What a consumer has Kafka store for it through the administrative client: a dead letter, or
/// a copy of a message in its own partition that takes over the message's place (requeue).
enum class kafka_copy { dead_letter, requeue };

/// Told whether a copy is stored. Called on librdkafka's background thread (or inline, from
/// kafka_backend::connection::copy, when the copy is refused at once).
class kafka_copy_sink {
public:
    /// The copy made for `entry` is stored at `offset`, or is not (`offset` < 0).
    virtual void copy_done(kafka_copy kind, std::uint64_t entry, std::int64_t offset) = 0;

protected:
    kafka_copy_sink() = default;
    kafka_copy_sink(const kafka_copy_sink&) = default;
    auto operator=(const kafka_copy_sink&) -> kafka_copy_sink& = default;
    ~kafka_copy_sink() = default;
};

/// What stats() asks a consumer: how many messages its bookkeeping holds.
class kafka_consumer_probe {
public:
    [[nodiscard]] virtual auto entries() -> std::size_t = 0;

protected:
    kafka_consumer_probe() = default;
    kafka_consumer_probe(const kafka_consumer_probe&) = default;
    auto operator=(const kafka_consumer_probe&) -> kafka_consumer_probe& = default;
    ~kafka_consumer_probe() = default;
};

/// What raise_fatal_error_for_test reaches: a producer.
class kafka_fatal_target {
public:
    virtual void raise_fatal(const std::string& reason) = 0;

protected:
    kafka_fatal_target() = default;
    kafka_fatal_target(const kafka_fatal_target&) = default;
    auto operator=(const kafka_fatal_target&) -> kafka_fatal_target& = default;
    ~kafka_fatal_target() = default;
};

struct kafka_backend::connection {
    kafka_backend_options options;
    /// A producer for dead letters and the admin API. Its delivery reports and asynchronous
    /// admin results go to librdkafka's background thread (background_event_cb).
    rd_kafka_t* aux = nullptr;

    std::mutex topics_mu;
    std::unordered_set<std::string> known_topics;  // guarded by topics_mu: exist or are made

    /// Delivery counts handed from a member that lost a message's partition (revoked, or
    /// closing) to the member of this backend that takes the partition next, so that attempt
    /// and max_deliveries hold across the members of one process. Kept only while another
    /// member of the group lives here; taken when the message is fetched again here; dropped
    /// when a member here stores an offset past it, and with the group's last member here. A
    /// partition that went to another process keeps at most the counts of its last revoke.
    std::mutex counts_mu;
    std::map<kafka_message_key, std::uint32_t> counts;     // guarded by counts_mu
    std::unordered_map<std::string, std::size_t> members;  // guarded by counts_mu: per group

    /// Clients whose close and destroy block: done here, one thread per backend, in order.
    std::mutex closer_mu;
    std::condition_variable closer_cv;
    std::deque<std::function<void()>> closer_jobs;  // guarded by closer_mu
    bool closer_stop = false;                       // guarded by closer_mu
    std::thread closer;

    /// The producers alive (expired entries are pruned when one is added).
    std::mutex producers_mu;
    std::vector<std::weak_ptr<kafka_fatal_target>> producers;  // guarded by producers_mu

    /// The consumers alive, for stats() (expired entries are pruned when one is added).
    std::mutex consumers_mu;
    std::vector<std::weak_ptr<kafka_consumer_probe>> consumers;  // guarded by consumers_mu

    // Statistics: relaxed, counters only.
    std::atomic<std::uint64_t> acks{0};
    std::atomic<std::uint64_t> wakes{0};
    std::atomic<std::uint64_t> producers_recreated{0};
    std::atomic<std::uint64_t> resent{0};
    std::atomic<std::uint64_t> consumers_closed{0};

    connection() = default;
    connection(const connection&) = delete;
    auto operator=(const connection&) -> connection& = delete;
    ~connection();

    /// Blocking: creates the topics that are not known yet and waits until the brokers'
    /// metadata shows them.
    auto ensure_topics(const std::vector<std::string>& topics) -> std::error_code;
    /// Never waits: asks for `topic` to be created once (when create_topics_on_use), unless
    /// it is known.
    void ensure_topic_async(std::string_view topic);
    /// A member of `group_topic` starts here.
    void join_group(const std::string& group_topic);
    /// A member of `group_topic` gives up `counts` (deliveries so far of messages it holds
    /// unsettled), and, when `leaving`, ends: they are kept only when another member of the
    /// group lives here; the group's counts go with its last member.
    void hand_over(const std::string& group_topic,
                   std::vector<std::pair<kafka_message_key, std::uint32_t>> counts,
                   bool leaving);
    /// The deliveries of `key` handed over (0: none); they are the taker's now.
    auto take_count(const kafka_message_key& key) -> std::uint32_t;
    /// The messages of `group_topic`'s `partition` below `offset` are settled.
    void settled_below(const std::string& group_topic, std::int32_t partition, std::int64_t offset);
    /// For stats(): `c` is counted until it expires.
    void add_consumer(std::weak_ptr<kafka_consumer_probe> c);
    /// Publishes `bytes` (key `key`, `headers` if not null, taken) to `topic`, to `partition`
    /// (RD_KAFKA_PARTITION_UA: the partitioner's choice); `sink` hears whether it is stored,
    /// unless it has expired by then. Never waits.
    void copy(std::weak_ptr<kafka_copy_sink> sink,
              kafka_copy kind,
              std::uint64_t entry,
              const std::string& topic,
              std::int32_t partition,
              std::string_view key,
              const std::string& bytes,
              rd_kafka_headers_t* headers);
    /// Runs `job` on the closer thread (here, once the closer thread stopped).
    void close_later(std::function<void()> job);
    /// Runs the jobs handed to the closer thread so far and stops it. Idempotent.
    void shutdown() noexcept;
};

}  // namespace weft::bus
