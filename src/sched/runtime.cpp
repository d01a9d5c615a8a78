#include "weft/sched/runtime.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "runtime_core.hpp"

namespace weft {

runtime::runtime(runtime_options opts)
    : core_(std::make_unique<detail::runtime_core>(std::move(opts))) {
    core_->start();
}

runtime::~runtime() { core_->shutdown(); }

auto runtime::worker_count() const noexcept -> unsigned {
    return static_cast<unsigned>(core_->workers.size());
}

auto runtime::worker_metrics(unsigned i) const -> weft::worker_metrics {
    detail::sched_worker& w = *core_->workers.at(i);
    return {.park_attempts = w.park_attempts.load(std::memory_order_relaxed),
            .sleeps = w.sleeps.load(std::memory_order_relaxed),
            .wakes = w.wakes.load(std::memory_order_relaxed),
            .deferred_wakes = w.deferred_wakes.load(std::memory_order_relaxed),
            .stalls = w.stalls.load(std::memory_order_relaxed),
            .queued = static_cast<std::uint64_t>(std::max<std::int64_t>(0, w.queued())),
            .timers = w.timers().pending.load(std::memory_order_relaxed)};
}

auto runtime::metrics() const -> runtime_metrics {
    const detail::runtime_core& c = *core_;
    const auto [threads, busy] = c.blocking.threads();
    return {.workers = static_cast<unsigned>(c.workers.size()),
            .parked = c.idle_count.load(std::memory_order_relaxed),
            .searching = c.searching.load(std::memory_order_relaxed),
            .injected = c.injected(),
            .blocking_threads = threads,
            .blocking_busy = busy,
            .blocking_in_flight = c.blocking.in_flight()};
}

auto runtime::stop() noexcept -> stop_state& { return core_->root; }

void runtime::inject(std::coroutine_handle<> h) { detail::runtime_schedule(*core_, h); }

auto this_runtime() noexcept -> std::optional<runtime_info> {
    detail::sched_worker* w = detail::tl_sched_worker;
    if (w == nullptr) {
        return std::nullopt;
    }
    detail::runtime_core& rt = w->runtime();
    return runtime_info{static_cast<unsigned>(rt.workers.size()), rt.opts.stealing, w->index()};
}

auto switch_to_worker::await_suspend(std::coroutine_handle<> h) const -> bool {
    detail::sched_worker* w = detail::tl_sched_worker;
    if (w == nullptr) {
        throw std::logic_error("weft::switch_to_worker: not on a weft::runtime worker");
    }
    auto& workers = w->runtime().workers;
    if (index >= workers.size()) {
        throw std::out_of_range("weft::switch_to_worker: no worker " + std::to_string(index));
    }
    if (workers[index].get() == w) {
        return false;  // already there
    }
    workers[index]->post(h);
    return true;
}

void runtime::block_on_from_worker() {
    throw std::logic_error(
        "weft::runtime::block_on called on a worker thread (it would wait on the thread that "
        "has to do the work); co_await the task instead");
}

}  // namespace weft
