#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "weft/bus/backend.hpp"
#include "weft/bus/broker_tls.hpp"
#include "weft/bus/wire_format.hpp"

namespace weft::bus {

/// Where a stream keeps its messages. File storage is as durable as the server makes it: with
/// `sync_interval: always` in the server's jetstream block (scripts/brokers.sh sets it) every
/// write is fsynced before the ack, so an acknowledged message survives a crash of the server
/// process and of the machine; with the server's default (fsync every 2 minutes) the last
/// acknowledged writes may be only in the kernel's page cache, which a crash of the process
/// keeps but a crash of the machine (power, kernel) loses. A per-server
/// setting: nats-server 2.15 has no per-stream "sync always" (only `persist_mode: async`,
/// which weakens it), and a client cannot see it, so the backend cannot check it.
enum class nats_storage {
    file,    ///< survives a server restart (durable; see above for a crash)
    memory,  ///< lost when the server stops
};

/// How a publisher's acks, which cnats reports on its own thread, reach the publisher
/// (docs/design/decisions.md has the figures that chose the default).
enum class nats_ack_path {
    /// cnats's thread writes each outcome into the message's completion slot (allocated up
    /// front, one per max_pending) and writes an eventfd when its batch was empty; one weft
    /// task per publisher waits on it through the reactor and completes the whole batch.
    reactor_batch,
    /// The seed's shape: cnats's thread hands each ack to a channel (bounded at max_pending,
    /// so it never waits) read by a fixed pool of `ack_handlers` weft tasks per publisher, each
    /// completing one ack at a time.
    handler_pool,
};

/// One JetStream stream the backend creates (or updates to this configuration) at start.
struct nats_stream_config {
    std::string name;                   ///< no '.', '*', '>' or spaces
    std::vector<std::string> subjects;  ///< NATS subjects; wildcards allowed ("orders.>")
    nats_storage storage = nats_storage::file;
    int replicas = 1;
    /// How long the server remembers a Nats-Msg-Id for de-duplication.
    std::chrono::milliseconds duplicate_window{120'000};
};

struct nats_backend_options {
    std::string url = "nats://127.0.0.1:4222";
    /// The servers of a cluster ("nats://host:port" each); when not empty, used instead of
    /// `url`. The connection goes to one of them (in random order, as cnats does) and on to
    /// another when that one fails; the servers a cluster announces are added by cnats.
    std::vector<std::string> servers{};
    /// One stream per topic, named after it ('.' and other characters a name may not hold
    /// become '_'), taking the topic and its default dead-letter topic "<topic>.dead-letter".
    std::vector<std::string> topics{};
    /// Further streams, as given. A topic (subject) published to must be taken by one of these
    /// or of `topics`' streams, else the publish fails with `no_stream`.
    std::vector<nats_stream_config> streams{};
    nats_storage storage = nats_storage::file;  ///< for the streams of `topics`
    /// An unacknowledged publish fails with `timed_out` after this (cnats's MaxWait).
    std::chrono::milliseconds publish_timeout{5'000};
    std::chrono::milliseconds connect_timeout{2'000};
    /// How long one pull (fetch) waits on the server for a message. A waiting next() pulls
    /// again after it, so this bounds how late it sees close() or a cancellation.
    std::chrono::milliseconds fetch_wait{200};
    /// cnats's write buffer. cnats writes to the socket inline (blocking its caller) when a
    /// publish finds it full, so a publisher sends only while the buffer has room for the
    /// message and an eighth of it to spare (for acks and pings); otherwise the message waits
    /// in the publisher, in order, until acks show the buffer went out. The larger the
    /// buffer, the more a burst of publish_async stays a memory copy. A message larger than
    /// seven eighths of it is written through by cnats (counted in `publish_stalls`).
    int io_buffer_bytes = 1 << 20;
    nats_ack_path ack_path = nats_ack_path::reactor_batch;
    /// handler_pool only: the weft tasks per publisher that complete acks (at least 1).
    unsigned ack_handlers = 4;
    /// How publishes are put on the wire (CloudEvents binary by default; see wire_format.hpp).
    wire_options wire{};
    /// TLS to the servers: on when `tls.enabled` or a URL says "tls://".
    broker_tls tls{};
};

/// Counters of one backend (all producers together), for measurements.
struct nats_backend_stats {
    std::uint64_t acks = 0;  ///< publish outcomes completed
    /// Times the ack thread woke weft: eventfd writes (reactor_batch), or acks that found an
    /// ack handler waiting for one (handler_pool).
    std::uint64_t wakes = 0;
    /// Publishes handed to cnats when it could block the caller: its write buffer without
    /// room for the message (cnats then writes to the socket inline), or its own MaxPending
    /// reached (StallWait). Zero unless a message is larger than 7/8 of `io_buffer_bytes`.
    std::uint64_t publish_stalls = 0;
    /// Publishes that waited in weft for room in cnats's write buffer (instead of blocking).
    std::uint64_t publishes_held = 0;
    /// The most bytes seen in cnats's write buffer just before a publish.
    std::uint64_t max_buffered = 0;
};

/// weft::bus over NATS JetStream, through the C client (cnats 3.4).
///
/// - Start (the constructor): connects (blocking; call it before the runtime starts or in
///   spawn_blocking), then creates or updates the configured streams. Never a stream lookup
///   per publish. Throws std::system_error naming the URLs when no server is reachable, or
///   naming the stream when JetStream refuses it. Afterwards a lost connection is reconnected
///   (to any of `servers`) for as long as it takes. While it is down a publish waits in the
///   publisher (not in cnats's reconnect buffer) for the connection to come back and is sent
///   then, or fails with `broker_unreachable` after `publish_timeout` (describe() names the
///   servers) and is never sent; a publish already sent and not acknowledged fails with
///   `timed_out` after `publish_timeout`; a waiting next() keeps pulling, so a subscription
///   goes on after the server is back.
/// - Publish: an asynchronous JetStream publish of the envelope's binary encoding to the
///   subject `topic`, with `Nats-Msg-Id` = the envelope id, so the server drops a re-published
///   id within the stream's duplicate window (the ack then says `duplicate`). cnats reports
///   each ack on its own thread; that thread writes the outcome into the completion slot the
///   publisher reserved for the message and, when the batch of completed slots was empty,
///   writes an eventfd. A weft task per publisher waits on it with wait_readable and completes
///   every slot in the batch: one wake-up per batch, never a thread or a task per message
///   (nats_ack_path::reactor_batch; handler_pool, the alternative measured beside it, hands
///   each ack to a fixed pool of weft tasks instead).
///   No publish blocks inside cnats: its own limit (MaxPending) is set above the publisher's
///   max_pending, and a message goes to cnats only while its write buffer has room (see
///   `io_buffer_bytes`). Publishers must be made on a worker of a runtime with a reactor
///   (weft::io_runtime_options), where that task runs.
/// - Subscribe: a durable pull consumer per (topic, group) on the topic's stream (created on
///   the first subscribe, bound by the next), so each message goes to one member of a group.
///   next() pulls one message at a time through spawn_blocking (cnats's fetch blocks). ack,
///   nack (NAK with the delay), in_progress (the "working" ack, restarting the server's
///   AckWait) and term are sent without waiting. Redelivery after ack_wait is the server's.
///   Dead letters: term(reason), a nack of the last allowed delivery, and a message the server
///   delivers past max_deliveries (its last delivery timed out) are published to the
///   dead-letter topic (JetStream, id header "<id>-dead-letter"); once stored, the original is
///   terminated (AckTerm), or NAKed if storing failed. A member that closes NAKs what it holds,
///   so the group gets it again at once.
/// Any thread may call any member. Must outlive every publisher, subscriber and delivery made
/// from it.
///
///     weft::bus::nats_backend nats{{.url = "nats://127.0.0.1:4222", .topics = {"orders"}}};
///     weft::runtime rt{weft::io_runtime_options(2)};
///     rt.block_on([&]() -> weft::task<void> { weft::bus::publisher pub{nats}; ... });
class nats_backend final : public backend {
public:
    explicit nats_backend(nats_backend_options options);
    nats_backend(const nats_backend&) = delete;
    auto operator=(const nats_backend&) -> nats_backend& = delete;
    ~nats_backend() override;

    [[nodiscard]] auto name() const noexcept -> std::string_view override { return "nats"; }
    [[nodiscard]] auto features() const noexcept -> backend_features override;
    auto make_producer(publish_sink& sink, std::uint32_t max_pending)
        -> result<std::unique_ptr<backend_producer>> override;
    auto make_consumer(consumer_config config)
        -> task<result<std::shared_ptr<backend_consumer>>> override;

    [[nodiscard]] auto stats() const noexcept -> nats_backend_stats;

    /// A sentence for an error this backend returned, naming the servers for
    /// `broker_unreachable` ("broker unreachable: not connected to nats://127.0.0.1:4222
    /// (reconnecting)"); otherwise ec.message(). The error value itself stays the plain code,
    /// so it compares equal to bus_errc::broker_unreachable.
    [[nodiscard]] auto describe(std::error_code ec) const -> std::string;
    /// The server the connection is on now, or "" while it is not connected.
    [[nodiscard]] auto connected_url() const -> std::string;

    struct connection;

private:
    std::shared_ptr<connection> conn_;
};

}  // namespace weft::bus
