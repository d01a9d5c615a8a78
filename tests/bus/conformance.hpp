#pragma once

// The conformance suite every weft::bus backend runs (in the manner of Watermill's universal
// pub/sub tests): a value-parameterised GoogleTest suite over a backend factory,
//
//     INSTANTIATE_TEST_SUITE_P(my_backend, bus_conformance, ::testing::Values(backend_factory{
//         .make = [] { return std::make_unique<my_backend>(...); },
//         .pause = ..., .resume = ...}));            // hold acks, when features().can_pause
//
// (Parameterised rather than typed: g++ 12 rejects `(co_await x).value()` inside the templates
// a typed suite makes of every test body.)
//
// Tests of what a backend declares it cannot do (backend_features), and the broker-outage
// tests where the factory has no stop_broker / start_broker, report skipped. Timing:
// short ack timeouts drive redelivery, but every assertion is on counts and order, never on
// elapsed time. Topics are unique per test, so a shared broker does not mix tests.
// The tests are in conformance.cpp, compiled once (tests/CMakeLists.txt) and linked into each
// backend's test binary beside its INSTANTIATE_TEST_SUITE_P.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "weft/bus/backend.hpp"
#include "weft/bus/errc.hpp"
#include "weft/bus/publisher.hpp"
#include "weft/bus/subscriber.hpp"
#include "weft/core/join_handle.hpp"
#include "weft/core/scope.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/spawn_blocking.hpp"
#include "weft/sched/timer.hpp"
#include "weft/sched/yield.hpp"
#include "weft/sync/event.hpp"

namespace weft::bus::test {

using namespace std::chrono_literals;

/// How the suite makes and drives one backend.
struct backend_factory {
    std::function<std::unique_ptr<backend>()> make;
    std::function<void(backend&)> pause;  // hold every ack until resume (a lagging broker)
    std::function<void(backend&)> resume;
    /// The runtime the tests run on, for `workers` workers; empty: a plain runtime. (The NATS
    /// backend needs a reactor per worker, where its ack task waits.)
    std::function<runtime_options(unsigned workers)> runtime_for;
    /// Put before every topic the tests make (a NATS stream takes "weft.test.>").
    std::string topic_prefix;
    /// The broker-outage tests (publish errors while the broker is down and recovery after it
    /// returns; a subscriber reconnecting after a restart): stop the backend's broker process
    /// and start it again on the data it had. Blocking (the tests call them through
    /// spawn_blocking); they throw or fail the test when the broker does not do it. Empty: the
    /// backend has no broker process (memory), and these tests report skipped.
    std::function<void()> stop_broker{};
    std::function<void()> start_broker{};
    /// For the outage tests: a backend whose publishes fail within a few seconds while the
    /// broker is down (its publish timeout); empty: `make`.
    std::function<std::unique_ptr<backend>()> make_for_outage{};
};

// Test names carry the instantiation's name; this keeps the factory's bytes out of them.
inline void PrintTo(const backend_factory& /*f*/, std::ostream* os) { *os << "backend_factory"; }

class bus_conformance : public ::testing::TestWithParam<backend_factory> {
protected:
    void SetUp() override { broker = GetParam().make(); }

    /// A topic name unique to this test run.
    auto topic(const std::string& base) const -> std::string {
        return GetParam().topic_prefix + base + "-" + message_id::generate().to_string();
    }
    // NOTE: string_view parameters and envelopes built into named locals before a co_await:
    // g++ 12 can destroy a temporary std::string or aggregate in a co_await expression twice.
    static auto make_env(std::string_view topic, std::string_view key, std::string_view payload)
        -> envelope {
        envelope e;
        e.topic = topic;
        e.key = key;
        e.type = "test.event";
        e.payload = payload;
        return e;
    }
    /// next(), or timed_out after `d` (for "nothing more is delivered" checks).
    static auto next_within(subscription& s, std::chrono::milliseconds d)
        -> task<result<delivery>> {
        auto r = co_await with_timeout(d, s.next());
        if (!r) {
            co_return r.error();
        }
        co_return std::move(*r);
    }
    /// next() on `s` into `out`; the first of the deliveries counted in `count` sets `first`.
    /// (For tests where two members wait and the broker picks one.)
    static auto take_next(subscription& s,
                          std::optional<delivery>& out,
                          std::atomic<int>& count,
                          event& first) -> task<void> {
        auto r = co_await s.next();
        if (!r) {
            co_return;  // closed
        }
        out = std::move(*r);
        if (count.fetch_add(1) == 0) {
            first.set();
        }
    }
    /// Lets the other tasks run a while (a task that could proceed would have).
    static auto settle() -> task<void> {
        for (int i = 0; i < 200; ++i) {
            co_await yield();
        }
    }
    auto features() const -> backend_features { return broker->features(); }
    static auto has_broker_process() -> bool {
        return GetParam().stop_broker && GetParam().start_broker;
    }
    /// Stops (false) or starts (true) the broker, on a blocking-pool thread.
    static auto set_broker_running(bool up) -> task<void> {
        auto r = co_await spawn_blocking([up] {
            if (up) {
                GetParam().start_broker();
            } else {
                GetParam().stop_broker();
            }
        });
        EXPECT_TRUE(r) << r.error().message();
    }
    static auto runtime_options_for(unsigned workers) -> runtime_options {
        const auto& f = GetParam().runtime_for;
        return f ? f(workers) : runtime_options{.workers = workers};
    }

    std::unique_ptr<backend> broker;
    runtime rt{runtime_options_for(2)};
};

}  // namespace weft::bus::test
