#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>

#include "weft/bus/envelope.hpp"
#include "weft/core/result.hpp"

namespace weft::bus {

class backend_consumer;
class subscription;

namespace detail {
struct delivery_counters;
}

/// One delivery of a message to one member of a consumer group. Settle it exactly once:
/// - `ack()`: done; the group never delivers this message again.
/// - `nack(delay)`: failed; delivered again (to any member) after `delay`, unless this was the
///   last delivery allowed (`subscriber_options::max_deliveries`): then to the dead letters.
/// - `term(reason)`: failed for good; straight to the dead-letter topic with `reason`.
/// - `in_progress()`: not settled, still being worked on: restarts the ack timeout.
/// Unsettled past the ack timeout (`ack_wait`), the message is delivered again. Each call
/// returns `bus_errc::not_pending` once the delivery is no longer the pending one (settled,
/// expired and redelivered, or its subscription closed). Any thread; the calls never wait.
/// A delivery may outlive its subscription (its calls then return not_pending).
///
///     auto d = co_await sub.next();   // result<delivery>
///     handle(d->message());
///     d->ack();
class delivery {
public:
    /// For backends: `token` identifies this delivery to `source`.
    delivery(std::shared_ptr<backend_consumer> source,
             std::uint64_t token,
             std::shared_ptr<const envelope> message,
             std::uint32_t attempt) noexcept
        : source_(std::move(source)),
          token_(token),
          message_(std::move(message)),
          attempt_(attempt) {}

    [[nodiscard]] auto message() const noexcept -> const envelope& { return *message_; }
    /// 1 for the first delivery of this message to its group, 2 for the first redelivery...
    [[nodiscard]] auto attempt() const noexcept -> std::uint32_t { return attempt_; }

    auto ack() -> result<void>;
    auto nack(std::chrono::milliseconds delay = std::chrono::milliseconds{0}) -> result<void>;
    auto term(std::string_view reason) -> result<void>;
    auto in_progress() -> result<void>;

private:
    friend class subscription;  // sets counters_ when its subscriber keeps metrics

    std::shared_ptr<backend_consumer> source_;
    std::uint64_t token_;
    std::shared_ptr<const envelope> message_;
    std::uint32_t attempt_;
    std::shared_ptr<detail::delivery_counters> counters_{};  // null: no metrics
};

}  // namespace weft::bus
