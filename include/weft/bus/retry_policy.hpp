#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <system_error>

namespace weft::bus {

/// How a handler's failure is treated: `transient` (a timeout, a lock held elsewhere) may
/// succeed when tried again; `permanent` (a payload that does not parse) never will, so it goes
/// to the dead letters at once instead of spending the retries.
enum class error_class { transient, permanent };

/// What a subscription does with a delivery its handler failed (subscription::fail), declared
/// once per subscription (subscriber_options::retry) rather than at each failure, as
/// MassTransit's and NServiceBus's recoverability are:
///
/// 1. `classify(error)` is permanent: to the dead letters, no retry.
/// 2. The failed delivery was attempt `max_attempts` (0: no limit): to the dead letters.
/// 3. Attempts 1..immediate_retries are retried at once (nack with no delay).
/// 4. Every later one is retried after a delay with exponential back-off and full jitter:
///    the n-th delayed retry (n from 0) waits a uniform draw from [0, min(cap, base * 2^n)]
///    (`jitter` false: exactly min(cap, base * 2^n)). Full jitter spreads the retries of many
///    messages that failed together (a broker or database that went away) over the whole
///    window instead of sending them back in one wave.
///
/// The attempt number is the broker's delivery count (JetStream's num_delivered, the memory
/// broker's count, the Kafka backend's `weft-deliveries` header), so a retry survives the
/// consumer process restarting. A retry is a redelivery by the broker: it may go to another
/// member of the group. Ack timeouts count as attempts too: with max_attempts set the
/// subscriber asks the broker for at most that many deliveries (max_deliveries).
///
///     weft::bus::subscriber sub{broker, {.retry = {.max_attempts = 5, .immediate_retries = 1,
///                                                  .base = 200ms, .cap = 10s}}};
struct retry_policy {
    std::uint32_t max_attempts = 0;         ///< deliveries in all, the first included; 0: no limit
    std::uint32_t immediate_retries = 0;    ///< retries with no delay before the delayed ones
    std::chrono::milliseconds base{100};    ///< the first delayed retry's window
    std::chrono::milliseconds cap{30'000};  ///< the largest window
    bool jitter = true;                     ///< full jitter; false: the window's full length
    /// Empty: every error is transient.
    std::function<error_class(std::error_code)> classify{};

    /// The window of the retry after failed attempt `attempt` (from 1): zero for an immediate
    /// retry, else min(cap, base * 2^n) for the n-th delayed one.
    [[nodiscard]] auto window_after(std::uint32_t attempt) const noexcept
        -> std::chrono::milliseconds;
    /// The delay before the retry after failed attempt `attempt`: window_after(attempt) scaled
    /// by `unit` in [0, 1] when `jitter` (the caller's uniform draw), the whole window if not.
    [[nodiscard]] auto delay_after(std::uint32_t attempt, double unit) const noexcept
        -> std::chrono::milliseconds;
};

}  // namespace weft::bus
