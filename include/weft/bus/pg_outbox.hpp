#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "weft/bus/envelope.hpp"
#include "weft/bus/outbox_metrics.hpp"
#include "weft/bus/pg_connection.hpp"
#include "weft/bus/publisher.hpp"
#include "weft/bus/relay_options.hpp"
#include "weft/core/result.hpp"
#include "weft/core/task.hpp"

namespace weft::bus {

struct pg_outbox_options {
    /// libpq connection string of the relay's own connection ("host=... port=... user=...").
    std::string conninfo;
    /// The outbox table; dead letters in `<table>_dead`; versions in weft_schema_versions.
    /// Letters, digits and `_`, not starting with a digit, at most 54 characters (the
    /// constructor throws std::invalid_argument otherwise); quoted in every statement, so its
    /// case is kept.
    std::string table = "weft_outbox";
    /// Keys are hashed (FNV-1a) into this many partitions; each is published by one relay at a
    /// time. Fixed for the life of the table: rows staged under another count are never read.
    std::uint32_t partitions = 16;
    /// At most this many partitions per relay (0: no cap beyond the fair share).
    std::uint32_t max_owned_partitions = 0;
    /// How often a relay counts the live relays (the holders of the presence lock) and, when
    /// under its fair share, tries to take free partitions. A relay joining is seen by the
    /// others within about this long; a relay leaving, too.
    std::chrono::milliseconds rebalance_interval{1000};
    /// Opt-in wake-up across processes: stage() adds `pg_notify('<table>_wake', '')` to the
    /// caller's transaction and the relay LISTENs on its connection, so a commit anywhere wakes
    /// an idle relay at once rather than at its next poll. Off by default: a transaction that
    /// has sent NOTIFY takes a database-wide lock at COMMIT (to queue the notification in
    /// commit order), which serialises every such commit; with adaptive polling the relay
    /// finds work within min_poll..max_poll anyway.
    bool listen_notify = false;
    /// Whether the relay's transactions (its deletes and claims) wait for their WAL to reach
    /// the disk at COMMIT. Off by default (`SET synchronous_commit = off` on the relay's own
    /// connection; the business transactions that stage keep the server's setting): a delete
    /// the server loses in a crash of its own only brings rows back that were published
    /// already, and the relay publishes them again under the same envelope id (as after a
    /// relay crash between ack and delete). The WAL is replayed in order, so what comes back
    /// is a suffix of what was deleted: per key, a prefix is never lost. On: each batch
    /// waits for an fsync.
    bool durable_deletes = false;
    relay_options relay{};
};

/// The transactional outbox on PostgreSQL, for deployments with several relays.
///
/// - `stage(conn, env)` inserts the event on the caller's connection, inside the caller's open
///   transaction (`BEGIN` ... `COMMIT` on a weft::bus::pg_connection); after COMMIT the
///   caller may `notify()` a relay in this process. `metrics().staged` counts the event when
///   that transaction commits (pg_connection::on_commit); the outbox must outlive it. LISTEN/NOTIFY
///   only with `listen_notify` (off by default: a transaction that sends NOTIFY takes a global lock
///   at commit, serialising every commit).
/// - Relays: each owns partitions through session advisory locks
///   (pg_try_advisory_lock(class, partition)) on its own connection, which the server releases
///   when that connection ends (a killed relay's partitions are free at once).
/// - Rebalancing: every relay also holds a shared advisory lock on a presence key (class,
///   2147483647) for as long as its session, and counts its holders in pg_locks once per
///   rebalance_interval: the live relays. Its fair share is ceil(partitions / live) (capped by
///   max_owned_partitions). A relay above its share stops claiming from the excess partitions
///   (the highest numbered) and unlocks each only once it holds no row of it: every row it
///   claimed from it published and deleted (or dead-lettered), or dropped unpublished and left
///   staged, and that deletion committed. So a partition changes hands only while no relay has
///   a row of it in flight, and per-key order holds across relays. A relay under its share
///   tries the free partitions. Within its
///   partitions a relay claims the oldest rows with `FOR UPDATE SKIP LOCKED`, publishes them
///   (order per key, as relay_options says), then deletes the published ones and moves the
///   dead ones: each round trip (one transaction) deletes what was acknowledged since the last
///   and claims the next batch while the earlier ones are still being published; a key in
///   back-off after a failed publish is left out of the claims (its rows wait in the relay, in
///   order). A relay below its share (one that owns no partition too) tries the free ones once
///   per rebalance_interval.
/// - The relay ends with `publisher_closed` once its publisher is closed (the rows it held
///   stay staged).
/// - Order per key is `seq` order (bigserial, assigned at insert) among committed rows: two
///   transactions staging the same key must serialise on the business row (they normally do:
///   both update the aggregate), or a later insert can commit first.
/// - The relay's own session sets `enable_sort = off` and `jit = off`: its claim walks the seq
///   index and stops after a batch whatever the table's statistics (a table never analyzed got
///   a scan and sort of the whole backlog per claim), and no plan is JIT-compiled.
/// - Everything goes through libpq in non-blocking mode on the reactor (pg_connection).
/// Any task may call stage/notify/stop_relay/metrics; run_relay once at a time per object.
class pg_outbox {
public:
    explicit pg_outbox(pg_outbox_options options);
    pg_outbox(const pg_outbox&) = delete;
    auto operator=(const pg_outbox&) -> pg_outbox& = delete;
    ~pg_outbox();

    /// Creates or migrates the schema (idempotent; serialised between processes by an
    /// advisory transaction lock).
    auto migrate(pg_connection& conn) -> task<result<void>>;
    auto stage(pg_connection& conn, envelope env) -> task<result<message_id>>;
    void notify() noexcept;
    /// Connects, takes partitions and relays until stop_relay() or the task is stopped (then
    /// ok), or until `pub` is closed (`publisher_closed`). Reads `pub.results()`: give the
    /// relay a publisher of its own.
    auto run_relay(publisher& pub) -> task<result<void>>;
    /// As sqlite_outbox::stop_relay (a stop asked before a spawned run starts ends that run).
    void stop_relay() noexcept;
    [[nodiscard]] auto metrics() const noexcept -> outbox_metrics;
    /// Partitions this object's relay owns now.
    [[nodiscard]] auto owned_partitions() const noexcept -> std::uint32_t;
    /// The partition of `key` (FNV-1a modulo partitions).
    [[nodiscard]] auto partition_of(std::string_view key) const noexcept -> std::uint32_t;

    struct state;

private:
    std::unique_ptr<state> s_;
};

}  // namespace weft::bus
