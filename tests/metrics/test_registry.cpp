#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "weft/core/join_handle.hpp"
#include "weft/metrics/registry.hpp"
#include "weft/metrics/runtime_collector.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/yield.hpp"

namespace {

using weft::metrics::family_snapshot;
using weft::metrics::metric_type;
using weft::metrics::registry;

auto find(const std::vector<family_snapshot>& fs, std::string_view name) -> family_snapshot {
    auto it = std::find_if(fs.begin(), fs.end(), [&](const auto& f) { return f.name == name; });
    if (it == fs.end()) {
        throw std::runtime_error("no family " + std::string(name));
    }
    return *it;
}

// Many tasks on four workers, each yielding between increments so that it moves between
// workers (and so between shards): every increment is in the sum, none twice.
TEST(registry, increments_from_tasks_on_many_workers_sum_exactly) {
    registry reg;
    auto c = reg.add_counter("test_events", "Events.");
    auto g = reg.add_gauge("test_level", "Level.");
    auto h = reg.add_histogram("test_sizes", "Sizes.", {1, 10});
    constexpr int tasks = 64;
    constexpr int per_task = 2000;
    {
        weft::runtime rt{{.workers = 4}};
        std::vector<weft::join_handle<void>> hs;
        for (int t = 0; t < tasks; ++t) {
            hs.push_back(rt.spawn([&c, &g, &h, t]() -> weft::task<void> {
                for (int i = 0; i < per_task; ++i) {
                    c.inc();
                    g.add(1);
                    h.observe(static_cast<double>((t + i) % 20));
                    if (i % 64 == 0) {
                        co_await weft::yield();
                    }
                }
                g.add(-0.5 * per_task);
            }));
        }
        rt.block_on([&]() -> weft::task<void> {
            for (auto& j : hs) {
                co_await std::move(j);
            }
        }());
        // Read while the workers (and their shards) are alive...
        const auto live = reg.collect();
        EXPECT_EQ(find(live, "test_events").series.at(0).value, double{tasks} * per_task);
    }
    // ...and after they exited (their shards retired into the registry).
    const auto fs = reg.collect();
    EXPECT_EQ(find(fs, "test_events").series.at(0).value, double{tasks} * per_task);
    EXPECT_EQ(find(fs, "test_level").series.at(0).value, 0.5 * tasks * per_task);
    const auto hs = find(fs, "test_sizes").series.at(0);
    ASSERT_EQ(hs.buckets.size(), 3U);
    EXPECT_EQ(hs.buckets.back(), std::uint64_t{tasks} * per_task);
    // (t + i) % 20 takes each of 0..19 equally often over a task's 2000 steps: 2 of 20 are
    // <= 1, 11 of 20 are <= 10.
    EXPECT_EQ(hs.buckets[0], std::uint64_t{tasks} * per_task * 2 / 20);
    EXPECT_EQ(hs.buckets[1], std::uint64_t{tasks} * per_task * 11 / 20);
    EXPECT_EQ(hs.sum, 9.5 * tasks * per_task);
}

// Plain threads that record and exit while others still record: the exits fold their cells
// into the registry under the collector's lock, so repeated collections never go down and the
// last is exact.
TEST(registry, threads_exiting_while_collected_lose_nothing) {
    registry reg;
    auto c = reg.add_counter("test_hits", "Hits.");
    std::atomic<bool> stop{false};
    std::vector<double> seen;
    std::thread reader([&] {
        while (!stop.load()) {
            seen.push_back(find(reg.collect(), "test_hits").series.at(0).value);
        }
    });
    constexpr int rounds = 20;
    constexpr int threads = 4;
    constexpr int per_thread = 5000;
    for (int r = 0; r < rounds; ++r) {
        std::vector<std::thread> ts;
        for (int t = 0; t < threads; ++t) {
            ts.emplace_back([&] {
                for (int i = 0; i < per_thread; ++i) {
                    c.inc();
                }
            });
        }
        for (auto& t : ts) {
            t.join();
        }
    }
    stop = true;
    reader.join();
    EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
    EXPECT_EQ(find(reg.collect(), "test_hits").series.at(0).value,
              double{rounds} * threads * per_thread);
}

TEST(histogram, bounds_are_inclusive_and_count_matches_inf_bucket) {
    registry reg;
    auto h = reg.add_histogram("test_latency", "Latency.", {0.1, 1, 5});
    for (double v :
         {0.1, 0.1000001, 1.0, 5.0, 5.0000001, -3.0, std::numeric_limits<double>::quiet_NaN()}) {
        h.observe(v);
    }
    const auto s = find(reg.collect(), "test_latency").series.at(0);
    // le=0.1: 0.1 and -3; le=1: + 0.1000001, 1; le=5: + 5; +Inf: + 5.0000001, NaN.
    EXPECT_EQ(s.buckets, (std::vector<std::uint64_t>{2, 4, 5, 7}));
    EXPECT_TRUE(std::isnan(s.sum));  // a NaN observed makes the sum NaN, as in every client
}

TEST(histogram, sum_adds_observations_and_trailing_inf_bound_is_implied) {
    registry reg;
    auto h = reg.add_histogram("test_bytes", "Bytes.",
                               {10, 100, std::numeric_limits<double>::infinity()});
    h.observe(5);
    h.observe(50);
    h.observe(500);
    const auto& f = find(reg.collect(), "test_bytes");
    EXPECT_EQ(f.bounds, (std::vector<double>{10, 100}));
    EXPECT_EQ(f.series.at(0).buckets, (std::vector<std::uint64_t>{1, 2, 3}));
    EXPECT_EQ(f.series.at(0).sum, 555);
}

TEST(registry, rejects_bad_names_labels_and_bounds) {
    registry reg;
    EXPECT_THROW((void)reg.add_counter("", "x"), std::invalid_argument);
    EXPECT_THROW((void)reg.add_counter("1abc", "x"), std::invalid_argument);
    EXPECT_THROW((void)reg.add_counter("a-b", "x"), std::invalid_argument);
    EXPECT_THROW((void)reg.add_counter("requests_total", "x"), std::invalid_argument);
    EXPECT_THROW((void)reg.add_counter_family("c1", "x", {"__reserved"}), std::invalid_argument);
    EXPECT_THROW((void)reg.add_counter_family("c2", "x", {"a:b"}), std::invalid_argument);
    EXPECT_THROW((void)reg.add_counter_family("c3", "x", {"a", "a"}), std::invalid_argument);
    EXPECT_THROW((void)reg.add_histogram_family("h1", "x", {"le"}, {1}), std::invalid_argument);
    EXPECT_THROW((void)reg.add_histogram("h2", "x", {2, 1}), std::invalid_argument);
    EXPECT_THROW((void)reg.add_histogram("h3", "x", {1, 1}), std::invalid_argument);
    EXPECT_THROW((void)reg.add_histogram("h4", "x", {std::numeric_limits<double>::quiet_NaN()}),
                 std::invalid_argument);
    EXPECT_THROW((void)reg.add_histogram("h5", "x", std::vector<double>(501, 0.0)),
                 std::invalid_argument);
    // Legal ones: colons in names, a leading underscore in a label.
    EXPECT_NO_THROW((void)reg.add_counter("ns:sub_name", "x"));
    EXPECT_NO_THROW((void)reg.add_gauge_family("g", "x", {"_private"}));
    // None of the rejected ones was registered.
    EXPECT_EQ(reg.collect().size(), 2U);
}

TEST(registry, clashing_sample_names_and_redefinitions_throw) {
    registry reg;
    (void)reg.add_histogram("rpc", "x", {1});
    EXPECT_THROW((void)reg.add_gauge("rpc_count", "x"), std::invalid_argument);
    EXPECT_THROW((void)reg.add_gauge("rpc_bucket", "x"), std::invalid_argument);
    (void)reg.add_counter("jobs", "x");
    EXPECT_THROW((void)reg.add_gauge("jobs_total", "x"), std::invalid_argument);
    EXPECT_THROW((void)reg.add_gauge("jobs", "x"), std::invalid_argument);          // another type
    EXPECT_THROW((void)reg.add_histogram("rpc", "x", {2}), std::invalid_argument);  // buckets
    // The same definition again is the same family: both handles count into one series.
    auto a = reg.add_counter("jobs", "x");
    auto b = reg.add_counter("jobs", "x");
    a.inc();
    b.inc(2);
    EXPECT_EQ(find(reg.collect(), "jobs").series.at(0).value, 3);
}

TEST(family, series_by_label_values_and_wrong_arity_throws) {
    registry reg;
    auto f = reg.add_counter_family("test_requests", "x", {"method", "status"});
    f.with({"GET", "2xx"}).inc();
    f.with({"GET", "2xx"}).inc();
    f.with({"POST", "5xx"}).inc(5);
    EXPECT_THROW((void)f.with({"GET"}), std::invalid_argument);
    EXPECT_THROW((void)f.with({"GET", "2xx", "x"}), std::invalid_argument);
    const auto& fs = find(reg.collect(), "test_requests");
    ASSERT_EQ(fs.series.size(), 2U);
    EXPECT_EQ(fs.series[0].label_values, (std::vector<std::string>{"GET", "2xx"}));
    EXPECT_EQ(fs.series[0].value, 2);
    EXPECT_EQ(fs.series[1].value, 5);
}

// Enough series that they span several chunks: each keeps its own count.
TEST(family, many_series_across_chunks_stay_apart) {
    registry reg;
    auto f = reg.add_histogram_family("test_h", "x", {"k"}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
    constexpr int n = 300;  // 12 cells each: 3600 cells, 8 chunks
    for (int i = 0; i < n; ++i) {
        auto s = f.with({std::to_string(i)});
        for (int j = 0; j <= i % 7; ++j) {
            s.observe(i % 11);
        }
    }
    const auto& fs = find(reg.collect(), "test_h");
    ASSERT_EQ(fs.series.size(), std::size_t{n});
    for (const auto& s : fs.series) {
        const int i = std::stoi(s.label_values[0]);
        EXPECT_EQ(s.buckets.back(), static_cast<std::uint64_t>(i % 7 + 1)) << i;
        EXPECT_EQ(s.sum, double((i % 7 + 1) * (i % 11))) << i;
    }
}

TEST(registry, collectors_merge_by_name_and_stop_when_their_handle_goes) {
    registry reg;
    int calls = 0;
    auto make = [&](double v) {
        return reg.add_collector([&calls, v](std::vector<family_snapshot>& out) {
            ++calls;
            out.push_back({.name = "test_open",
                           .help = "Open.",
                           .type = metric_type::gauge,
                           .series = {{.value = v}}});
        });
    };
    auto a = make(2);
    auto b = make(3);
    EXPECT_EQ(find(reg.collect(), "test_open").series.at(0).value, 5);
    EXPECT_EQ(calls, 2);
    b.reset();
    EXPECT_EQ(find(reg.collect(), "test_open").series.at(0).value, 2);
    EXPECT_EQ(calls, 3);
    { auto moved = std::move(a); }
    EXPECT_TRUE(reg.collect().empty());
    EXPECT_EQ(calls, 3);
}

TEST(registry, collector_with_a_bad_name_or_clash_fails_the_collection) {
    registry reg;
    (void)reg.add_counter("test_x", "x");
    auto bad = reg.add_collector([](std::vector<family_snapshot>& out) {
        out.push_back({.name = "bad-name", .type = metric_type::gauge, .series = {{}}});
    });
    EXPECT_THROW((void)reg.collect(), std::invalid_argument);
    bad.reset();
    auto clash = reg.add_collector([](std::vector<family_snapshot>& out) {
        out.push_back({.name = "test_x_total", .type = metric_type::gauge, .series = {{}}});
    });
    EXPECT_THROW((void)reg.collect(), std::invalid_argument);
}

TEST(runtime_collector, reads_the_runtime_per_worker) {
    registry reg;
    weft::runtime rt{{.workers = 2}};
    auto keep = weft::metrics::collect_runtime(reg, rt);
    rt.block_on([]() -> weft::task<void> { co_return; }());
    const auto fs = reg.collect();
    EXPECT_EQ(find(fs, "weft_runtime_workers").series.at(0).value, 2);
    const auto& parks = find(fs, "weft_runtime_park_attempts");
    EXPECT_EQ(parks.type, metric_type::counter);
    ASSERT_EQ(parks.series.size(), 2U);
    EXPECT_EQ(parks.series[1].label_values, (std::vector<std::string>{"1"}));
    EXPECT_EQ(find(fs, "weft_runtime_queue_depth").series.size(), 2U);
    keep.reset();
    EXPECT_TRUE(reg.collect().empty());
}

}  // namespace
