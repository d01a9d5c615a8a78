#pragma once

#include <nats/nats.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "nats_connection.hpp"
#include "weft/bus/backend.hpp"

namespace weft::bus {

/// One member of a consumer group on NATS: a pull subscription bound to the group's durable
/// consumer. next() is consumer-side (one at a time); the settle calls come from any thread.
///
/// Pending deliveries live in `pending_` (token -> message) until settled. A token stops being
/// pending when it is settled, when its ack timeout passed by this process's clock (the server
/// redelivers then; `in_progress` moves the deadline), when the same stream sequence is
/// delivered to this member again, or when the member closes (and NAKs it).
class nats_consumer final : public backend_consumer,
                            public std::enable_shared_from_this<nats_consumer> {
public:
    static auto make(std::shared_ptr<nats_backend::connection> conn, consumer_config config)
        -> task<result<std::shared_ptr<backend_consumer>>>;

    nats_consumer(std::shared_ptr<nats_backend::connection> conn, consumer_config config)
        : conn_(std::move(conn)), config_(std::move(config)) {}
    nats_consumer(const nats_consumer&) = delete;
    auto operator=(const nats_consumer&) -> nats_consumer& = delete;
    ~nats_consumer() override;

    auto next() -> task<result<delivery>> override;
    auto ack(std::uint64_t token) -> result<void> override;
    auto nack(std::uint64_t token, std::chrono::milliseconds delay) -> result<void> override;
    auto term(std::uint64_t token, std::string_view reason) -> result<void> override;
    auto in_progress(std::uint64_t token) -> result<void> override;
    void close() noexcept override;

private:
    using clock = std::chrono::steady_clock;
    struct pending {
        natsMsg* msg;
        std::shared_ptr<const envelope> env;
        std::uint64_t stream_seq;
        std::uint32_t attempt;
        clock::time_point deadline;
    };
    /// What one pull brought: a message to hand out, or nothing (timeout, or a message this
    /// member dealt with itself: malformed, or past max_deliveries).
    struct pulled {
        natsMsg* msg = nullptr;
        std::shared_ptr<const envelope> env;
        std::uint64_t stream_seq = 0;
        std::uint32_t attempt = 0;
    };

    /// Blocking (spawn_blocking): creates or binds the group's consumer.
    auto bind() -> std::error_code;
    /// Blocking (spawn_blocking): one fetch of at most one message.
    auto pull() -> pulled;
    /// Takes token's message out of pending_ if it is still pending.
    auto take(std::uint64_t token) -> natsMsg*;
    void send_to_dead_letters(natsMsg* m,
                              const envelope& env,
                              std::string_view reason,
                              std::uint32_t deliveries);
    /// A message no mode reads: copied as it came to the dead letters with the defect
    /// (`why`) in the header Weft-Malformed; terminated once the copy is stored.
    void send_malformed_to_dead_letters(natsMsg* m, std::uint64_t stream_seq, std::string_view why);

    std::shared_ptr<nats_backend::connection> conn_;
    const consumer_config config_;
    std::string stream_;
    std::string durable_;
    natsSubscription* sub_ = nullptr;

    std::mutex mu_;
    std::unordered_map<std::uint64_t, pending> pending_;  // guarded by mu_
    std::uint64_t next_token_ = 0;                        // guarded by mu_
    pulled stash_;  // guarded by mu_: pulled while the next() that asked was cancelled
    std::atomic<bool> closed_{false};
};

}  // namespace weft::bus
