#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kafka_connection.hpp"
#include "weft/bus/backend.hpp"

namespace weft::bus {

/// One member of a consumer group on Kafka: its own librdkafka consumer (group.id = the
/// group). next() is consumer-side (one at a time); the settle calls come from any thread.
///
/// Every message fetched is an entry of `entries_`, keyed (partition, offset), until the
/// committed offset passes it. An entry is
///   pending        handed out (its token in `tokens_`), settled or expired by `when`;
///   retry          to be handed out again at `when` (nacked, or its ack timeout passed);
///   dead_lettering its dead letter is on its way to Kafka (then acked, or retry if refused);
///   acked          settled.
/// Per partition, the stored offset is one past the longest run of acked entries at the
/// front: `entries_` of a partition == every fetched offset >= its stored offset. Offsets are
/// stored under `mu_` (rd_kafka_offsets_store: local, never waits), so two of one partition
/// never pass each other; librdkafka commits the stored offsets every 100 ms, before it
/// revokes a partition and when the member closes. A crash loses at most the last interval's
/// commits: those messages come again (at-least-once).
///
/// Two queues per member. librdkafka's consumer queue carries the group's events: the
/// rebalances that the group protocol waits for every member to take part in. A thread of the
/// member's own (`group_thread_`) serves it at all times, whatever the application does: a
/// member holding a delivery, or whose task waits elsewhere, still revokes, assigns and
/// rejoins at once. (When next() alone served it, such a member stalled every rebalance of
/// its group up to the broker's rebalance timeout, max.poll.interval.ms = 300 s, and a member
/// closing meanwhile blocked in rd_kafka_consumer_close as long.) Messages go to `msgs_`: the
/// rebalance callback forwards each assigned partition's queue there before assigning it, and
/// next() takes them from it without waiting, or waits on its eventfd in the reactor. The
/// group thread also closes the client (rd_kafka_consumer_close serves the last rebalance on
/// the calling thread). Assignment is
/// cooperative-sticky: a member joining or leaving never takes partitions from a member that
/// keeps working, so a delivery held by in_progress stays where it is.
///
/// Lifetime: made by make(), whose shared_ptr hands the destruction (which joins the group
/// thread, itself waiting in rd_kafka_consumer_close up to session.timeout.ms) to the
/// connection's closer thread: the last reference may go on any thread, a runtime worker
/// too, and that thread never waits for the group.
///
/// Locks: `mu_` (the entries) before `rk_mu_` (the client pointers, which close_client
/// clears); never the other way round. Nothing waits under either.
class kafka_consumer final : public backend_consumer,
                             public kafka_dead_letter_sink,
                             public kafka_consumer_probe,
                             public std::enable_shared_from_this<kafka_consumer> {
public:
    static auto make(std::shared_ptr<kafka_backend::connection> conn, consumer_config config)
        -> task<result<std::shared_ptr<backend_consumer>>>;

    kafka_consumer(const kafka_consumer&) = delete;
    auto operator=(const kafka_consumer&) -> kafka_consumer& = delete;
    ~kafka_consumer() override;

    auto next() -> task<result<delivery>> override;
    auto ack(std::uint64_t token) -> result<void> override;
    auto nack(std::uint64_t token, std::chrono::milliseconds delay) -> result<void> override;
    auto term(std::uint64_t token, std::string_view reason) -> result<void> override;
    auto in_progress(std::uint64_t token) -> result<void> override;
    void close() noexcept override;
    void dead_letter_done(std::int32_t partition, std::int64_t offset, bool ok) override;
    auto entries() -> std::size_t override;

private:
    using clock = std::chrono::steady_clock;
    using key = std::pair<std::int32_t, std::int64_t>;  // partition, offset
    enum class entry_state { pending, retry, dead_lettering, acked };
    struct entry {
        std::shared_ptr<const envelope> env;
        entry_state state = entry_state::pending;
        std::uint64_t token = 0;
        std::uint32_t attempt = 0;
        clock::time_point when{};
    };
    struct dead_letter {
        key where;
        std::shared_ptr<const envelope> env;
        std::string reason;
        std::uint32_t deliveries;
    };

    kafka_consumer(std::shared_ptr<kafka_backend::connection> conn, consumer_config config);

    /// Blocking (spawn_blocking): the client, its subscription, the messages' queue with its
    /// eventfd, and the group thread.
    auto open() -> std::error_code;
    /// Blocking: ends the group thread, which leaves the group and destroys the client.
    void close_client() noexcept;
    /// The group thread: serves the consumer queue until `stop_group_`, then closes `rk`.
    void serve_group(rd_kafka_t* rk, rd_kafka_queue_t* msgs) noexcept;
    static void on_rebalance(rd_kafka_t* rk,
                             rd_kafka_resp_err_t err,
                             rd_kafka_topic_partition_list_t* partitions,
                             void* opaque);
    /// The deliveries of partitions taken from this member (null: all) are void: dropped,
    /// uncommitted.
    void revoked(const rd_kafka_topic_partition_list_t* partitions);
    void wake() const noexcept;
    auto message_key(key k) const -> kafka_message_key;
    /// The pending entry of `token`; expires it (and returns end) when its time has passed.
    auto find_pending(std::uint64_t token, std::vector<dead_letter>& dead)
        -> std::map<key, entry>::iterator;
    void expire(std::map<key, entry>::iterator it,
                clock::time_point now,
                std::vector<dead_letter>& dead);
    auto hand_out(std::map<key, entry>::iterator it, clock::time_point now) -> delivery;
    void advance(std::int32_t partition);
    void send(std::vector<dead_letter>& dead);

    std::shared_ptr<kafka_backend::connection> conn_;
    const consumer_config config_;
    const std::string group_topic_;
    int efd_ = -1;  // the messages' queue's io event; close() writes it too

    std::mutex rk_mu_;
    rd_kafka_t* rk_ = nullptr;          // guarded by rk_mu_; null once closing
    rd_kafka_queue_t* msgs_ = nullptr;  // guarded by rk_mu_; null once closing
    // The same queue for the rebalance callback, which runs on the group thread only (set
    // before that thread starts, released after it ends).
    rd_kafka_queue_t* assigned_to_ = nullptr;
    // Set (release) by close_client; the group thread reads it (acquire) between polls.
    std::atomic<bool> stop_group_{false};
    std::thread group_thread_;

    std::mutex mu_;
    std::map<key, entry> entries_;                   // guarded by mu_
    std::unordered_map<std::uint64_t, key> tokens_;  // guarded by mu_: pending entries
    std::uint64_t next_token_ = 0;                   // guarded by mu_
    std::atomic<bool> closed_{false};
};

}  // namespace weft::bus
