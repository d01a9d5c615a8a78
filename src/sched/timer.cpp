// The timer awaiters' side in the runtime: arming an entry on the worker's wheel, cancelling it.

#include "weft/sched/timer.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "runtime_core.hpp"

namespace weft::detail {

namespace {

// What both arms share: the worker, the waiter, and the registration with `stop` (nullptr:
// cancelled already, the caller must not suspend). After it the caller takes q.mu, checks
// that no stop arrived meanwhile (op.st == cancelled) and files the entry (file_entry).
auto begin_arm(timer_op& op, stop_state* stop, std::coroutine_handle<> waiter, const char* who)
    -> sched_worker* {
    sched_worker* w = tl_sched_worker;
    if (w == nullptr) {
        throw std::logic_error(std::string(who) + ": not on a weft::runtime worker");
    }
    op.stop = stop;
    op.waiter = waiter;
    op.st = timer_op::state::idle;
    if (stop != nullptr && stop->stop_requested()) {
        op.st = timer_op::state::cancelled;
        return nullptr;
    }
    return w;
}

auto register_stop(timer_op& op, timer_queue& q, stop_state* stop) -> bool {
    op.owner = &q;
    if (stop != nullptr) {
        if (!stop->try_add(&op)) {
            op.st = timer_op::state::cancelled;
            return false;
        }
        op.registered = true;
    }
    return true;
}

// Under q.mu.
void file_entry(timer_op& op, timer_queue& q, std::uint64_t when) {
    op.when_ms = when;
    op.st = timer_op::state::armed;
    q.wheel.insert(&op);
    q.pending.fetch_add(1, std::memory_order_seq_cst);
}

}  // namespace

auto timer_arm(timer_op& op,
               std::chrono::steady_clock::time_point deadline,
               stop_state* stop,
               std::coroutine_handle<> waiter) -> bool {
    sched_worker* w = begin_arm(op, stop, waiter, "weft::sleep_for/sleep_until");
    if (w == nullptr) {
        return false;
    }
    runtime_core& rt = w->runtime();
    const std::uint64_t when = rt.to_ms_ceil(deadline);
    if (when <= rt.now_ms() && rt.now() >= deadline) {
        if (w->consume_budget()) {
            w->yield_turn(waiter);  // turn used up: let the others run first
            return true;
        }
        return false;
    }
    timer_queue& q = w->timers();
    if (!register_stop(op, q, stop)) {
        return false;
    }
    std::lock_guard lock(q.mu);
    if (op.st == timer_op::state::cancelled) {  // stop arrived between try_add and here
        return false;
    }
    file_entry(op, q, when);
    return true;
}

auto timer_arm_movable(timer_op& op,
                       const std::atomic<std::int64_t>& deadline_ns,
                       std::int64_t cap_ns,
                       std::atomic<timer_queue*>& armed_on,
                       stop_state* stop,
                       std::coroutine_handle<> waiter) -> bool {
    sched_worker* w = begin_arm(op, stop, waiter, "weft::deadline_timer::wait");
    if (w == nullptr) {
        return false;
    }
    timer_queue& q = w->timers();
    if (!register_stop(op, q, stop)) {
        return false;
    }
    runtime_core& rt = w->runtime();
    std::lock_guard lock(q.mu);
    if (op.st == timer_op::state::cancelled) {
        return false;
    }
    armed_on.store(&q, std::memory_order_seq_cst);
    const std::chrono::steady_clock::time_point deadline{
        std::chrono::nanoseconds{std::min(deadline_ns.load(std::memory_order_seq_cst), cap_ns)}};
    const std::uint64_t when = rt.to_ms_ceil(deadline);
    if (when <= rt.now_ms() && rt.now() >= deadline) {
        armed_on.store(nullptr, std::memory_order_relaxed);
        return false;  // already due
    }
    file_entry(op, q, when);
    return true;
}

void timer_move(timer_op& op,
                const std::atomic<std::int64_t>& deadline_ns,
                std::atomic<timer_queue*>& armed_on) noexcept {
    timer_queue* q = armed_on.load(std::memory_order_seq_cst);
    if (q == nullptr) {
        return;  // not armed: the next arm reads the new deadline
    }
    bool earlier = false;
    {
        std::lock_guard lock(q->mu);
        if (op.st != timer_op::state::armed || op.owner != q) {
            return;
        }
        const std::chrono::steady_clock::time_point deadline{
            std::chrono::nanoseconds{deadline_ns.load(std::memory_order_seq_cst)}};
        const std::uint64_t when = q->owner().runtime().to_ms_ceil(deadline);
        if (when == op.when_ms) {
            return;
        }
        earlier = when < op.when_ms;
        q->wheel.remove(&op);
        op.when_ms = when;
        q->wheel.insert(&op);
    }
    if (earlier && tl_sched_worker != &q->owner()) {
        q->owner().unpark();  // it may be parked until the old, later deadline
    }
}

void timer_op::on_stop(stop_callback_node* n) noexcept {
    auto* op = static_cast<timer_op*>(n);
    timer_queue* q = op->owner;
    std::coroutine_handle<> resume;
    {
        std::lock_guard lock(q->mu);
        if (op->st == state::armed) {
            q->wheel.remove(op);
            q->pending.fetch_sub(1, std::memory_order_seq_cst);
            op->st = state::cancelled;
            resume = op->waiter;
        } else if (op->st == state::idle) {
            op->st = state::cancelled;  // timer_arm sees it and does not suspend
        }
    }
    if (resume) {
        // NOTE: op may be gone once resume runs; touch nothing of it from here on.
        runtime_schedule(q->owner().runtime(), resume);
    }
}

auto timer_finish(timer_op& op) noexcept -> result<void> {
    if (op.registered) {
        op.stop->remove(&op);
        op.registered = false;
    }
    if (op.st == timer_op::state::cancelled) {
        return std::errc::operation_canceled;
    }
    return {};
}

}  // namespace weft::detail
