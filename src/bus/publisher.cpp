#include "weft/bus/publisher.hpp"

#include <chrono>
#include <mutex>
#include <system_error>
#include <utility>

#include "publisher_completion_run.hpp"
#include "publisher_counters.hpp"
#include "weft/bus/errc.hpp"

namespace weft::bus {

namespace {
// The run collecting on this thread (completion_run::collect), or nullptr. Read and written only
// by the out-of-line functions below and publisher::complete, never inside a coroutine body.
constinit thread_local completion_run* tl_collecting = nullptr;
}  // namespace

void completion_run::collect() noexcept { tl_collecting = this; }

void completion_run::stop_collecting() noexcept { tl_collecting = nullptr; }

auto completion_run::resume_all() -> std::size_t {
    const std::size_t n = handles_.size();
    for (std::size_t i = 0; i < n; ++i) {
        handles_[i].resume();  // adds nothing: nobody collects into this run now
    }
    handles_.clear();
    return n;
}

auto completion_run::collecting() noexcept -> completion_run* { return tl_collecting; }

publisher::publisher(backend& b, publisher_options options)
    : max_pending_(options.max_pending == 0 ? 1 : options.max_pending),
      results_(max_pending_, *this),
      slots_(std::make_unique<slot[]>(max_pending_)),
      units_(max_pending_) {
    free_.reserve(max_pending_);
    for (std::uint32_t i = max_pending_; i > 0; --i) {
        free_.push_back(i - 1);
    }
    auto p = b.make_producer(*this, max_pending_);
    if (!p) {
        throw std::system_error(p.error(), "weft::bus::publisher: backend " +
                                               std::string(b.name()) + " made no producer");
    }
    producer_ = std::move(*p);
    if (options.metrics != nullptr) {
        counters_ = detail::make_publisher_counters(
            *options.metrics, b.name(), [this] { return static_cast<double>(in_flight()); });
    }
}

publisher::~publisher() {
    if (producer_) {
        producer_->close();
    }
}

auto publisher::result_channel::try_recv() -> result<publish_result> {
    auto r = ch_.try_recv();
    if (r) {
        pub_->release_unit();
    }
    return r;
}

auto publisher::begin(envelope& env, bool awaited, bool have_unit, std::uint32_t& index)
    -> std::error_code {
    // One clock reading serves both the id's timestamp and the time (a clock read was a tenth of
    // a memory-broker publish when each took its own).
    const bool no_id = env.id.is_nil();
    const bool no_time = env.time == std::chrono::system_clock::time_point{};
    if (no_id || no_time) {
        const auto now = std::chrono::system_clock::now();
        if (no_id) {
            env.id = message_id::generate(now);
        }
        if (no_time) {
            env.time = now;
        }
    }
    return take_slot(env.id, env.key, awaited, have_unit, index);
}

auto publisher::take_slot(const message_id& id,
                          std::string_view key,
                          bool awaited,
                          bool have_unit,
                          std::uint32_t& index) -> std::error_code {
    {
        std::lock_guard lock(mu_);
        if (closed_) {
            return make_error_code(bus_errc::publisher_closed);  // a held unit is not given back
        }
        if (!have_unit) {
            if (units_ == 0) {  // units_ > 0 => nobody waits: taking one overtakes no waiter
                return std::make_error_code(std::errc::operation_would_block);
            }
            --units_;
        }
        index = free_.back();
        free_.pop_back();
        ++in_flight_;
    }
    slot& s = slots_[index];
    s.id = id;
    if (!awaited) {
        s.key = key;  // for its publish_result; an awaited publish's caller has the key
    }
    s.awaited = awaited;
    s.outcome.reset();
    s.state.store(slot_pending, std::memory_order_relaxed);  // published by start's hand-off
    if (counters_) {
        s.started = std::chrono::steady_clock::now();
        counters_->published.inc();
    }
    return {};
}

void publisher::release_unit_locked(weft::detail::wake_chain& woken) noexcept {
    if (weft::detail::wait_node* w = unit_waiters_.claim_front()) {
        woken.add(w);  // the unit goes to the waiter
    } else {
        ++units_;
    }
}

void publisher::done_locked(weft::detail::wake_chain& woken) noexcept {
    if (--in_flight_ == 0) {
        while (weft::detail::wait_node* w = idle_waiters_.claim_front()) {
            woken.add(w);
        }
    }
}

void publisher::release_unit() noexcept {
    weft::detail::wake_chain woken;
    {
        std::lock_guard lock(mu_);
        release_unit_locked(woken);
    }
    woken.resume_all();
}

void publisher::end_unread(std::uint32_t index) noexcept {
    weft::detail::wake_chain woken;
    {
        std::lock_guard lock(mu_);
        free_.push_back(index);  // never grows past max_pending: reserved up front
        release_unit_locked(woken);
        done_locked(woken);
    }
    woken.resume_all();
}

void publisher::start(envelope&& env, std::uint32_t index) {
    try {
        producer_->start(std::move(env), index);
    } catch (...) {
        end_unread(index);  // a start that throws reports no outcome (backend_producer)
        throw;
    }
}

void publisher::complete(std::uint32_t index, result<ack> outcome) noexcept {
    slot& s = slots_[index];
    if (counters_) {
        if (outcome) {
            counters_->acked.inc();
            counters_->ack_seconds.observe(
                std::chrono::duration<double>(std::chrono::steady_clock::now() - s.started)
                    .count());
        } else {
            counters_->failed.inc();
        }
    }
    if (s.awaited) {
        s.outcome.emplace(std::move(outcome));
        int seen = s.state.load(std::memory_order_acquire);
        for (;;) {
            if (seen == slot_abandoned) {  // the task was stopped and left: the slot is ours
                s.outcome.reset();
                end_unread(index);
                return;
            }
            if (s.state.compare_exchange_weak(seen, slot_completed, std::memory_order_acq_rel,
                                              std::memory_order_acquire)) {
                break;
            }
        }
        if (seen == slot_waiting) {
            // Only we may resume it now (the stop callback finds it completed). Copy out first:
            // once resumed the task may end on another thread.
            const ack_awaiter* w = s.waiter;
            const std::coroutine_handle<> h = w->handle;
            const weft::detail::waiter_home home = w->home;
            // A drain task collecting a run (see completion_run) resumes it itself, later in
            // this pass, on this worker: only a task of this worker's own executor.
            if (completion_run* run = completion_run::collecting()) {
                const weft::detail::worker_base* here =
                    weft::detail::tl_worker_unsafe_in_coroutines;
                if (here != nullptr &&
                    (here == home.worker || here->root_stop() == home.executor) && run->add(h)) {
                    return;
                }
            }
            weft::detail::resume_waiter(h, home);
        }
        return;
    }
    publish_result r{s.id, std::move(s.key), std::move(outcome)};
    {
        // The slot back before the result is readable: reading it returns the unit, and a
        // unit must always find a slot.
        std::lock_guard lock(mu_);
        free_.push_back(index);
    }
    // Never full: unread results + in flight <= max_pending, and this one was in flight.
    auto sent = results_.ch_.try_send(std::move(r));
    (void)sent;
    weft::detail::wake_chain woken;
    {
        std::lock_guard lock(mu_);
        done_locked(woken);
    }
    woken.resume_all();
}

auto publisher::publish(envelope env) -> task<result<ack>> {
    if (env.topic.empty()) {
        co_return std::make_error_code(std::errc::invalid_argument);
    }
    std::uint32_t index = 0;
    std::error_code ec = begin(env, /*awaited=*/true, /*have_unit=*/false, index);
    if (ec == std::errc::operation_would_block) {
        auto r = co_await unit_awaiter{*this};  // at the bound
        if (!r) {
            co_return r.error();
        }
        ec = begin(env, /*awaited=*/true, /*have_unit=*/true, index);
    }
    if (ec) {
        co_return ec;
    }
    start(std::move(env), index);
    slot& s = slots_[index];
    const bool completed = co_await ack_awaiter{s};
    if (!completed) {
        co_return std::errc::operation_canceled;  // the sink frees the slot when it comes
    }
    result<ack> out = std::move(*s.outcome);
    s.outcome.reset();
    end_unread(index);
    co_return out;
}

void publisher::ack_awaiter::on_stop(weft::detail::stop_callback_node* n) noexcept {
    auto* self = static_cast<ack_awaiter*>(n);
    std::atomic<int>& state = self->slot_->state;
    int seen = state.load(std::memory_order_acquire);
    while (seen == slot_pending || seen == slot_waiting) {
        if (state.compare_exchange_weak(seen, slot_abandoned, std::memory_order_acq_rel,
                                        std::memory_order_acquire)) {
            if (seen == slot_waiting) {  // suspended: resume it; else await_suspend sees it
                self->abandoned_ = true;
                weft::detail::resume_waiter(self->handle, self->home);
            }
            return;
        }
    }
    // completed: the sink resumes it (or it never suspended)
}

auto publisher::start_async(envelope&& env, bool have_unit) -> result<message_id> {
    std::uint32_t index = 0;
    if (const std::error_code ec = begin(env, /*awaited=*/false, have_unit, index)) {
        return ec;
    }
    const message_id id = env.id;
    start(std::move(env), index);
    return id;
}

auto publisher::publish_async(envelope env) -> task<result<message_id>> {
    if (env.topic.empty()) {
        co_return std::make_error_code(std::errc::invalid_argument);
    }
    auto r = start_async(std::move(env), /*have_unit=*/false);
    if (r || r.error() != std::errc::operation_would_block) {
        co_return r;
    }
    // At the bound (begin took nothing and moved nothing out of env: start_async moves only
    // after a successful begin).
    auto u = co_await unit_awaiter{*this};
    if (!u) {
        co_return u.error();
    }
    co_return start_async(std::move(env), /*have_unit=*/true);
}

auto publisher::try_publish_async(envelope env) -> result<message_id> {
    if (env.topic.empty()) {
        return std::make_error_code(std::errc::invalid_argument);
    }
    return start_async(std::move(env), /*have_unit=*/false);
}

auto publisher::try_publish_encoded_async(const encoded_envelope& e) -> result<message_id> {
    if (e.topic.empty() || e.id.is_nil()) {
        return std::make_error_code(std::errc::invalid_argument);
    }
    std::uint32_t index = 0;
    if (const std::error_code ec =
            take_slot(e.id, e.key, /*awaited=*/false, /*have_unit=*/false, index)) {
        return ec;
    }
    bool taken = false;
    try {
        taken = producer_->start_encoded(e, index);
    } catch (...) {
        end_unread(index);  // a start that throws reports no outcome (backend_producer)
        throw;
    }
    if (!taken) {
        auto env = decode(e.bytes);
        if (!env) {
            complete(index, env.error());  // its outcome, like any refusal by the backend
            return e.id;
        }
        start(std::move(*env), index);
    }
    return e.id;
}

auto publisher::flush() -> task<result<void>> { co_return co_await idle_awaiter{*this}; }

auto publisher::close() -> task<result<void>> {
    weft::detail::wake_chain woken;
    {
        std::lock_guard lock(mu_);
        if (!closed_) {
            closed_ = true;
            // Wake every publish waiting at the bound, each with a unit: it finds closed_ and
            // returns publisher_closed. The extra units are never given back; nothing starts
            // any more.
            units_ += std::ptrdiff_t{1} << 40;
            while (weft::detail::wait_node* w = unit_waiters_.claim_front()) {
                woken.add(w);
                --units_;
            }
        }
    }
    woken.resume_all();
    auto idle = co_await idle_awaiter{*this};
    if (!idle) {
        co_return idle;
    }
    producer_->close();
    results_.ch_.close();
    co_return result<void>{};
}

}  // namespace weft::bus
