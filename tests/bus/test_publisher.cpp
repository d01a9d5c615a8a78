#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

#include "weft/bus/backend.hpp"
#include "weft/bus/errc.hpp"
#include "weft/bus/publisher.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"

namespace {

using namespace weft::bus;
using namespace std::chrono_literals;

/// A backend whose producer's start throws for an envelope whose payload is "throw" (the fault
/// under test: an allocation or a client library failing inside start) and acknowledges every
/// other one inline.
class throwing_backend final : public backend {
public:
    [[nodiscard]] auto name() const noexcept -> std::string_view override { return "throwing"; }
    [[nodiscard]] auto features() const noexcept -> backend_features override { return {}; }
    auto make_producer(publish_sink& sink, std::uint32_t /*max_pending*/)
        -> weft::result<std::unique_ptr<backend_producer>> override {
        return std::unique_ptr<backend_producer>(new producer(sink));
    }
    auto make_consumer(consumer_config /*config*/)
        -> weft::task<weft::result<std::shared_ptr<backend_consumer>>> override {
        co_return std::make_error_code(std::errc::not_supported);
    }

private:
    class producer final : public backend_producer {
    public:
        explicit producer(publish_sink& sink) : sink_(sink) {}
        void start(envelope env, std::uint32_t slot) override {
            if (env.payload == "throw") {
                throw std::runtime_error("start failed");
            }
            sink_.complete(slot, ack{});
        }
        void close() noexcept override {}

    private:
        publish_sink& sink_;
    };
};

auto event(const char* payload) -> envelope {
    envelope e;
    e.topic = "orders";
    e.key = "k";
    e.payload = payload;
    return e;
}

// With max_pending 1, a start that throws must give back its slot and unit and leave in-flight:
// otherwise the next publish waits for a unit forever, and flush() and close() for an outcome
// that never comes.
TEST(publisher, a_start_that_throws_gives_back_its_slot) {
    throwing_backend b;
    weft::runtime rt{{.workers = 2}};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{b, {.max_pending = 1}};
        bool threw = false;
        try {
            (void)co_await pub.publish(event("throw"));
        } catch (const std::runtime_error&) {
            threw = true;
        }
        EXPECT_TRUE(threw);
        EXPECT_EQ(pub.in_flight(), 0);
        EXPECT_THROW((void)pub.try_publish_async(event("throw")), std::runtime_error);
        EXPECT_EQ(pub.in_flight(), 0);
        threw = false;
        try {
            (void)co_await weft::with_timeout(2s, pub.publish_async(event("throw")));
        } catch (const std::runtime_error&) {
            threw = true;
        }
        EXPECT_TRUE(threw);
        auto a = co_await weft::with_timeout(2s, pub.publish(event("ok")));
        EXPECT_TRUE(a && *a);
        auto id = pub.try_publish_async(event("ok"));
        EXPECT_TRUE(id.has_value()) << id.error().message();
        auto recv = [&]() -> weft::task<weft::result<publish_result>> {
            co_return co_await pub.results().recv();
        };
        auto r = co_await weft::with_timeout(2s, recv());
        EXPECT_TRUE(r && *r);
        auto flushed = co_await weft::with_timeout(2s, pub.flush());
        EXPECT_TRUE(flushed && *flushed);
        auto closed = co_await weft::with_timeout(2s, pub.close());
        EXPECT_TRUE(closed && *closed);
    }());
}

}  // namespace
