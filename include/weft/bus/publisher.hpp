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
#include "weft/bus/envelope.hpp"
#include "weft/bus/envelope_codec.hpp"
#include "weft/bus/message_id.hpp"
#include "weft/core/detail/spin_lock.hpp"
#include "weft/core/result.hpp"
#include "weft/core/task.hpp"
#include "weft/sync/channel.hpp"
#include "weft/sync/detail/waiter.hpp"

namespace weft::bus {

struct publisher_options {
    /// Messages in flight (sent, not yet acknowledged) plus outcomes not yet read from
    /// results(), at most. Beyond it publish_async waits. >= 1.
    std::uint32_t max_pending = 1024;
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
class publisher final : private publish_sink {
public:
    /// Throws std::system_error when the backend cannot make a producer (setup).
    explicit publisher(backend& b, publisher_options options = {});
    publisher(const publisher&) = delete;
    auto operator=(const publisher&) -> publisher& = delete;
    ~publisher();

    /// The channel of publish_async outcomes. Reading one frees its place in max_pending, which
    /// is why this wraps the channel rather than exposing it: `recv` / `try_recv` are the
    /// channel's, and return the place as they hand the result over.
    class result_channel {
    public:
        class [[nodiscard]] recv_awaiter {
        public:
            recv_awaiter(channel<publish_result>& ch, publisher& pub) noexcept
                : inner_(ch.recv()), pub_(&pub) {}
            auto await_ready() -> bool { return inner_.await_ready(); }
            template <typename P>
            WEFT_PUBLISHES_HANDLE auto await_suspend(std::coroutine_handle<P> h) -> bool {
                return inner_.await_suspend(h);
            }
            auto await_resume() -> result<publish_result> {
                auto r = inner_.await_resume();
                if (r) {
                    pub_->release_unit();
                }
                return r;
            }

        private:
            channel<publish_result>::recv_awaiter inner_;
            publisher* pub_;
        };

        /// `co_await pub.results().recv()` -> result<publish_result>; `closed` after close()
        /// once drained.
        auto recv() noexcept -> recv_awaiter { return recv_awaiter{ch_, *pub_}; }
        /// Without waiting: `operation_would_block` when empty.
        auto try_recv() -> result<publish_result>;
        /// Results waiting to be read (a snapshot).
        [[nodiscard]] auto size() const noexcept -> std::size_t { return ch_.size(); }

    private:
        friend class publisher;
        result_channel(std::size_t capacity, publisher& pub) : ch_(capacity), pub_(&pub) {}
        channel<publish_result> ch_;
        publisher* pub_;
    };

    auto publish(envelope env) -> task<result<ack>>;
    auto publish_async(envelope env) -> task<result<message_id>>;
    auto try_publish_async(envelope env) -> result<message_id>;
    /// try_publish_async for an envelope already encoded (envelope_codec, e.g. as an outbox
    /// stored it; `e` from decode_routing, its id set): a backend that sends the encoding as it
    /// is (Kafka) takes the bytes without an envelope being decoded or copied; others get the
    /// decoded envelope. The views need to live only during the call.
    auto try_publish_encoded_async(const encoded_envelope& e) -> result<message_id>;
    auto results() noexcept -> result_channel& { return results_; }
    /// `co_await pub.flush()`: until nothing is in flight (results may still be unread).
    auto flush() -> task<result<void>>;
    /// `co_await pub.close()`. Idempotent. `operation_canceled` when the awaiting task is
    /// stopped before everything in flight completed (new publishes are refused already; call
    /// close again to finish).
    auto close() -> task<result<void>>;

    /// Messages in flight now (a snapshot).
    [[nodiscard]] auto in_flight() const noexcept -> std::ptrdiff_t {
        std::lock_guard lock(mu_);
        return in_flight_;
    }
    [[nodiscard]] auto max_pending() const noexcept -> std::uint32_t { return max_pending_; }

private:
    class ack_awaiter;
    /// One message in flight. `state` (awaited publishes only) moves, by compare-exchange:
    ///   pending -> completed   the sink stored `outcome` before the task looked (an inline
    ///                          completion: the task then never suspends)
    ///   pending -> waiting     the task suspended; `waiter` names its awaiter
    ///   waiting -> completed   the sink stored `outcome` and resumes the task
    ///   pending|waiting -> abandoned   the task was stopped: it returns operation_canceled
    ///                          and the sink, when the outcome comes, frees the slot
    /// Each side makes one exchange and whoever comes second acts (resumes, or frees): no lock
    /// and no event per message. Release on every exchange publishes what was written before it
    /// (`outcome` by the sink, `waiter` by the task) to the other side's acquire.
    struct slot {
        message_id id;
        std::string key;  // publish_async only
        bool awaited = false;
        std::optional<result<ack>> outcome;
        std::atomic<int> state{0};
        ack_awaiter* waiter = nullptr;  // valid while state == waiting
    };
    static constexpr int slot_pending = 0;
    static constexpr int slot_completed = 1;
    static constexpr int slot_waiting = 2;
    static constexpr int slot_abandoned = 3;

    /// An awaited publish's wait for its outcome (see slot). `co_await` -> true: the outcome is
    /// in the slot; false: stopped first (the slot is no longer the task's). The stop callback
    /// (any thread) takes pending or waiting to abandoned; it resumes the task only if it was
    /// waiting, since a task still in await_suspend finds the abandonment itself.
    class [[nodiscard]] ack_awaiter : public weft::detail::wait_sync {
    public:
        explicit ack_awaiter(slot& s) noexcept : wait_sync(&ack_awaiter::on_stop), slot_(&s) {}
        ack_awaiter(const ack_awaiter&) = delete;
        auto operator=(const ack_awaiter&) -> ack_awaiter& = delete;

        auto await_ready() const noexcept -> bool {
            return slot_->state.load(std::memory_order_acquire) == slot_completed;
        }
        template <typename P>
        WEFT_PUBLISHES_HANDLE auto await_suspend(std::coroutine_handle<P> h) noexcept -> bool {
            slot& s = *slot_;
            int seen = slot_pending;
            if (!begin(h)) {  // stop already requested: abandon unless completed meanwhile
                abandoned_ = s.state.compare_exchange_strong(
                    seen, slot_abandoned, std::memory_order_acq_rel, std::memory_order_acquire);
                return false;
            }
            s.waiter = this;
            if (s.state.compare_exchange_strong(seen, slot_waiting, std::memory_order_acq_rel,
                                                std::memory_order_acquire)) {
                return true;  // NOTE: from here the sink or the stop callback may resume us
            }
            abandoned_ = seen == slot_abandoned;  // else completed
            return false;
        }
        auto await_resume() noexcept -> bool {
            end();  // after this no stop callback runs or will run
            return !abandoned_;
        }

    private:
        friend class publisher;
        static void on_stop(weft::detail::stop_callback_node* n) noexcept;

        slot* slot_;
        bool abandoned_ = false;  // written before the task resumes, by whoever resumes it
    };

    /// Waits for a unit of the bound (at the bound): granted by release_unit / end, or by
    /// close (which grants every waiter one; it then finds the publisher closed).
    class [[nodiscard]] unit_awaiter : public weft::detail::prim_wait<unit_awaiter> {
    public:
        explicit unit_awaiter(publisher& p) noexcept
            : prim_wait(p.mu_, p.unit_waiters_), pub_(&p) {}
        auto try_now() noexcept -> bool {
            if (pub_->units_ == 0) {
                return false;
            }
            --pub_->units_;
            return true;
        }
        auto await_resume() noexcept -> result<void> {
            if (finish()) {
                return {};
            }
            return std::errc::operation_canceled;
        }

    private:
        publisher* pub_;
    };
    /// Waits until nothing is in flight (flush, close).
    class [[nodiscard]] idle_awaiter : public weft::detail::prim_wait<idle_awaiter> {
    public:
        explicit idle_awaiter(publisher& p) noexcept
            : prim_wait(p.mu_, p.idle_waiters_), pub_(&p) {}
        auto try_now() const noexcept -> bool { return pub_->in_flight_ == 0; }
        auto await_resume() noexcept -> result<void> {
            if (finish()) {
                return {};
            }
            return std::errc::operation_canceled;
        }

    private:
        publisher* pub_;
    };

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
};

}  // namespace weft::bus
