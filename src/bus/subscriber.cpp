#include "weft/bus/subscriber.hpp"

#include <utility>

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
    config.max_deliveries = options_.max_deliveries;
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
    subscription s{std::move(c), std::move(topic), std::move(group)};
    co_return std::move(s);
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
