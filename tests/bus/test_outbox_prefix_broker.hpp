#pragma once

// Test doubles shared by the outbox tests (SQLite and PostgreSQL): the memory broker, whose
// features are reported with keeps_partition_prefix set, so that a relay uses its window;
// prefix_broker with a fault hook set on the memory broker, or producer_prefix_broker with
// its faults per producer.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_set>
#include <utility>

#include "weft/bus/backend.hpp"
#include "weft/bus/errc.hpp"
#include "weft/bus/memory_broker.hpp"

namespace weft::bus::testing {

/// The memory broker behind a backend that says it keeps a partition prefix, so the relay
/// uses its window. A fault hook such as prefix_fault makes that true: once an event of a key
/// fails, every later event of the key fails too until the failed one is sent again, as Kafka's
/// idempotent producer does within a partition.
class prefix_broker : public backend {
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

protected:
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

/// The memory broker as prefix_broker, with faults per producer (one per publisher) as a real
/// broker has them: of a producer's publishes every `every`-th fails (broker_unreachable), and
/// then every later event of its key that producer sends fails too (a cut) until the failed
/// event is stored, whoever sends it: the producer itself again, or another producer (a relay
/// that took the partition over). Refusing is transient: once the failed id is stored the
/// cut is lifted, so a producer whose relay gave a key up and later gets it back is not
/// blocked by an event another relay stored meanwhile. A producer made anew (a relay process
/// restarted) starts with no cut. `every` 0: no fault. A publish let through is stored by the
/// memory broker at once (or dropped as a repeat of a stored id), so "let through" is
/// "stored".
class producer_prefix_broker final : public prefix_broker {
public:
    producer_prefix_broker(memory_broker& inner, std::uint64_t every)
        : prefix_broker(inner), shared_(std::make_shared<shared>()), every_(every) {}
    auto make_producer(publish_sink& sink, std::uint32_t max_pending)
        -> weft::result<std::unique_ptr<backend_producer>> override {
        auto p = inner_.make_producer(sink, max_pending);
        if (!p) {
            return p.error();
        }
        std::unique_ptr<backend_producer> w =
            std::make_unique<producer>(std::move(*p), sink, shared_, every_);
        return w;
    }

    /// Publishes refused so far, by all producers.
    [[nodiscard]] auto refused() const -> std::uint64_t {
        std::lock_guard lock(shared_->mu);
        return shared_->refused;
    }
    /// Cuts lifted because another producer stored the failed event.
    [[nodiscard]] auto lifted_by_others() const -> std::uint64_t {
        std::lock_guard lock(shared_->mu);
        return shared_->lifted_by_others;
    }

private:
    struct shared {
        mutable std::mutex mu;                  // guards this and every producer's cuts and count
        std::unordered_set<message_id> stored;  // every id let through, by any producer
        std::uint64_t refused = 0;
        std::uint64_t lifted_by_others = 0;
    };

    class producer final : public backend_producer {
    public:
        producer(std::unique_ptr<backend_producer> inner,
                 publish_sink& sink,
                 std::shared_ptr<shared> s,
                 std::uint64_t every)
            : inner_(std::move(inner)), sink_(&sink), s_(std::move(s)), every_(every) {}
        void start(envelope env, std::uint32_t slot) override {
            if (const std::error_code ec = fault(env)) {
                sink_->complete(slot, ec);
                return;
            }
            inner_->start(std::move(env), slot);
        }
        void close() noexcept override { inner_->close(); }

    private:
        auto fault(const envelope& e) -> std::error_code {
            if (every_ == 0) {
                return {};
            }
            std::lock_guard lock(s_->mu);
            auto c = cut_.find(e.key);
            if (c != cut_.end() && c->second != e.id && s_->stored.contains(c->second)) {
                cut_.erase(c);  // another producer stored the failed one: the key goes on
                ++s_->lifted_by_others;
                c = cut_.end();
            }
            if (c != cut_.end()) {
                if (c->second != e.id) {
                    ++s_->refused;
                    return make_error_code(bus_errc::broker_unreachable);  // behind the cut
                }
                cut_.erase(c);  // the failed one again: stored, the key goes on
            } else if (++calls_ % every_ == every_ / 2) {
                cut_.emplace(e.key, e.id);
                ++s_->refused;
                return make_error_code(bus_errc::broker_unreachable);
            }
            s_->stored.insert(e.id);
            return {};
        }

        std::unique_ptr<backend_producer> inner_;
        publish_sink* sink_;
        std::shared_ptr<shared> s_;
        std::uint64_t every_;
        std::map<std::string, message_id> cut_;  // key -> the failed event it waits for
        std::uint64_t calls_ = 0;
    };

    std::shared_ptr<shared> shared_;
    std::uint64_t every_;
};

}  // namespace weft::bus::testing
