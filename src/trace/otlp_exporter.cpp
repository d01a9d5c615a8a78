#include "weft/trace/otlp_exporter.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "weft/sched/timer.hpp"
#include "weft/trace/otlp_json.hpp"

namespace weft::trace {

otlp_exporter::otlp_exporter(tracer& t, otlp_exporter_options o)
    : t_(t), o_(std::move(o)), http_(o_.client) {}

auto otlp_exporter::flush() -> task<void> {
    std::vector<span_data> batch;
    for (;;) {
        batch.clear();
        const std::size_t n = t_.take(batch, std::max<std::size_t>(1, o_.batch_spans));
        if (n == 0) {
            co_return;
        }
        auto r = co_await http_.post(o_.url, otlp_json(batch, t_.options().service_name),
                                     "application/json");
        if (r && r->status >= 200 && r->status < 300) {
            exported_.fetch_add(n, std::memory_order_relaxed);
        } else {
            failed_.fetch_add(n, std::memory_order_relaxed);
        }
    }
}

auto otlp_exporter::run() -> task<void> {
    // The loop wakes every `tick` (at most 50 ms) to notice stop() and a full batch; it sends
    // once `interval` has passed or a batch is waiting, so an idle exporter costs one timer
    // per tick and no request.
    const auto tick = std::min(o_.interval, std::chrono::milliseconds{50});
    auto waited = std::chrono::milliseconds{0};
    while (!stop_.load(std::memory_order_acquire)) {
        if (!co_await sleep_for(tick)) {
            co_return;  // cancelled: what is queued stays for a later flush()
        }
        waited += tick;
        if (waited >= o_.interval || t_.queued() >= o_.batch_spans) {
            waited = {};
            co_await flush();
        }
    }
    co_await flush();
}

}  // namespace weft::trace
