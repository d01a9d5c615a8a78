#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "weft/bus/ack.hpp"
#include "weft/bus/backend.hpp"
#include "weft/bus/detail/publisher_waits.hpp"
#include "weft/bus/envelope.hpp"
#include "weft/bus/envelope_codec.hpp"
#include "weft/bus/message_id.hpp"
#include "weft/core/detail/spin_lock.hpp"
#include "weft/core/result.hpp"
#include "weft/core/task.hpp"
#include "weft/sync/channel.hpp"
#include "weft/sync/detail/waiter.hpp"

namespace weft::metrics {
class registry;
}

namespace weft::bus {

namespace detail {
struct publisher_counters;
}

struct publisher_options {
    /// Messages in flight (sent, not yet acknowledged) plus outcomes not yet read from
    /// results(), at most. Beyond it publish_async waits. >= 1.
    std::uint32_t max_pending = 1024;
    /// Where the publisher's metrics go (labelled `backend`): counters
    /// `weft_bus_published_total`, `weft_bus_publish_acked_total`,
    /// `weft_bus_publish_failed_total`, the gauge `weft_bus_publish_in_flight` and the histogram
    /// `weft_bus_publish_ack_seconds` (publish to the broker's ack). Null: none are kept, and
    /// no clock is read per publish. Must outlive the constructor only.
    metrics::registry* metrics = nullptr;
};

/// The outcome of one publish_async, as results() reports it.
struct publish_result {
    message_id id;
    std::string key;
    result<ack> outcome;
};

/// Publishes envelopes through a backend.
///
/// - `co_await pub.publish(env)` -> result<ack>: once the broker has it (as durably as the
///   broker is configured to).
/// - `co_await pub.publish_async(env)` -> result<message_id>: returns once the message is on
///   its way; its outcome comes later on `results()`. `try_publish_async` is the same without
///   waiting (`operation_would_block` at the bound).
/// - Bound: in flight (either kind) plus results not yet read <= max_pending. At the bound
///   publish_async waits (back-pressure) until an ack arrives for an awaited publish or a result
///   is read; nothing queues without bound and nothing is dropped. A program that uses
///   publish_async must read results(), or it stops at max_pending.
/// - Acks are completed without a task or thread per message: max_pending completion slots are
///   allocated up front; the backend writes an outcome into a slot (any thread) and the slot
///   hands it to the results channel or to the one task awaiting it (one atomic exchange each
///   side; a task whose ack came while it was still publishing never suspends).
/// - Cost per message: the bound, the slots and the in-flight count share one lock, taken once
///   when a publish starts and once when it ends (an awaited publish), or when it ends and when
///   its result is read (publish_async); no allocation (the ack's stream name is shared).
/// - `flush()` waits until nothing is in flight; `close()` refuses new publishes
///   (`publisher_closed`, also to publish_async calls waiting at the bound), waits for those in
///   flight, then closes results() (readers drain it, then get `closed`).
/// Any task may call any member concurrently. Lifetime: destroy only after close() returned;
/// the backend must outlive it.
///
///     weft::bus::publisher pub{broker, {.max_pending = 256}};
///     auto a = co_await pub.publish(env);                  // result<ack>
///     (co_await pub.publish_async(env2)).value();
///     auto r = co_await pub.results().recv();             // result<publish_result>
class publisher final : private publish_sink, private detail::publisher_waits {
public:
    /// Throws std::system_error when the backend cannot make a producer (setup).
    explicit publisher(backend& b, publisher_options options = {});
    publisher(const publisher&) = delete;
    auto operator=(const publisher&) -> publisher& = delete;
    ~publisher();

    /// The channel of publish_async outcomes. Reading one frees its place in max_pending, which
    /// is why this wraps the channel rather than exposing it.
    class result_channel {
    public:
        using recv_awaiter = result_awaiter<publisher, publish_result>;

        /// `co_await pub.results().recv()` -> result<publish_result>: waits for the next
        /// outcome. Errors: `closed` once close() has finished and every result was read;
        /// `operation_canceled` when the awaiting task is stopped. Cancel-safe: a stopped recv
        /// took no result (one handed over as the stop came is returned). Any task; several may
        /// read at once, each result going to one of them.
        auto recv() noexcept -> recv_awaiter { return recv_awaiter{ch_, *pub_}; }
        /// Without waiting: `operation_would_block` when empty, `closed` as recv. Any thread.
        auto try_recv() -> result<publish_result>;
        /// Results waiting to be read (a snapshot).
        [[nodiscard]] auto size() const noexcept -> std::size_t { return ch_.size(); }

    private:
        friend class publisher;
        result_channel(std::size_t capacity, publisher& pub) : ch_(capacity), pub_(&pub) {}
        channel<publish_result> ch_;
        publisher* pub_;
    };

    /// `co_await pub.publish(env)` -> result<ack>: sends `env` (its id and time filled in when
    /// left empty) and waits until the broker has it, as durably as the broker is configured
    /// to. Waits first for a place when max_pending are out.
    /// Errors: `invalid_argument` for an empty topic; `publisher_closed` once close() was
    /// called; the broker's refusal or failure (bus_errc: no_stream, broker_unreachable,
    /// message_too_large, ...; `timed_out` after the backend's publish timeout);
    /// `operation_canceled` when the awaiting task is stopped.
    /// Cancellation: stopped while waiting for a place, nothing was sent. Stopped while waiting
    /// for the ack, the message was sent and may still be stored: its outcome is dropped. To be
    /// sure, publish the same envelope (same id) again: brokers that de-duplicate keep one.
    /// Any task, concurrently with the other members.
    auto publish(envelope env) -> task<result<ack>>;
    /// `co_await pub.publish_async(env)` -> result<message_id>: sends `env` and returns its id
    /// without waiting for the broker; the outcome comes later on results(). Waits only for a
    /// place when max_pending are out (back-pressure).
    /// Errors: `invalid_argument` for an empty topic; `publisher_closed` once close() was
    /// called (also to a call waiting for a place); `operation_canceled` when the awaiting task
    /// is stopped. The broker's errors come on results().
    /// Cancel-safe: a stopped publish_async sent nothing. Any task, concurrently with the other
    /// members.
    auto publish_async(envelope env) -> task<result<message_id>>;
    /// publish_async without waiting: `operation_would_block` at the bound (nothing was sent).
    /// Any thread.
    auto try_publish_async(envelope env) -> result<message_id>;
    /// try_publish_async for an envelope already encoded (envelope_codec, e.g. as an outbox
    /// stored it; `e` from decode_routing, its id set): a backend that sends the encoding as it
    /// is (Kafka) takes the bytes without an envelope being decoded or copied; others get the
    /// decoded envelope. The views need to live only during the call. An encoding that does
    /// not decode is reported on results(), as a broker's refusal is.
    auto try_publish_encoded_async(const encoded_envelope& e) -> result<message_id>;
    auto results() noexcept -> result_channel& { return results_; }
    /// `co_await pub.flush()` -> result<void>: waits until nothing is in flight (results may
    /// still be unread). Errors: `operation_canceled` when the awaiting task is stopped;
    /// cancel-safe (it only waits). Any task; publishes may go on meanwhile, and it returns
    /// the first time none is in flight.
    auto flush() -> task<result<void>>;
    /// `co_await pub.close()` -> result<void>: refuses new publishes (`publisher_closed`, also
    /// to publish_async calls waiting for a place), waits for those in flight, then closes
    /// results() (readers drain it, then get `closed`). Idempotent.
    /// Errors: `operation_canceled` when the awaiting task is stopped before everything in
    /// flight completed: the publisher stays closed to new publishes; call close() again to
    /// finish. Any task; the publisher may be destroyed once a close() has returned a value.
    auto close() -> task<result<void>>;

    /// Messages in flight now (a snapshot).
    [[nodiscard]] auto in_flight() const noexcept -> std::ptrdiff_t {
        std::lock_guard lock(mu_);
        return in_flight_;
    }
    [[nodiscard]] auto max_pending() const noexcept -> std::uint32_t { return max_pending_; }

private:
    template <typename>
    friend class detail::publisher_waits::unit_awaiter;
    template <typename>
    friend class detail::publisher_waits::idle_awaiter;
    template <typename, typename>
    friend class detail::publisher_waits::result_awaiter;
    // publisher.cpp defines publisher::ack_awaiter::on_stop: a name only friends may use.
    friend class detail::publisher_waits::ack_awaiter;

    void complete(std::uint32_t index, result<ack> outcome) noexcept override;
    /// Fills in a missing id and time; under one lock takes a unit of the bound (unless the
    /// caller holds one: `have_unit`), a free slot, and counts the message in flight.
    /// `publisher_closed` once closed; `operation_would_block` when no unit is free (then
    /// nothing was taken).
    auto begin(envelope& env, bool awaited, bool have_unit, std::uint32_t& index)
        -> std::error_code;
    /// begin's second half: the unit, a slot for `id` (and `key`, publish_async only).
    auto take_slot(const message_id& id,
                   std::string_view key,
                   bool awaited,
                   bool have_unit,
                   std::uint32_t& index) -> std::error_code;
    auto start_async(envelope&& env, bool have_unit) -> result<message_id>;
    /// A publish ended without a result to read (an awaited one's outcome taken or abandoned,
    /// or a start that threw): slot, unit and in-flight count back under one lock.
    void end_unread(std::uint32_t index) noexcept;
    /// A publish_async's outcome was read: its unit back.
    void release_unit() noexcept;
    /// With mu_ held: one unit to the first waiter at the bound, or to the count.
    void release_unit_locked(weft::detail::wake_chain& woken) noexcept;
    /// With mu_ held: one fewer in flight; at zero, every idle waiter.
    void done_locked(weft::detail::wake_chain& woken) noexcept;
    void start(envelope&& env, std::uint32_t index);

    const std::uint32_t max_pending_;
    result_channel results_;
    std::unique_ptr<slot[]> slots_;
    // Everything below is guarded by mu_ (a spin lock: sections of a few pointer moves).
    // Invariants (before close): units_ + messages holding a unit == max_pending_, where a
    // message holds its unit from begin until its awaited publish ends or its result is read;
    // |free_| + slots taken == max_pending_. A publish_async's completion gives its slot back
    // first, then sends the result, then leaves in_flight_ (so flush returns only once the
    // result is readable). A slot is taken and given back inside its unit's hold, so
    // |free_| >= units_: a unit always finds a slot.
    // unit_waiters_ nonempty => units_ == 0; idle_waiters_ nonempty => in_flight_ > 0.
    // close() adds 2^40 units (never given back), granting every waiter one.
    mutable weft::detail::spin_lock mu_;
    std::ptrdiff_t units_;
    std::ptrdiff_t in_flight_ = 0;
    weft::detail::wait_list unit_waiters_;
    weft::detail::wait_list idle_waiters_;
    std::vector<std::uint32_t> free_;
    bool closed_ = false;
    std::unique_ptr<backend_producer> producer_;
    // Last: destroyed first, so its collector (which reads in_flight_) is gone before mu_.
    std::unique_ptr<detail::publisher_counters> counters_;
};

}  // namespace weft::bus
