#pragma once

// Shared by every weft test binary: a watchdog that turns a deadlock into a failure in seconds
// instead of a hung CI job, and small awaitables for driving cancellation in tests.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <coroutine>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "weft/core/detail/shuffle.hpp"
#include "weft/core/detail/worker_base.hpp"
#include "weft/core/scope.hpp"
#include "weft/core/stop.hpp"
#include "weft/core/task.hpp"
#include "weft/sched/detail/io_home.hpp"

namespace weft::test {

/// WEFT_STRESS_SCALE (the sanitizer runs set it; 1 when unset): how much smaller a stress
/// test runs. The sanitizer runs divide sizes by it; the g++ run keeps every size whole.
inline auto stress_scale() -> int {
    static const int div = [] {
        const char* s = std::getenv("WEFT_STRESS_SCALE");
        return s != nullptr ? std::max(1, std::atoi(s)) : 1;
    }();
    return div;
}

/// A stress test's size divided by stress_scale(), at least 1.
inline auto scaled(int n) -> int { return std::max(1, n / stress_scale()); }

/// The size of this process's descriptor table (FDSize in /proc/self/status; 0 if unreadable).
/// It only grows: a test that wants to see it grown asks for more than it is now.
inline auto descriptor_table_size() -> std::size_t {
    std::FILE* f = std::fopen("/proc/self/status", "r");
    if (f == nullptr) {
        return 0;
    }
    char line[256];
    std::size_t n = 0;
    while (std::fgets(line, sizeof(line), f) != nullptr) {
        if (std::sscanf(line, "FDSize: %zu", &n) == 1) {
            break;
        }
    }
    std::fclose(f);
    return n;
}

/// Makes worker `worker` of `rt` the IO home (-1: none, and the automatic choice off), from a
/// task on `rt` (the hook must run on one of its workers). Runtime is weft::runtime; a template
/// so that binaries without weft::sched need not include it.
template <typename Runtime>
void force_io_home(Runtime& rt, int worker) {
    rt.block_on([](int w) -> weft::task<void> {
        weft::detail::force_io_home_for_test(w);
        co_return;
    }(worker));
}

/// Two tasks that spin until both have started: they end only if two workers run them at
/// once. A runtime that leaves one of them queued behind the other (no worker woken for it)
/// hangs here, and the watchdog names the test.
inline auto meeting_pair() -> weft::task<void> {
    std::atomic<int> met{0};
    co_await weft::with_scope([&](weft::scope& pair) -> weft::task<void> {
        for (int i = 0; i < 2; ++i) {
            pair.spawn([&]() -> weft::task<void> {
                met.fetch_add(1);
                while (met.load() < 2) {
                }
                co_return;
            });
        }
        co_return;
    });
}

/// Aborts the process when one test runs longer than WEFT_TEST_WATCHDOG_S (default 120 s;
/// sanitizer builds are slow), naming the test. Installed for every test by a listener.
class watchdog_listener : public ::testing::EmptyTestEventListener {
public:
    watchdog_listener() {
        if (const char* s = std::getenv("WEFT_TEST_WATCHDOG_S")) {
            limit_ = std::chrono::seconds(std::atoi(s));
        }
        thread_ = std::thread([this] { watch(); });
    }
    ~watchdog_listener() override {
        {
            std::lock_guard lock(mu_);
            quit_ = true;
        }
        cv_.notify_all();
        thread_.join();
    }
    void OnTestStart(const ::testing::TestInfo& info) override {
        std::lock_guard lock(mu_);
        name_ = std::string(info.test_suite_name()) + "." + info.name();
        ++generation_;
        running_ = true;
        cv_.notify_all();
    }
    void OnTestEnd(const ::testing::TestInfo& info) override {
#if WEFT_SHUFFLE_BUILD
        if (weft::detail::shuffle_on() && info.result() != nullptr && info.result()->Failed()) {
            std::fprintf(stderr,
                         "weft: %s.%s failed under schedule shuffling; replay with "
                         "WEFT_SHUFFLE_SEED=%llu\n",
                         info.test_suite_name(), info.name(),
                         static_cast<unsigned long long>(weft::detail::shuffle_seed()));
        }
#else
        (void)info;
#endif
        std::lock_guard lock(mu_);
        running_ = false;
        cv_.notify_all();
    }

private:
    void watch() {
        std::unique_lock lock(mu_);
        while (!quit_) {
            if (!running_) {
                cv_.wait(lock);
                continue;
            }
            const auto gen = generation_;
            if (!cv_.wait_for(lock, limit_,
                              [&] { return quit_ || !running_ || generation_ != gen; })) {
                std::fprintf(stderr,
                             "\nwatchdog: %s still running after %lds: deadlock? aborting\n",
                             name_.c_str(), static_cast<long>(limit_.count()));
                std::fflush(stderr);
                std::abort();
            }
        }
    }

    std::chrono::seconds limit_{120};
    std::mutex mu_;
    std::condition_variable cv_;
    std::string name_;
    unsigned long generation_ = 0;
    bool running_ = false;
    bool quit_ = false;
    std::thread thread_;
};

/// Suspends until the awaiting task's stop is requested, then resumes it through its executor
/// (schedule_remote, so it works on any thread). Returns true when it was stopped. A minimal
/// stand-in for "some runtime-owned suspension point", for core tests that have no timers.
class wait_for_stop : private detail::stop_callback_node {
public:
    wait_for_stop() noexcept : stop_callback_node(&wait_for_stop::fire) {}
    auto await_ready() noexcept -> bool { return false; }
    template <typename P>
    auto await_suspend(std::coroutine_handle<P> h) -> bool {
        stop_ = h.promise().stop_;
        worker_ = detail::current_worker();
        h_ = h;
        if (stop_ == nullptr) {
            return false;
        }
        return stop_->try_add(this);  // false: already stopped, resume at once
    }
    auto await_resume() noexcept -> bool {
        if (stop_ != nullptr) {
            stop_->remove(this);
        }
        return stop_ != nullptr;
    }

private:
    static void fire(detail::stop_callback_node* n) noexcept {
        auto* self = static_cast<wait_for_stop*>(n);
        self->worker_->schedule_remote(self->h_);
    }
    stop_state* stop_ = nullptr;
    detail::worker_base* worker_ = nullptr;
    std::coroutine_handle<> h_;
};

}  // namespace weft::test
