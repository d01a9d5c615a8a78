#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "weft/metrics/registry.hpp"
#include "weft/metrics/runtime_collector.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"

#if defined(__SANITIZE_THREAD__)
#define WEFT_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WEFT_TEST_TSAN 1
#endif
#endif
#ifndef WEFT_TEST_TSAN
#define WEFT_TEST_TSAN 0
#endif

namespace {

using namespace std::chrono_literals;

struct reports {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<weft::stall_report> got;

    void add(const weft::stall_report& r) {
        std::lock_guard lock(mu);
        got.push_back(r);
        cv.notify_all();
    }
    auto wait_for_count(std::size_t n) -> std::vector<weft::stall_report> {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return got.size() >= n; });  // the watchdog bounds it
        return got;
    }
    auto count() -> std::size_t {
        std::lock_guard lock(mu);
        return got.size();
    }
};

auto stuck(std::atomic<int>& phase) -> weft::task<void> {
    // First stall: a busy loop on the worker.
    while (phase.load(std::memory_order_acquire) == 0) {
    }
    // Back to the scheduler loop between the two stalls.
    (void)co_await weft::sleep_for(1ms);
    // Second stall: a blocking sleep on the worker.
    while (phase.load(std::memory_order_acquire) == 1) {
        std::this_thread::sleep_for(1ms);
    }
}

auto stalls_of(const weft::runtime& rt) -> std::uint64_t {
    std::uint64_t n = 0;
    for (unsigned i = 0; i < rt.worker_count(); ++i) {
        n += rt.worker_metrics(i).stalls;
    }
    return n;
}

// A task that keeps its worker is reported once per stall, with its spawn site and the
// worker's native stack, and counted; the dump shows it running on an unresponsive worker.
TEST(stall_detector, reports_each_stall_once_with_site_and_stack) {
    reports rep;
    weft::runtime rt{{.workers = 2,
                      .stall_threshold = 20ms,
                      .on_stall = [&](const weft::stall_report& r) { rep.add(r); },
                      .task_records = true}};
    weft::metrics::registry reg;
    auto keep = weft::metrics::collect_runtime(reg, rt);
    std::atomic<int> phase{0};
    auto h = rt.spawn(weft::task_name{"stuck"}, stuck(phase));
    const unsigned line = __LINE__ - 1;

    auto first = rep.wait_for_count(1);
    ASSERT_EQ(first.size(), 1U);
    const weft::stall_report& r = first[0];
    EXPECT_EQ(r.threshold, 20ms);
    ASSERT_TRUE(r.task_id.has_value());
    EXPECT_EQ(r.task_name, "stuck");
    EXPECT_EQ(r.task_site.line(), line);
    EXPECT_NE(std::string_view(r.task_site.file_name()).find("test_stall_detector.cpp"),
              std::string_view::npos);
#if !WEFT_TEST_TSAN
    // (ThreadSanitizer delivers a signal only when the thread enters an intercepted call, which
    // a busy loop never does; the blocking stall below checks the stack in every build.)
    EXPECT_FALSE(r.stack.empty());
#endif
    const std::string text = r.to_string();
    EXPECT_NE(text.find("test_stall_detector.cpp:" + std::to_string(line)), std::string::npos)
        << text;

    // The dump names the task and the worker that does not stop.
    const auto d = rt.dump();
    ASSERT_EQ(d.unresponsive_workers.size(), 1U);
    EXPECT_EQ(d.unresponsive_workers[0], r.worker);
    bool listed = false;
    for (const auto& t : d.tasks) {
        if (t.name == "stuck") {
            listed = true;
            EXPECT_EQ(t.state, weft::task_state::running);
            EXPECT_EQ(t.worker, r.worker);
        }
    }
    EXPECT_TRUE(listed);

    // Still the same stall for many more of the monitor's looks: still one report.
    for (int i = 0; i < 10; ++i) {
        std::this_thread::sleep_for(20ms);
    }
    EXPECT_EQ(rep.count(), 1U);
    EXPECT_EQ(stalls_of(rt), 1U);

    phase.store(1, std::memory_order_release);  // on to the second stall
    auto both = rep.wait_for_count(2);
    EXPECT_EQ(both.size(), 2U);
    EXPECT_EQ(both[1].task_site.line(), line);
    EXPECT_FALSE(both[1].stack.empty());
    phase.store(2, std::memory_order_release);
    rt.block_on(
        [](weft::join_handle<void> j) -> weft::task<void> { co_await std::move(j); }(std::move(h)));
    EXPECT_EQ(rep.count(), 2U);
    EXPECT_EQ(stalls_of(rt), 2U);
    const std::string exposed = reg.render(weft::metrics::exposition_format::prometheus_text);
    EXPECT_NE(
        exposed.find("weft_worker_stalls_total{worker=\"" + std::to_string(r.worker) + "\"} 2"),
        std::string::npos)
        << exposed;
}

// A runtime whose tasks all come back to the loop reports nothing. (A threshold well above
// what a preempted thread on a loaded machine loses.)
TEST(stall_detector, quiet_when_tasks_yield) {
    reports rep;
    {
        weft::runtime rt{{.workers = 2,
                          .stall_threshold = 500ms,
                          .on_stall = [&](const weft::stall_report& r) { rep.add(r); }}};
        rt.block_on([]() -> weft::task<void> {
            for (int i = 0; i < 20; ++i) {
                (void)co_await weft::sleep_for(5ms);
            }
        }());
    }
    EXPECT_EQ(rep.count(), 0U);
}

// With runtime_options::task_records off (the default) a stall is still reported once and
// counted, with the worker's stack (a blocking call: TSan delivers the signal there) and no task.
TEST(stall_detector, reports_without_task_when_records_off) {
    reports rep;
    weft::runtime rt{{.workers = 1,
                      .stall_threshold = 20ms,
                      .on_stall = [&](const weft::stall_report& r) { rep.add(r); }}};
    std::atomic<int> phase{1};
    auto h = rt.spawn(stuck(phase));
    auto first = rep.wait_for_count(1);
    ASSERT_EQ(first.size(), 1U);
    EXPECT_FALSE(first[0].task_id.has_value());
    EXPECT_FALSE(first[0].stack.empty());
    phase.store(2, std::memory_order_release);
    rt.block_on(
        [](weft::join_handle<void> j) -> weft::task<void> { co_await std::move(j); }(std::move(h)));
    EXPECT_EQ(rep.count(), 1U);
    EXPECT_EQ(stalls_of(rt), 1U);
}

// runtime_options::dump_signal: the signal makes the monitor print the dump on stderr.
TEST(stall_detector, dump_signal_prints_the_dump) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const int saved = ::dup(2);
    ASSERT_GE(saved, 0);
    ASSERT_EQ(::dup2(fds[1], 2), 2);
    std::string seen;
    {
        weft::runtime rt{{.workers = 1,
                          .stall_threshold = std::nullopt,
                          .dump_signal = SIGUSR1,
                          .task_records = true}};
        std::atomic<bool> release{false};
        auto h = rt.spawn(weft::task_name{"signalled"}, [&]() -> weft::task<void> {
            while (!release.load(std::memory_order_acquire)) {
                (void)co_await weft::sleep_for(1ms);
            }
        });
        ASSERT_EQ(std::raise(SIGUSR1), 0);
        char buf[4096];
        while (seen.find("'signalled'") == std::string::npos) {
            const ssize_t n = ::read(fds[0], buf, sizeof(buf));
            ASSERT_GT(n, 0);
            seen.append(buf, static_cast<std::size_t>(n));
        }
        release.store(true, std::memory_order_release);
        rt.block_on([](weft::join_handle<void> j) -> weft::task<void> {
            co_await std::move(j);
        }(std::move(h)));
    }
    ::dup2(saved, 2);
    ::close(saved);
    ::close(fds[0]);
    ::close(fds[1]);
    EXPECT_NE(seen.find("live task(s)"), std::string::npos) << seen;
    EXPECT_NE(seen.find("test_stall_detector.cpp"), std::string::npos) << seen;
}

}  // namespace
