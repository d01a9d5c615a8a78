#include "weft/trace/span.hpp"

#include <chrono>
#include <utility>

#include "weft/trace/tracer.hpp"

namespace weft::trace {

namespace {

auto now_ns() noexcept -> std::uint64_t {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count());
}

}  // namespace

span::span(span&& o) noexcept
    : ctx_(std::move(o.ctx_)),
      tracer_(std::exchange(o.tracer_, nullptr)),
      data_(std::move(o.data_)) {}

auto span::operator=(span&& o) noexcept -> span& {
    if (this != &o) {
        end();
        ctx_ = std::move(o.ctx_);
        tracer_ = std::exchange(o.tracer_, nullptr);
        data_ = std::move(o.data_);
    }
    return *this;
}

void span::set_attribute(std::string_view key, std::string_view value) {
    if (tracer_ != nullptr) {
        data_.attributes.push_back(attribute{std::string(key), std::string(value)});
    }
}
void span::set_attribute(std::string_view key, std::int64_t value) {
    if (tracer_ != nullptr) {
        data_.attributes.push_back(attribute{std::string(key), value});
    }
}
void span::set_attribute(std::string_view key, double value) {
    if (tracer_ != nullptr) {
        data_.attributes.push_back(attribute{std::string(key), value});
    }
}
void span::set_attribute(std::string_view key, bool value) {
    if (tracer_ != nullptr) {
        data_.attributes.push_back(attribute{std::string(key), value});
    }
}

void span::set_status(status_code code, std::string_view message) {
    if (tracer_ != nullptr) {
        data_.status = code;
        data_.status_message.assign(message);
    }
}

void span::end() noexcept {
    if (tracer_ == nullptr) {
        return;
    }
    data_.end_ns = now_ns();
    std::exchange(tracer_, nullptr)->finish(std::move(data_));
}

}  // namespace weft::trace
