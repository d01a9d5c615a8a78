#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
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
/// Bookkeeping: an entry per message that is not settled, and nothing for one that is.
///   pending        handed out (its token in `tokens_`), settled or expired by `when`;
///   retry          to be handed out again at `when` (nacked, or its ack timeout passed);
///   dead_lettering its dead letter is on its way to Kafka (then settled, or retry if refused);
///   settled        settled, while a copy of it is ahead in its partition (see requeue): kept,
///                  without its envelope, until that copy is fetched and skipped.
/// Each entry holds a place in its partition, its anchor: the offset of the record it came
/// from, or of the copy that took over from that record. Per partition,
///   `fetched` = one past the last offset taken from the queue, and the offset stored for
///   commit = the lowest anchor below `fetched`, or `fetched` when there is none.
/// Every record below `fetched` without an anchor is settled, so a member that restarts from
/// the commit delivers again only what may not be. Offsets are stored under `mu_`
/// (rd_kafka_offsets_store: local, never waits); librdkafka commits them every 100 ms, before
/// it revokes a partition and when the member closes. A crash loses at most the last interval's
/// commits: those messages come again (at-least-once).
///
/// next() hands out due retries and fresh messages in turn, so a nacked message comes back
/// after its delay whatever the backlog behind it, and the backlog still moves. Requeue: an
/// unsettled entry whose anchor is more than `requeue_lag` records behind `fetched` holds the
/// commit back; a copy of it (its envelope, with the headers weft-requeued-for = the group,
/// weft-requeued-from = the anchor and weft-deliveries = its attempt) is produced into its own
/// partition, and once Kafka stores it the entry's anchor moves to the copy: the commit passes the
/// acked messages behind it. The entry is still handed out from memory meanwhile; when its copy is
/// fetched, the copy holds its place from there (or, settled by then, is skipped). Another group
/// skips the copy (weft-requeued-for names another), and a member that meets a copy it did not make
/// (the partition was another member's) delivers it as the message, counting on from
/// weft-deliveries. Memory: `entries_` <= unsettled messages + copies ahead of settled ones.
///
/// Delivery counts (attempt) live in the entries. A member that loses a partition (revoked,
/// or closing) hands the counts of what it had not settled to the backend's connection, which
/// keeps them only while another member of the group lives in this backend (see
/// kafka_backend::connection::counts).
///
/// Two queues per member. librdkafka's consumer queue carries the group's events: the
/// rebalances that the group protocol waits for every member to take part in. A thread of the
/// member's own (`group_thread_`) serves it at all times, whatever the application does: a
/// member holding a delivery, or whose task waits elsewhere, still revokes, assigns and
/// rejoins at once. (When next() alone served it, such a member stalled every rebalance of
/// its group up to the rebalance timeout, max.poll.interval.ms, and a member closing meanwhile
/// blocked in rd_kafka_consumer_close as long. With the group thread's polls, a member that
/// misses that timeout is gone or frozen, so it is 10 s, not librdkafka's 300.) Messages go to
/// `msgs_`: the rebalance callback forwards each assigned partition's queue there before
/// assigning it, and next() takes them from it without waiting, or waits on its eventfd in the
/// reactor. The group thread also closes the client (rd_kafka_consumer_close serves the last
/// rebalance on the calling thread). Assignment is cooperative-sticky: a member joining or
/// leaving never takes partitions from a member that keeps working, so a delivery held by
/// in_progress stays where it is.
///
/// Lifetime: made by make(), whose shared_ptr hands the destruction (which joins the group
/// thread, itself waiting in rd_kafka_consumer_close up to session.timeout.ms) to the
/// connection's closer thread: the last reference may go on any thread, a runtime worker
/// too, and that thread never waits for the group.
///
/// Locks: `mu_` (the entries) before `rk_mu_` (the client pointers, which close_client
/// clears) and the connection's counts_mu; never the other way round. Nothing waits under
/// either.
class kafka_consumer final : public backend_consumer,
                             public kafka_copy_sink,
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
    void copy_done(kafka_copy kind, std::uint64_t entry, std::int64_t offset) override;
    auto entries() -> std::size_t override;

    /// Records an unsettled entry may hold the commit back by before it is requeued: what a
    /// member taking the partition over (after a crash) delivers again at most, beyond the
    /// unsettled ones.
    static constexpr std::int64_t requeue_lag = 1'000;

private:
    using clock = std::chrono::steady_clock;
    enum class entry_state { pending, retry, dead_lettering, settled };
    struct entry {
        std::shared_ptr<const envelope> env;  // null once settled
        std::int32_t partition = 0;
        std::int64_t anchor = 0;
        entry_state state = entry_state::pending;
        std::uint64_t token = 0;  // of the pending delivery; 0 otherwise
        std::uint32_t attempt = 0;
        clock::time_point when{};  // pending: its ack timeout; retry: when it is due
        bool copying = false;      // a requeued copy is on its way to Kafka
    };
    struct partition_state {
        std::int64_t fetched = -1;  // one past the last offset taken; -1: none yet
        std::int64_t stored = -1;   // what was stored for commit last
        std::map<std::int64_t, std::uint64_t> anchors;  // offset -> entry
    };
    struct copy_request {
        kafka_copy kind;
        std::uint64_t entry;
        std::int32_t partition;
        std::int64_t anchor;
        std::shared_ptr<const envelope> env;
        std::string reason;  // dead letters
        std::uint32_t deliveries;
        /// A record no wire mode reads (a malformed event): `env` holds it as it came (key,
        /// value as payload, headers) and `reason` its defect; it goes to the dead letters
        /// unchanged but for the headers weft-malformed and weft-original-topic.
        bool raw;
    };
    using entry_iter = std::unordered_map<std::uint64_t, entry>::iterator;

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
    /// uncommitted, their counts handed over (and the member leaves the group, when `leaving`).
    void revoked(const rd_kafka_topic_partition_list_t* partitions, bool leaving);
    /// revoked(), under mu_.
    void drop(const rd_kafka_topic_partition_list_t* partitions, bool leaving);
    void wake() const noexcept;
    auto message_key(std::int32_t partition, std::int64_t offset) const -> kafka_message_key;

    // Under mu_:
    /// The entry of a fetched record to hand out, or end when there is none (settled, not
    /// this group's, or a copy of an entry held here).
    auto fetched(const rd_kafka_message_t* m, std::vector<copy_request>& copies) -> entry_iter;
    /// Expires the ack timeouts passed, then returns the earliest due retry (end: none;
    /// `next_due` = when the next one falls due, or max).
    auto due(clock::time_point now, std::vector<copy_request>& copies, clock::time_point& next_due)
        -> entry_iter;
    /// The pending entry of `token`; expires it (and returns end) when its time has passed.
    auto find_pending(std::uint64_t token, std::vector<copy_request>& copies) -> entry_iter;
    /// To the retries, due at `due_at`, or to the dead letters after the last delivery allowed.
    void expire(entry_iter it, clock::time_point due_at, std::vector<copy_request>& copies);
    void dead_letter(entry_iter it, std::string reason, std::vector<copy_request>& copies);
    auto hand_out(entry_iter it, clock::time_point now) -> delivery;
    /// The entry becomes `state` (pending or retry) with its time `when`.
    void set_timer(entry_iter it, entry_state state, clock::time_point when);
    /// The entry leaves the timers and its token is void.
    void untime(entry_iter it);
    void settle(entry_iter it);
    void erase(entry_iter it);
    void move_anchor(entry_iter it, std::int64_t to);
    /// Requeues the entry at the front of `partition` when it holds the commit back too far.
    void check_lag(std::int32_t partition, std::vector<copy_request>& copies);
    /// Stores the partition's commit offset when it moved.
    void store(std::int32_t partition);

    // For next() (consumer-side, one at a time):
    /// The earliest due retry, after expiring the ack timeouts passed; `next_due` = when the
    /// next one falls due (max: none).
    auto take_due(clock::time_point& next_due) -> std::optional<delivery>;
    /// A fresh message from the queue (`took`: a record was taken, even with nothing to hand
    /// out); subscription_closed once closing.
    auto take_fresh(bool& took) -> result<std::optional<delivery>>;

    /// Not under mu_: hands the copies to the connection.
    void send(std::vector<copy_request>& copies);

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
    // Group thread only (serve_group and the rebalance callback): an assignment, even an
    // empty one, has come since the member joined.
    bool assigned_once_ = false;

    std::mutex mu_;
    std::unordered_map<std::uint64_t, entry> entries_;              // guarded by mu_: by entry id
    std::unordered_map<std::int32_t, partition_state> parts_;       // guarded by mu_
    std::set<std::pair<clock::time_point, std::uint64_t>> timers_;  // guarded by mu_: pending
                                                                    // and retry entries by when
    std::unordered_map<std::uint64_t, std::uint64_t> tokens_;  // guarded by mu_: token -> entry
    std::uint64_t next_id_ = 0;                                // guarded by mu_: entries, tokens
    bool joined_ = false;                                      // guarded by mu_
    bool retry_last_ = false;  // next() only: whether the last delivery was a retry
    std::atomic<bool> closed_{false};
};

}  // namespace weft::bus
