#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "weft/trace/context.hpp"
#include "weft/trace/span.hpp"

namespace weft::trace {

struct tracer_options {
    /// The resource's `service.name` in what is exported.
    std::string service_name = "weft";
    /// Finished spans waiting for the exporter, at most: a span that finds the queue full is
    /// dropped and counted (tracer::dropped), so a slow or absent collector never blocks or
    /// grows a worker's memory.
    std::size_t queue_spans = 8192;
};

/// Starts spans and keeps the finished ones in a bounded queue until an exporter takes them
/// (otlp_exporter, or take() directly). Any thread may start and end spans; the queue's lock
/// is held only to move one span in or a batch out, never during IO. Must outlive its spans.
///
///     weft::trace::tracer tr{{.service_name = "orders"}};
///     auto s = tr.start("charge", weft::trace::span_kind::internal, parent_ctx);
class tracer {
public:
    explicit tracer(tracer_options o = {});
    tracer(const tracer&) = delete;
    auto operator=(const tracer&) -> tracer& = delete;
    ~tracer() = default;

    /// A new span with a random id: a child of `parent` when it is valid (same trace id, its
    /// flags and tracestate), else the root of a new trace (sampled).
    [[nodiscard]] auto start(std::string_view name, span_kind kind, const context& parent = {})
        -> span;

    /// Moves up to `max` finished spans, oldest first, to the end of `out`; returns how many.
    auto take(std::vector<span_data>& out, std::size_t max) -> std::size_t;

    [[nodiscard]] auto options() const noexcept -> const tracer_options& { return o_; }
    /// Spans ended and queued, in all.
    [[nodiscard]] auto finished() const noexcept -> std::uint64_t {
        return finished_.load(std::memory_order_relaxed);
    }
    /// Spans dropped because the queue was full.
    [[nodiscard]] auto dropped() const noexcept -> std::uint64_t {
        return dropped_.load(std::memory_order_relaxed);
    }
    /// Spans queued and not yet taken.
    [[nodiscard]] auto queued() const -> std::size_t;

private:
    friend class span;
    void finish(span_data&& d) noexcept;

    tracer_options o_;
    mutable std::mutex mu_;
    std::deque<span_data> queue_;  // guarded by mu_
    // Counters only (no ordering with the queue): relaxed.
    std::atomic<std::uint64_t> finished_{0};
    std::atomic<std::uint64_t> dropped_{0};
};

}  // namespace weft::trace
