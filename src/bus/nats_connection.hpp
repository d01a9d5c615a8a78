#pragma once

// What the NATS backend's producers and consumers share: the connection, the JetStream context
// for administration and dead letters, and the streams made at start.

#include <nats/nats.h>

#include <atomic>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "weft/bus/nats_backend.hpp"

namespace weft::bus {

/// The error value of a cnats status (and the JetStream error code, when there is one).
[[nodiscard]] auto nats_error(natsStatus s, jsErrCode code = static_cast<jsErrCode>(0))
    -> std::error_code;

/// True when `subject` (no wildcards) matches `pattern` ('*' one token, '>' the rest).
[[nodiscard]] auto nats_subject_matches(std::string_view pattern, std::string_view subject) -> bool;

struct nats_backend::connection {
    nats_backend_options options;
    natsConnection* nc = nullptr;
    /// Administration (streams, consumers), pull subscriptions and dead-letter publishes. Its
    /// ack handler finishes dead letters (on cnats's thread).
    jsCtx* js = nullptr;
    std::vector<nats_stream_config> streams;  // fixed after start

    /// Dead letters in flight: the dead-letter message -> the original, which is terminated
    /// once the dead letter is stored (NAKed if it is not). Rare: a map is fine.
    std::mutex dead_mu;
    std::unordered_map<natsMsg*, natsMsg*> dead_in_flight;  // guarded by dead_mu

    // Statistics: relaxed, counters only.
    std::atomic<std::uint64_t> acks{0};
    std::atomic<std::uint64_t> wakes{0};
    std::atomic<std::uint64_t> publish_stalls{0};
    std::atomic<std::uint64_t> publishes_held{0};
    std::atomic<std::uint64_t> max_buffered{0};

    connection() = default;
    connection(const connection&) = delete;
    auto operator=(const connection&) -> connection& = delete;
    ~connection();

    /// The configured servers, for messages: `url`, or `servers` joined by ", ".
    [[nodiscard]] auto server_list() const -> std::string;
    /// The stream that takes `topic`, or nullptr.
    [[nodiscard]] auto stream_for(std::string_view topic) const -> const nats_stream_config*;
    /// Publishes `dead` (an encoded envelope) to `topic` asynchronously and settles `original`
    /// (owned from here on) when the server answers. Never waits.
    void dead_letter(natsMsg* original,
                     std::string_view topic,
                     const std::string& id,
                     const std::string& encoded);
};

}  // namespace weft::bus
