#include "weft/trace/tracer.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

namespace weft::trace {

namespace {

auto now_ns() noexcept -> std::uint64_t {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count());
}

}  // namespace

tracer::tracer(tracer_options o) : o_(std::move(o)) {}

auto tracer::start(std::string_view name, span_kind kind, const context& parent) -> span {
    span s;
    s.tracer_ = this;
    if (parent.valid()) {
        s.ctx_.trace = parent.trace;
        s.ctx_.flags = parent.flags;
        s.ctx_.state = parent.state;
        s.data_.parent = parent.span;
    } else {
        s.ctx_.trace = random_trace_id();
        s.ctx_.flags = 1;
    }
    s.ctx_.span = random_span_id();
    s.data_.trace = s.ctx_.trace;
    s.data_.id = s.ctx_.span;
    s.data_.name.assign(name);
    s.data_.kind = kind;
    s.data_.state = s.ctx_.state;
    s.data_.attributes.reserve(4);
    s.data_.start_ns = now_ns();
    return s;
}

void tracer::finish(span_data&& d) noexcept {
    finished_.fetch_add(1, std::memory_order_relaxed);
    try {
        std::lock_guard lock(mu_);
        if (queue_.size() < o_.queue_spans) {
            queue_.push_back(std::move(d));
            return;
        }
    } catch (...) {  // std::bad_alloc: counted as a drop, as a full queue is
    }
    dropped_.fetch_add(1, std::memory_order_relaxed);
}

auto tracer::take(std::vector<span_data>& out, std::size_t max) -> std::size_t {
    std::lock_guard lock(mu_);
    const std::size_t n = std::min(max, queue_.size());
    for (std::size_t i = 0; i < n; ++i) {
        out.push_back(std::move(queue_.front()));
        queue_.pop_front();
    }
    return n;
}

auto tracer::queued() const -> std::size_t {
    std::lock_guard lock(mu_);
    return queue_.size();
}

}  // namespace weft::trace
