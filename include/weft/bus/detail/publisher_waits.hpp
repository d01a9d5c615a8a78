#pragma once

// Private to weft::bus::publisher: what its tasks wait on. A completion slot and its state word
// (an awaited publish's ack), a unit of the bound (a publish at max_pending), an idle publisher
// (flush, close) and a result (results().recv()). publisher derives from publisher_waits so that
// its members and src/bus/publisher.cpp name these types as its own; the awaiters that read the
// publisher's guarded state are templates on the publisher type, which befriends them, so that
// this header needs no definition of publisher.

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <optional>
#include <string>

#include "weft/bus/ack.hpp"
#include "weft/bus/message_id.hpp"
#include "weft/core/result.hpp"
#include "weft/sync/channel.hpp"
#include "weft/sync/detail/waiter.hpp"

namespace weft::bus {
class publisher;
}  // namespace weft::bus

namespace weft::bus::detail {

class publisher_waits {
public:
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
    class ack_awaiter;
    struct slot {
        message_id id;
        std::string key;  // publish_async only
        bool awaited = false;
        std::optional<result<ack>> outcome;
        std::atomic<int> state{0};
        ack_awaiter* waiter = nullptr;                    // valid while state == waiting
        std::chrono::steady_clock::time_point started{};  // with metrics only: the ack latency
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
        friend class weft::bus::publisher;
        static void on_stop(weft::detail::stop_callback_node* n) noexcept;

        slot* slot_;
        bool abandoned_ = false;  // written before the task resumes, by whoever resumes it
    };

    /// Waits for a unit of the bound (at the bound): granted by release_unit / end, or by
    /// close (which grants every waiter one; it then finds the publisher closed).
    template <typename Publisher>
    class [[nodiscard]] unit_awaiter : public weft::detail::prim_wait<unit_awaiter<Publisher>> {
    public:
        explicit unit_awaiter(Publisher& p) noexcept
            : weft::detail::prim_wait<unit_awaiter>(p.mu_, p.unit_waiters_), pub_(&p) {}
        auto try_now() noexcept -> bool {
            if (pub_->units_ == 0) {
                return false;
            }
            --pub_->units_;
            return true;
        }
        auto await_resume() noexcept -> result<void> {
            if (this->finish()) {
                return {};
            }
            return std::errc::operation_canceled;
        }

    private:
        Publisher* pub_;
    };

    /// Waits until nothing is in flight (flush, close).
    template <typename Publisher>
    class [[nodiscard]] idle_awaiter : public weft::detail::prim_wait<idle_awaiter<Publisher>> {
    public:
        explicit idle_awaiter(Publisher& p) noexcept
            : weft::detail::prim_wait<idle_awaiter>(p.mu_, p.idle_waiters_), pub_(&p) {}
        auto try_now() const noexcept -> bool { return pub_->in_flight_ == 0; }
        auto await_resume() noexcept -> result<void> {
            if (this->finish()) {
                return {};
            }
            return std::errc::operation_canceled;
        }

    private:
        Publisher* pub_;
    };

    /// results().recv(): the channel's recv, and the unit of the bound given back as the result
    /// is handed over.
    template <typename Publisher, typename Result>
    class [[nodiscard]] result_awaiter {
    public:
        result_awaiter(channel<Result>& ch, Publisher& pub) noexcept
            : inner_(ch.recv()), pub_(&pub) {}
        auto await_ready() -> bool { return inner_.await_ready(); }
        template <typename P>
        WEFT_PUBLISHES_HANDLE auto await_suspend(std::coroutine_handle<P> h) -> bool {
            return inner_.await_suspend(h);
        }
        auto await_resume() -> result<Result> {
            auto r = inner_.await_resume();
            if (r) {
                pub_->release_unit();
            }
            return r;
        }

    private:
        typename channel<Result>::recv_awaiter inner_;
        Publisher* pub_;
    };
};

}  // namespace weft::bus::detail
