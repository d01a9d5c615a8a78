#include "weft/bus/subscriber.hpp"

#include <random>
#include <string>
#include <utility>

#include "delivery_counters.hpp"
#include "weft/bus/errc.hpp"

namespace weft::bus {

auto subscriber::subscribe(std::string topic, std::string group) -> task<result<subscription>> {
    if (topic.empty() || group.empty()) {
        co_return std::make_error_code(std::errc::invalid_argument);
    }
    {
        std::lock_guard lock(mu_);
        if (closed_) {
            co_return make_error_code(bus_errc::subscription_closed);
        }
    }
    consumer_config config;
    config.topic = topic;
    config.group = group;
    config.ack_wait = options_.ack_wait;
    const std::uint32_t max_deliveries =
        options_.max_deliveries != 0 ? options_.max_deliveries : options_.retry.max_attempts;
    config.max_deliveries = max_deliveries;
    config.dead_letter_topic =
        options_.dead_letter_topic.empty() ? topic + ".dead-letter" : options_.dead_letter_topic;
    auto made = co_await backend_->make_consumer(std::move(config));
    if (!made) {
        co_return made.error();
    }
    std::shared_ptr<backend_consumer> c = std::move(*made);
    bool late = false;
    {
        std::lock_guard lock(mu_);
        late = closed_;
        if (!late) {
            std::erase_if(made_, [](const auto& w) { return w.expired(); });
            made_.push_back(c);
        }
    }
    if (late) {
        c->close();
        co_return make_error_code(bus_errc::subscription_closed);
    }
    auto state = std::make_shared<detail::subscription_state>();
    state->retry = options_.retry;
    if (options_.metrics != nullptr) {
        state->counters = detail::make_delivery_counters(*options_.metrics, backend_->name(), topic,
                                                         group, max_deliveries);
    }
    subscription s{std::move(c), std::move(topic), std::move(group), std::move(state)};
    co_return std::move(s);
}

namespace {

// A uniform draw from [0, 1] for the retry jitter: a generator per thread, so that fail()
// from any thread takes no lock; seeded from the OS so processes do not retry in step.
auto jitter_unit() -> double {
    thread_local std::mt19937_64 gen{std::random_device{}()};
    return std::uniform_real_distribution<double>(0.0, 1.0)(gen);
}

}  // namespace

auto subscription::counted_next(std::shared_ptr<backend_consumer> c,
                                std::shared_ptr<detail::delivery_counters> counters)
    -> task<result<delivery>> {
    auto r = co_await c->next();
    if (r) {
        counters->deliveries.inc();
        if (r->attempt() > 1) {
            counters->redeliveries.inc();
        }
        r->counters_ = std::move(counters);
    }
    co_return r;
}

auto subscription::next() -> task<result<delivery>> {
    if (!state_->counters) {
        return consumer_->next();  // no frame of ours between the caller and the backend
    }
    return counted_next(consumer_, state_->counters);
}

auto subscription::fail(delivery& d, std::error_code error) -> result<void> {
    const retry_policy& p = state_->retry;
    if (p.classify && p.classify(error) == error_class::permanent) {
        return d.term("permanent error: " + error.message());
    }
    if (p.max_attempts != 0 && d.attempt() >= p.max_attempts) {
        return d.term("retries exhausted after " + std::to_string(d.attempt()) +
                      " attempts: " + error.message());
    }
    return d.nack(p.delay_after(d.attempt(), p.jitter ? jitter_unit() : 1.0));
}

void subscriber::close() noexcept {
    std::vector<std::weak_ptr<backend_consumer>> made;
    {
        std::lock_guard lock(mu_);
        closed_ = true;
        made.swap(made_);
    }
    for (auto& w : made) {
        if (auto c = w.lock()) {
            c->close();
        }
    }
}

}  // namespace weft::bus
