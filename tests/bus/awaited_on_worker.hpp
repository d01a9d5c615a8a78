#pragma once

// Shared by the Kafka and NATS backend tests: awaited publishes return on the worker that
// drained their acks (completion_run, src/bus/publisher_completion_run.hpp).

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>

#include "test_util.hpp"
#include "weft/bus/backend.hpp"
#include "weft/bus/publisher.hpp"
#include "weft/core/scope.hpp"
#include "weft/io/reactor.hpp"
#include "weft/sched/runtime.hpp"

namespace weft::bus::test {

/// 200 tasks on 2 workers each await scaled(50) publishes of one key to `topic`, counting the
/// publishes that return on another worker than they were called on. The drain task resumes a
/// pass's tasks on its own worker, so almost none move: a drain task that itself moved between
/// passes (stolen after a wake-up) takes one pass's tasks with it, at most 200 of the 10,000.
/// Woken one by one onto the deques, 25-45% moved. Each task's sequences must increase (one
/// key: one partition, or one stream). The topic gets a first, unmeasured publish (Kafka makes
/// it then).
inline void expect_awaited_publishes_stay_on_their_worker(backend& b,
                                                          const std::string& topic,
                                                          const char* label) {
    constexpr int tasks = 200;
    const int per_task = weft::test::scaled(50);
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{b, {.max_pending = 256}};
        envelope first;
        first.topic = topic;
        first.type = "test.event";
        first.payload = "p";
        (co_await pub.publish(std::move(first))).value();
        std::atomic<int> ok{0};
        std::atomic<int> moved{0};
        std::atomic<int> out_of_order{0};
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            for (int k = 0; k < tasks; ++k) {
                s.spawn([&]() -> weft::task<void> {
                    std::uint64_t last = 0;
                    for (int i = 0; i < per_task; ++i) {
                        envelope e;
                        e.topic = topic;
                        e.type = "test.event";
                        e.key = "k";
                        e.payload = "p";
                        const auto on = weft::this_runtime()->worker_index;
                        auto r = co_await pub.publish(std::move(e));
                        if (weft::this_runtime()->worker_index != on) {
                            moved.fetch_add(1, std::memory_order_relaxed);
                        }
                        if (!r) {
                            ADD_FAILURE() << r.error().message();
                            continue;
                        }
                        ok.fetch_add(1, std::memory_order_relaxed);
                        if (i > 0 && r->sequence <= last) {
                            out_of_order.fetch_add(1, std::memory_order_relaxed);
                        }
                        last = r->sequence;
                    }
                });
            }
            co_return;
        });
        const int n = tasks * per_task;
        EXPECT_EQ(ok.load(), n);
        EXPECT_EQ(out_of_order.load(), 0);
        EXPECT_LT(moved.load() * 100, n * 15);
        std::printf("%s: awaited publishes returning on another worker: %d of %d (%.1f per 1000)\n",
                    label, moved.load(), n, 1000.0 * moved.load() / n);
        (co_await pub.close()).value();
    }());
}

}  // namespace weft::bus::test
