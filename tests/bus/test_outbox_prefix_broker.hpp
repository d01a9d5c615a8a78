#pragma once

// A test double shared by the outbox tests (SQLite and PostgreSQL): the memory broker, whose
// features are reported with keeps_partition_prefix set, so that a relay uses its window.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>

#include "weft/bus/backend.hpp"
#include "weft/bus/errc.hpp"
#include "weft/bus/memory_broker.hpp"

namespace weft::bus::testing {

/// The memory broker behind a backend that says it keeps a partition prefix, so the relay
/// uses its window. A fault hook such as prefix_fault makes that true: once an event of a key
/// fails, every later event of the key fails too until the failed one is sent again, as Kafka's
/// idempotent producer does within a partition.
class prefix_broker final : public backend {
public:
    explicit prefix_broker(memory_broker& inner) : inner_(inner) {}
    [[nodiscard]] auto name() const noexcept -> std::string_view override { return "prefix"; }
    [[nodiscard]] auto features() const noexcept -> backend_features override {
        auto f = inner_.features();
        f.keeps_partition_prefix = true;
        return f;
    }
    auto make_producer(publish_sink& sink, std::uint32_t max_pending)
        -> weft::result<std::unique_ptr<backend_producer>> override {
        return inner_.make_producer(sink, max_pending);
    }
    auto make_consumer(consumer_config config)
        -> weft::task<weft::result<std::shared_ptr<backend_consumer>>> override {
        return inner_.make_consumer(std::move(config));
    }

private:
    memory_broker& inner_;
};

/// A memory_broker publish fault that keeps a per-key prefix: every `every`-th publish fails
/// (broker_unreachable), and then every later event of its key fails too until the failed one
/// is sent again. Shared by copies of the hook (set_publish_fault takes it by value).
class prefix_fault {
public:
    explicit prefix_fault(std::uint64_t every) : s_(std::make_shared<state>()), every_(every) {}
    auto operator()(const envelope& e) const -> std::error_code {
        std::lock_guard lock(s_->mu);
        auto c = s_->cut.find(e.key);
        if (c != s_->cut.end()) {
            if (c->second != e.id) {
                return make_error_code(bus_errc::broker_unreachable);  // behind the failed one
            }
            s_->cut.erase(c);  // the failed one again: stored, the key goes on
            return {};
        }
        if (++s_->calls % every_ == every_ / 2) {
            s_->cut.emplace(e.key, e.id);
            return make_error_code(bus_errc::broker_unreachable);
        }
        return {};
    }

private:
    struct state {
        std::mutex mu;
        std::map<std::string, message_id> cut;  // key -> the failed event it waits for
        std::uint64_t calls = 0;
    };
    std::shared_ptr<state> s_;
    std::uint64_t every_;
};

}  // namespace weft::bus::testing
