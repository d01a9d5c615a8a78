#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "weft/bus/backend.hpp"
#include "weft/bus/delivery.hpp"
#include "weft/bus/detail/subscription_state.hpp"
#include "weft/bus/retry_policy.hpp"
#include "weft/core/detail/spin_lock.hpp"
#include "weft/core/result.hpp"
#include "weft/core/task.hpp"

namespace weft::metrics {
class registry;
}

namespace weft::bus {

struct subscriber_options {
    /// A delivery not settled within this is delivered again (in_progress() restarts it).
    std::chrono::milliseconds ack_wait{30'000};
    /// Deliveries of one message to its group, at most; when the last allowed one fails (nack,
    /// ack timeout, its member closing) the message goes to the dead-letter topic. 0: no limit.
    std::uint32_t max_deliveries = 0;
    /// Where dead letters go; empty: "<topic>.dead-letter". A dead letter is the envelope
    /// (same id) with the headers `weftdeadletterreason`, `weftoriginaltopic`,
    /// `weftoriginalgroup` and `weftdeliveries` added.
    std::string dead_letter_topic{};
    /// What subscription::fail does with a failed delivery. With `retry.max_attempts` set and
    /// max_deliveries 0, the broker is asked for at most max_attempts deliveries.
    retry_policy retry{};
    /// Where each subscription's metrics go (labelled `backend`, `topic`, `group`): counters
    /// `weft_bus_deliveries_total`, `weft_bus_redeliveries_total` (attempt > 1),
    /// `weft_bus_delivery_acks_total`, `weft_bus_delivery_nacks_total` and
    /// `weft_bus_dead_letters_total` (term, or a nack of the last delivery allowed). Null:
    /// none are kept. Must outlive the subscriber's subscribe() calls only.
    metrics::registry* metrics = nullptr;
};

/// One member of a consumer group: a stream of deliveries. Within a group each message goes to
/// one member at a time; every group on a topic gets every message. Move-only.
/// `next()` is consumer-side: one call at a time. Lifetime: must outlive a next() in progress.
///
///     auto s = (co_await sub.subscribe("orders", "billing")).value();
///     while (auto d = co_await s.next()) { bill(d->message()); d->ack(); }
class subscription {
public:
    subscription(std::shared_ptr<backend_consumer> c,
                 std::string topic,
                 std::string group,
                 std::shared_ptr<const detail::subscription_state> state)
        : consumer_(std::move(c)),
          topic_(std::move(topic)),
          group_(std::move(group)),
          state_(std::move(state)) {}
    subscription(const subscription&) = delete;
    auto operator=(const subscription&) -> subscription& = delete;
    subscription(subscription&&) noexcept = default;
    auto operator=(subscription&&) noexcept -> subscription& = default;
    ~subscription() = default;

    /// `co_await s.next()` -> result<delivery>: waits until the group has a message due for
    /// this member (a new one, or one whose earlier delivery was nacked or not settled within
    /// ack_wait) and hands it over; settle it with ack, nack or term.
    /// Errors: `subscription_closed` after close() (also to a next() waiting then);
    /// `operation_canceled` when the awaiting task is stopped; the backend's failures
    /// (`broker_unreachable` while a networked broker is away, ...), after which next() may be
    /// called again.
    /// Cancel-safe: a stopped next() hands over nothing and loses nothing; a message a backend
    /// had taken for it is delivered again after ack_wait, as any unsettled delivery is.
    /// Consumer-side: one next() at a time per subscription, from a task on a runtime worker
    /// (the ack timeouts run on its timers).
    auto next() -> task<result<delivery>>;
    /// Leaves the group (idempotent; any thread). Its unsettled deliveries go back to the
    /// group, and a next() waiting returns subscription_closed.
    void close() noexcept { consumer_->close(); }

    /// Settles `d`, whose handling failed with `error`, by the subscription's retry_policy:
    /// to the dead letters (term, the reason naming the error) when the error is permanent or
    /// `d` was the last attempt allowed; else delivered again (nack) after the policy's delay.
    /// Returns what the term or nack returned (`not_pending` for a delivery no longer
    /// pending). Any thread; never waits.
    auto fail(delivery& d, std::error_code error) -> result<void>;

    [[nodiscard]] auto topic() const noexcept -> const std::string& { return topic_; }
    [[nodiscard]] auto group() const noexcept -> const std::string& { return group_; }

private:
    std::shared_ptr<backend_consumer> consumer_;
    std::string topic_;
    std::string group_;
    std::shared_ptr<const detail::subscription_state> state_;

    /// next() with metrics: counts the delivery and hands it the counters its settling adds to.
    static auto counted_next(std::shared_ptr<backend_consumer> c,
                             std::shared_ptr<detail::delivery_counters> counters)
        -> task<result<delivery>>;
};

/// Makes subscriptions on one backend with one set of options, and closes them together.
/// Any task may call any member. The backend must outlive it.
///
///     weft::bus::subscriber sub{broker, {.ack_wait = 5s, .max_deliveries = 5}};
///     auto s = (co_await sub.subscribe("orders", "billing")).value();
class subscriber {
public:
    explicit subscriber(backend& b, subscriber_options options = {})
        : backend_(&b), options_(std::move(options)) {}
    subscriber(const subscriber&) = delete;
    auto operator=(const subscriber&) -> subscriber& = delete;
    ~subscriber() { close(); }

    /// `co_await sub.subscribe(topic, group)` -> result<subscription>: joins `group` on
    /// `topic` as a new member. A group that is new to the broker starts with the messages the
    /// broker still holds for the topic.
    /// Errors: `invalid_argument` for an empty topic or group; `subscription_closed` after
    /// close(); the backend's failures to create the member (`broker_unreachable`,
    /// `no_stream` for a topic no stream takes, ...).
    /// Cancellation: a stop while a networked backend is still creating the member ends the
    /// call with `operation_canceled` and no subscription; once the member exists the call
    /// completes and the subscription is the caller's.
    /// Any task, concurrently with the other members.
    auto subscribe(std::string topic, std::string group) -> task<result<subscription>>;
    /// Closes every subscription made here (idempotent; any thread); later subscribes fail
    /// with subscription_closed.
    void close() noexcept;

private:
    backend* backend_;
    subscriber_options options_;
    weft::detail::spin_lock mu_;
    std::vector<std::weak_ptr<backend_consumer>> made_;  // guarded by mu_
    bool closed_ = false;                                // guarded by mu_
};

}  // namespace weft::bus
