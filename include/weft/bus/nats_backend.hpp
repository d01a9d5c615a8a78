#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "weft/bus/backend.hpp"

namespace weft::bus {

enum class nats_storage {
    file,    ///< survives a server restart (durable)
    memory,  ///< lost when the server stops
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
    /// cnats's write buffer. A publish that finds it full writes to the socket inline; the
    /// larger it is, the more a burst of publish_async stays a memory copy.
    int io_buffer_bytes = 1 << 20;
};

/// Counters of one backend (all producers together), for measurements.
struct nats_backend_stats {
    std::uint64_t acks = 0;   ///< publish outcomes completed
    std::uint64_t wakes = 0;  ///< times the ack thread woke weft (eventfd writes)
};

/// weft::bus over NATS JetStream, through the C client (cnats 3.4).
///
/// - Start (the constructor): connects (blocking; call it before the runtime starts or in
///   spawn_blocking), then creates or updates the configured streams. Never a stream lookup
///   per publish. Throws std::system_error naming the URL when the server is unreachable, or
///   naming the stream when JetStream refuses it.
/// - Publish: an asynchronous JetStream publish of the envelope's binary encoding to the
///   subject `topic`, with `Nats-Msg-Id` = the envelope id, so the server drops a re-published
///   id within the stream's duplicate window (the ack then says `duplicate`). cnats reports
///   each ack on its own thread; that thread writes the outcome into the completion slot the
///   publisher reserved for the message and, when the batch of completed slots was empty,
///   writes an eventfd. A weft task per publisher waits on it with wait_readable and completes
///   every slot in the batch: one wake-up per batch, never a thread or a task per message.
///   cnats's own limit (MaxPending) is set above the publisher's max_pending, so a publish
///   never stalls inside cnats. Publishers must be made on a worker of a runtime with a reactor
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

    struct connection;

private:
    std::shared_ptr<connection> conn_;
};

}  // namespace weft::bus
