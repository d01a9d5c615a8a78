#pragma once

// What the Kafka backend's producers and consumers share: the options, an administrative
// client (topic creation, dead letters), the set of topics known to exist, delivery counts,
// and the thread that closes clients (librdkafka's close and destroy block).

#include <librdkafka/rdkafka.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

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
/// write lock, as it does for every message produced by name.
[[nodiscard]] auto kafka_produce(rd_kafka_t* rk,
                                 const char* topic,
                                 std::string_view key,
                                 std::string_view value,
                                 rd_kafka_headers_t* headers,
                                 void* opaque,
                                 rd_kafka_topic_t* rkt = nullptr) -> rd_kafka_resp_err_t;

/// Where a message of a group is: the key of its delivery count.
struct kafka_message_key {
    std::string group_topic;  // group '\0' topic
    std::int32_t partition = 0;
    std::int64_t offset = 0;
    auto operator==(const kafka_message_key&) const -> bool = default;
};
struct kafka_message_key_hash {
    auto operator()(const kafka_message_key& k) const noexcept -> std::size_t {
        return std::hash<std::string>{}(k.group_topic) ^
               (std::hash<std::int64_t>{}(k.offset) * 31 + static_cast<std::size_t>(k.partition));
    }
};

/// Told when a dead letter is stored (ok) or not. Called on librdkafka's background thread.
class kafka_dead_letter_sink {
public:
    virtual void dead_letter_done(std::int32_t partition, std::int64_t offset, bool ok) = 0;

protected:
    kafka_dead_letter_sink() = default;
    kafka_dead_letter_sink(const kafka_dead_letter_sink&) = default;
    auto operator=(const kafka_dead_letter_sink&) -> kafka_dead_letter_sink& = default;
    ~kafka_dead_letter_sink() = default;
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

    /// Deliveries of a message to its group so far (attempt numbers); erased once settled.
    std::mutex counts_mu;
    std::unordered_map<kafka_message_key, std::uint32_t, kafka_message_key_hash> counts;

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
    /// One more delivery of `key`: its attempt number (1 for the first).
    auto count_delivery(const kafka_message_key& key) -> std::uint32_t;
    void forget(const kafka_message_key& key);
    /// For stats(): `c` is counted until it expires.
    void add_consumer(std::weak_ptr<kafka_consumer_probe> c);
    /// Publishes the encoded dead letter `bytes` (key `key`) to `topic`; `sink` hears about it
    /// on librdkafka's background thread, unless it has expired by then.
    void dead_letter(std::weak_ptr<kafka_dead_letter_sink> sink,
                     std::int32_t partition,
                     std::int64_t offset,
                     const std::string& topic,
                     std::string_view key,
                     const std::string& bytes);
    /// Runs `job` on the closer thread (here, once the closer thread stopped).
    void close_later(std::function<void()> job);
    /// Runs the jobs handed to the closer thread so far and stops it. Idempotent.
    void shutdown() noexcept;
};

}  // namespace weft::bus
