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

#include "cloudevents.hpp"
#include "weft/bus/nats_backend.hpp"

namespace weft::bus {

/// The error value of a cnats status (and the JetStream error code, when there is one).
[[nodiscard]] auto nats_error(natsStatus s, jsErrCode code = static_cast<jsErrCode>(0))
    -> std::error_code;

/// True when `subject` (no wildcards) matches `pattern` ('*' one token, '>' the rest).
[[nodiscard]] auto nats_subject_matches(std::string_view pattern, std::string_view subject) -> bool;

/// The message for `env` (to the subject env.topic) as `wire` says: in binary mode the
/// payload as the body and the attributes as ce- headers; structured, the JSON event with
/// Content-Type; weft, the binary encoding. `wire_bytes`: what body and headers take. Errors:
/// not_expressible (the CloudEvents modes), message_too_large (over `max_payload` when it
/// is > 0), a cnats status. Reuses thread-local buffers.
[[nodiscard]] auto make_nats_message(const envelope& env,
                                     const wire_options& wire,
                                     int max_payload,
                                     natsMsg*& out,
                                     std::size_t& wire_bytes) -> std::error_code;

/// The headers of a received message (names and values as cnats holds them: valid while
/// `m` is), appended to `out`.
void nats_headers(natsMsg* m, std::vector<cloudevents::wire_header>& out);

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

    /// Before a subscription is destroyed: waits (up to publish_timeout) for the dead letters in
    /// flight, whose ack handler terminates each original through its subscription, then gives
    /// back the originals still unanswered untouched (the server redelivers them after
    /// AckWait; the dead-letter stream drops a repeated copy by its id). Blocks its thread only
    /// while dead letters are in flight.
    void settle_dead_letters();
    /// The configured servers, for messages: `url`, or `servers` joined by ", ".
    [[nodiscard]] auto server_list() const -> std::string;
    /// The stream that takes `topic`, or nullptr.
    [[nodiscard]] auto stream_for(std::string_view topic) const -> const nats_stream_config*;
    /// Publishes `dead` (made for the dead-letter subject, owned from here on; nullptr when it
    /// could not be made) asynchronously with Nats-Msg-Id `msg_id`, and settles `original`
    /// (owned from here on) when the server answers: terminated once the dead letter is
    /// stored, NAKed otherwise. Never waits.
    void dead_letter(natsMsg* original, natsMsg* dead, const std::string& msg_id);
};

}  // namespace weft::bus
