#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "runtime_core.hpp"
#include "sync/announce_parked.hpp"
#include "weft/core/scope.hpp"
#include "weft/core/when_all.hpp"
#include "weft/sched/cpu_count.hpp"
#include "weft/sched/detail/io_home.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"
#include "weft/sched/yield.hpp"
#include "weft/sync/latch.hpp"

namespace {

using namespace std::chrono_literals;

TEST(runtime, block_on_returns_value_and_rethrows) {
    weft::runtime rt{{.workers = 2}};
    EXPECT_EQ(rt.worker_count(), 2U);
    EXPECT_EQ(rt.block_on([]() -> weft::task<int> { co_return 5; }()), 5);
    EXPECT_THROW(rt.block_on([]() -> weft::task<void> {
        throw std::runtime_error("x");
        co_return;
    }()),
                 std::runtime_error);
}

// A detached task's failure reaches the runtime's handler, on a worker, with its exception.
TEST(runtime, detached_failure_goes_to_the_handler) {
    std::mutex m;
    std::condition_variable cv;
    std::vector<std::string> seen;
    weft::runtime rt{{.workers = 2, .on_detached_failure = [&](std::exception_ptr e) {
                          try {
                              std::rethrow_exception(e);
                          } catch (const std::exception& ex) {
                              const std::lock_guard lock(m);
                              seen.emplace_back(ex.what());
                          }
                          cv.notify_all();
                      }}};
    std::atomic<bool> detached{false};
    rt.spawn([&]() -> weft::task<void> {
          while (!detached.load()) {  // fails only once its handle is gone
              co_await weft::yield();
          }
          throw std::runtime_error("lost?");
      }).detach();
    detached.store(true);
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return !seen.empty(); });
    EXPECT_EQ(seen, std::vector<std::string>{"lost?"});
}

// A handle dropped after its task failed (nobody joined it) reports the failure too; off the
// runtime's workers it goes to stderr.
TEST(runtime, failure_of_a_finished_task_whose_handle_is_dropped_is_printed) {
    weft::runtime rt{{.workers = 1}};
    auto h = rt.spawn([]() -> weft::task<void> {
        throw std::runtime_error("never joined");
        co_return;
    });
    while (!h.done()) {
        std::this_thread::yield();
    }
    testing::internal::CaptureStderr();
    h.detach();
    EXPECT_EQ(testing::internal::GetCapturedStderr(),
              "weft: a detached task failed: never joined\n");
}

TEST(runtime, default_worker_count_is_the_cpus_available) {
    weft::runtime rt;
    EXPECT_EQ(rt.worker_count(), weft::available_cpus());
}

TEST(runtime, spawn_from_outside_and_join) {
    weft::runtime rt{{.workers = 2}};
    auto h = rt.spawn([]() -> weft::task<int> { co_return 8; }());
    EXPECT_EQ(rt.block_on([](weft::join_handle<int> h) -> weft::task<int> {
        co_return co_await std::move(h);
    }(std::move(h))),
              8);
}

// Worker A blocks (busy, no await) until a task it spawned has run: only a second worker that
// was woken and stole the task can release it. Without wake-up + stealing this hangs (watchdog).
TEST(runtime, parked_worker_wakes_and_steals) {
    weft::runtime rt{{.workers = 2}};
    std::atomic<bool> released{false};
    std::set<std::thread::id> threads;
    rt.block_on([&]() -> weft::task<void> {
        auto first = std::this_thread::get_id();
        auto h = weft::spawn([&]() -> weft::task<std::thread::id> {
            released.store(true);
            co_return std::this_thread::get_id();
        });
        while (!released.load()) {
            std::this_thread::yield();
        }
        auto other = co_await std::move(h);
        threads = {first, other};
    }());
    EXPECT_EQ(threads.size(), 2U);
}

TEST(runtime, block_on_from_worker_is_refused) {
    weft::runtime rt{{.workers = 1}};
    EXPECT_THROW(rt.block_on([&]() -> weft::task<void> {
        rt.block_on([]() -> weft::task<void> { co_return; }());
        co_return;
    }()),
                 std::logic_error);
}

TEST(runtime, exceptions_cross_threads) {
    weft::runtime rt{{.workers = 2}};
    int caught = rt.block_on([]() -> weft::task<int> {
        std::vector<weft::join_handle<void>> hs;
        for (int i = 0; i < 200; ++i) {
            hs.push_back(weft::spawn([](int i) -> weft::task<void> {
                if (i % 2 == 0) {
                    throw std::runtime_error("even");
                }
                co_return;
            }(i)));
        }
        int n = 0;
        for (auto& h : hs) {
            try {
                co_await std::move(h);
            } catch (const std::runtime_error&) {
                ++n;
            }
        }
        co_return n;
    }());
    EXPECT_EQ(caught, 100);
}

TEST(runtime, shutdown_cancels_parked_timers) {
    std::atomic<int> cancelled{0};
    {
        weft::runtime rt{{.workers = 2}};
        weft::latch parked{100};
        for (int i = 0; i < 100; ++i) {
            rt.spawn([&]() -> weft::task<void> {
                  auto r = co_await weft::test::announce_parked(parked,
                                                                [] { return weft::sleep_for(1h); });
                  if (!r && r.error() == std::errc::operation_canceled) {
                      cancelled.fetch_add(1);
                  }
              }).detach();
        }
        rt.block_on([&]() -> weft::task<void> { (co_await parked.wait()).value(); }());
    }  // ~runtime: cancel, drain, join
    EXPECT_EQ(cancelled.load(), 100);
}

TEST(runtime, thread_per_core_mode_runs_everything) {
    weft::runtime rt{{.workers = 2, .stealing = false}};
    std::atomic<int> ran{0};
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            for (int i = 0; i < 1000; ++i) {
                s.spawn([&]() -> weft::task<void> {
                    ran.fetch_add(1, std::memory_order_relaxed);
                    co_return;
                });
            }
            co_return;
        });
    }());
    EXPECT_EQ(ran.load(), 1000);
}

auto fib(int n) -> weft::task<long> {
    if (n < 2) {
        co_return n;
    }
    auto a = co_await weft::fork(fib(n - 1));
    long b = co_await fib(n - 2);
    co_return co_await std::move(a) + b;
}

TEST(runtime, fork_join_fib_on_all_workers) {
    weft::runtime rt{{.workers = 2}};
    EXPECT_EQ(rt.block_on(fib(22)), 17711);
}

TEST(runtime, when_all_runs_on_workers) {
    weft::runtime rt{{.workers = 2}};
    auto [a, b] = rt.block_on(weft::when_all(fib(15), fib(16)));
    EXPECT_EQ(a, 610);
    EXPECT_EQ(b, 987);
}

}  // namespace

namespace {

// Thread-per-core placement: after switch_to_worker(i), the task and (with stealing off) what it
// spawns run on worker i's thread; the two workers are different threads.
TEST(runtime, switch_to_worker_pins_work_in_thread_per_core_mode) {
    weft::runtime rt{{.workers = 2, .stealing = false}};
    auto [t0, t1, child_on_1] =
        rt.block_on([]() -> weft::task<std::tuple<std::thread::id, std::thread::id, bool>> {
            co_await weft::switch_to_worker(0);
            const auto t0 = std::this_thread::get_id();
            co_await weft::switch_to_worker(1);
            const auto t1 = std::this_thread::get_id();
            bool all_on_1 = true;
            for (int i = 0; i < 50; ++i) {
                auto h = weft::spawn([]() -> weft::task<std::thread::id> {
                    co_return std::this_thread::get_id();
                }());
                all_on_1 = all_on_1 && (co_await std::move(h)) == t1;
            }
            co_return std::tuple{t0, t1, all_on_1};
        }());
    EXPECT_NE(t0, t1);
    EXPECT_TRUE(child_on_1);
    EXPECT_THROW(rt.block_on([]() -> weft::task<void> { co_await weft::switch_to_worker(7); }()),
                 std::out_of_range);
}

}  // namespace

namespace {

// A driver that cannot set up (say, no file descriptors left for a ring) fails the runtime's
// constructor with that error instead of crashing a worker thread later.
TEST(runtime, driver_setup_failure_is_thrown_by_the_constructor) {
    struct failing_driver final : weft::park_driver {
        void attach() override { throw std::system_error(EMFILE, std::system_category(), "ring"); }
        void park(std::optional<std::int64_t>) override {}
        void unpark() noexcept override {}
    };
    weft::runtime_options o;
    o.workers = 2;
    o.make_driver = [](unsigned i) -> std::unique_ptr<weft::park_driver> {
        if (i == 1) {
            return std::make_unique<failing_driver>();
        }
        return weft::make_futex_driver();
    };
    EXPECT_THROW(weft::runtime rt{o}, std::system_error);
}

// ---- IO home (runtime_options::consolidate_io; the receives' side is in tests/io) ---------

TEST(runtime, io_home_rules_gather_on_the_busiest_and_spread_only_after_saturated_windows) {
    using core = weft::detail::runtime_core;
    using w = core::window_load;
    // No home: the busiest, when together they fit one CPU and each ran out of work.
    EXPECT_EQ(core::next_io_home(-1, {w{300, 5, 0}, w{400, 3, 0}}), 1);
    EXPECT_EQ(core::next_io_home(-1, {w{500, 5, 0}, w{500, 3, 0}}), 0);
    EXPECT_EQ(core::next_io_home(-1, {w{600, 5, 0}, w{500, 3, 0}}), -1);  // 1.1 CPUs
    EXPECT_EQ(core::next_io_home(-1, {w{300, 0, 0}, w{100, 3, 0}}), -1);  // one never slept
    EXPECT_EQ(core::next_io_home(-1, {w{0, 0, 0}, w{0, 0, 0}}), -1);      // nothing published
    // A home stays while it sleeps, whatever the others do; it goes after spread_windows
    // saturated windows in a row.
    EXPECT_EQ(core::next_io_home(0, {w{700, 3, 0}, w{700, 0, 9}}), 0);
    EXPECT_EQ(core::next_io_home(1, {w{100, 9, 0}, w{990, 0, core::spread_windows - 1}}), 1);
    EXPECT_EQ(core::next_io_home(1, {w{100, 9, 0}, w{990, 0, core::spread_windows}}), -1);
    const w x{.busy_permille = 1000, .sleeps = 123456, .saturated = 7};
    const w y = core::unpack(core::pack(x));
    EXPECT_EQ(y.busy_permille, x.busy_permille);
    EXPECT_EQ(y.sleeps, x.sleeps);
    EXPECT_EQ(y.saturated, x.saturated);
}

// A window's sleeps are the times the worker blocked, not its parks (a park that returns at once
// with completions waiting is none). The home spreads once spread_windows windows in a row were
// busy and together held at most spread_sleeps sleeps; counted window by window as the workers
// close them and review.
TEST(runtime, io_home_spreads_when_busy_and_hardly_sleeping_not_when_sleeping_every_window) {
    using core = weft::detail::runtime_core;
    using w = core::window_load;
    // Closes up to `n` windows of the home (worker 0), each `busy`, with a sleep in every
    // `sleeps_every`-th (0: none) and `burst` sleeps at a time, the other worker asleep (no
    // work, one sleep), reviewing after each; returns the windows it took to spread (0: never).
    const auto windows_to_spread = [](unsigned n, unsigned busy, unsigned sleeps_every,
                                      unsigned burst) {
        core::load_streak streak;
        for (unsigned i = 1; i <= n; ++i) {
            const unsigned sleeps = sleeps_every != 0 && i % sleeps_every == 0 ? burst : 0;
            const w home = streak.close(busy, sleeps);
            if (core::next_io_home(0, {home, w{0, 1, 0}}) == -1) {
                return i;
            }
        }
        return 0U;
    };
    // Busy throughout and never blocked: spreads at the spread_windows-th window.
    EXPECT_EQ(windows_to_spread(1000, 1000, 0, 0), core::spread_windows);
    EXPECT_EQ(windows_to_spread(1000, core::spread_busy_permille, 0, 0), core::spread_windows);
    // Under spread_busy_permille: never.
    EXPECT_EQ(windows_to_spread(1000, core::spread_busy_permille - 1, 0, 0), 0U);
    // 1,000 keep-alive connections: a block in one window of 5, or one in each, busy
    // throughout. Spreads as soon as the first spread_windows windows are in.
    EXPECT_EQ(windows_to_spread(1000, 1000, 5, 1), core::spread_windows);
    EXPECT_EQ(windows_to_spread(1000, 1000, 1, core::spread_sleeps / core::spread_windows),
              core::spread_windows);
    // 100 connections: 4 blocks a window, busy throughout: stays over 1,000 windows. So does a
    // home that sleeps a little more than spread_sleeps times in any spread_windows windows,
    // spread evenly or in one burst.
    EXPECT_EQ(windows_to_spread(1000, 1000, 1, 4), 0U);
    EXPECT_EQ(windows_to_spread(1000, 1000, 1, core::spread_sleeps / core::spread_windows + 1), 0U);
    EXPECT_EQ(windows_to_spread(1000, 1000, core::spread_windows, core::spread_sleeps + 1), 0U);
    // A burst of sleeps holds the home for spread_windows windows after it, then it spreads.
    core::load_streak streak;
    EXPECT_EQ(streak.close(1000, 1000).saturated, 0U);
    for (unsigned i = 1; i < core::spread_windows; ++i) {
        EXPECT_EQ(streak.close(1000, 0).saturated, 0U);
    }
    unsigned saturated = 0;
    for (unsigned i = 0; i < core::spread_windows; ++i) {
        saturated = streak.close(1000, 0).saturated;
    }
    EXPECT_EQ(saturated, core::spread_windows);
    EXPECT_EQ(core::next_io_home(0, {w{1000, 0, saturated}, w{0, 1, 0}}), -1);
}

// Two workers that wake for a little work and sleep again (light load) choose a home; without
// the option nobody reads one.
TEST(runtime, light_load_chooses_an_io_home_when_enabled) {
    for (const bool enabled : {true, false}) {
        // (A driver of its own: consolidate_io applies to runtimes with a reactor.)
        weft::runtime rt{{.workers = 2,
                          .make_driver = [](unsigned) { return weft::make_futex_driver(); },
                          .consolidate_io = enabled}};
        // Enabled: until a review has chosen (the watchdog bounds it); each timer wakes the
        // worker, so its load windows end and are reviewed. Disabled: 100 rounds of it.
        const int rounds = enabled ? std::numeric_limits<int>::max() : 100;
        const auto got = rt.block_on([](int rounds) -> weft::task<std::pair<std::uint64_t, bool>> {
            co_await weft::with_scope([rounds](weft::scope& s) -> weft::task<void> {
                for (unsigned i = 0; i < 2; ++i) {
                    s.spawn([](unsigned w, int rounds) -> weft::task<void> {
                        co_await weft::switch_to_worker(w);
                        for (int n = 0; weft::detail::io_home_changes() == 0 && n < rounds; ++n) {
                            (void)co_await weft::sleep_for(std::chrono::milliseconds(1));
                        }
                    }(i, rounds));
                }
                co_return;
            });
            co_return std::pair{weft::detail::io_home_changes(),
                                weft::detail::current_io_home().enabled};
        }(rounds));
        if (enabled) {
            EXPECT_GE(got.first, 1U);
            EXPECT_TRUE(got.second);
        } else {
            EXPECT_EQ(got.first, 0U);
            EXPECT_FALSE(got.second);
        }
    }
}

}  // namespace
