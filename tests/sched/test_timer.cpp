#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <utility>

#include "sync/announce_parked.hpp"
#include "weft/core/scope.hpp"
#include "weft/core/sync_wait.hpp"
#include "weft/core/when_any.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"
#include "weft/sched/yield.hpp"
#include "weft/sync/latch.hpp"

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

// Ordering, not speed: a sleeper never resumes before its deadline (however late it may be).
TEST(sleep_until, never_resumes_before_its_deadline) {
    weft::runtime rt{{.workers = 2}};
    const int early = rt.block_on([]() -> weft::task<int> {
        int n = 0;
        for (int i = 0; i < 20; ++i) {
            const auto deadline = clock_type::now() + 3ms;
            (co_await weft::sleep_until(deadline)).value();
            n += clock_type::now() < deadline ? 1 : 0;
        }
        co_return n;
    }());
    EXPECT_EQ(early, 0);
}

TEST(sleep_until, past_deadline_completes_at_once) {
    weft::runtime rt{{.workers = 1}};
    auto ok = rt.block_on([]() -> weft::task<bool> {
        auto r = co_await weft::sleep_until(clock_type::now() - 1s);
        co_return r.has_value();
    }());
    EXPECT_TRUE(ok);
}

TEST(sleep_for, cancelled_sleep_returns_operation_canceled) {
    weft::runtime rt{{.workers = 2}};
    auto err = rt.block_on([]() -> weft::task<std::error_code> {
        std::error_code ec;
        weft::latch parked{1};
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {
                auto r = co_await weft::test::announce_parked(parked,
                                                              [] { return weft::sleep_for(1h); });
                ec = r.error();
            });
            (co_await parked.wait()).value();  // the sleeper is armed: cancel it there
            s.request_stop();
        });
        co_return ec;
    }());
    EXPECT_EQ(err, std::errc::operation_canceled);
}

TEST(sleep_for, already_cancelled_task_does_not_sleep) {
    weft::runtime rt{{.workers = 1}};
    auto err = rt.block_on([]() -> weft::task<std::error_code> {
        std::error_code ec;
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.request_stop();
            auto r = co_await weft::sleep_for(1h);
            ec = r.error();
        });
        co_return ec;
    }());
    EXPECT_EQ(err, std::errc::operation_canceled);
}

TEST(sleep_for, off_runtime_is_an_error) {
    EXPECT_THROW(weft::sync_wait([]() -> weft::task<void> {
                     auto r = co_await weft::sleep_for(1ms);
                     (void)r;
                 }()),
                 std::logic_error);
}

TEST(with_timeout, expired_operation_yields_timed_out) {
    weft::runtime rt{{.workers = 2}};
    auto r = rt.block_on(weft::with_timeout(5ms, []() -> weft::task<int> {
        auto s = co_await weft::sleep_for(1h);
        if (!s) {
            throw std::system_error(s.error());
        }
        co_return 1;
    }()));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::timed_out);
}

// Only a cancellation can have been caused by the deadline: a failure of the task's own, thrown
// after the deadline passed, reaches the caller as itself.
TEST(with_timeout, other_exception_after_the_deadline_propagates) {
    weft::runtime rt{{.workers = 2}};
    EXPECT_THROW((void)rt.block_on(weft::with_timeout(2ms,
                                                      []() -> weft::task<int> {
                                                          (void)co_await weft::sleep_for(1h);
                                                          throw std::runtime_error("own failure");
                                                      }())),
                 std::runtime_error);
}

TEST(with_timeout, result_holding_cancellation_becomes_timed_out) {
    weft::runtime rt{{.workers = 2}};
    auto r = rt.block_on(weft::with_timeout(
        2ms, []() -> weft::task<weft::result<void>> { co_return co_await weft::sleep_for(1h); }()));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::timed_out);
}

TEST(with_timeout, fast_operation_returns_its_value_and_frees_the_timer) {
    weft::runtime rt{{.workers = 2}};
    auto r = rt.block_on(weft::with_timeout(1h, []() -> weft::task<int> { co_return 3; }()));
    ASSERT_TRUE(r);
    EXPECT_EQ(*r, 3);
    // The runtime's destructor would wait for an armed 1h timer; it returning proves the
    // timer was cancelled and unlinked.
}

// Far deadlines (past the timer wheel's 64^6 ms span, or never): the waiter stays armed, the
// same worker's other timers keep firing, cancellation reaches it and the runtime ends.
// `far_wait(parked)` waits for the far deadline, counting `parked` down once armed; one
// worker, so every timer shares its wheel.
auto far_waiter_leaves_other_timers_working(
    const std::function<weft::task<weft::result<void>>(weft::latch&)>& far_wait)
    -> std::pair<int, std::error_code> {
    weft::runtime rt{{.workers = 1}};
    return rt.block_on([&]() -> weft::task<std::pair<int, std::error_code>> {
        std::error_code far_result;
        int short_sleeps = 0;
        weft::latch parked{1};
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {
                auto r = co_await far_wait(parked);
                far_result = r ? std::error_code{} : r.error();
            });
            (co_await parked.wait()).value();
            for (int i = 0; i < 3; ++i) {
                if ((co_await weft::sleep_for(1ms))) {
                    ++short_sleeps;
                }
            }
            s.request_stop();
        });
        co_return std::pair{short_sleeps, far_result};
    }());
}

TEST(sleep_for, past_the_wheel_span_leaves_other_timers_working) {
    const auto [short_sleeps, far] = far_waiter_leaves_other_timers_working(
        [](weft::latch& parked) -> weft::task<weft::result<void>> {
            co_return co_await weft::test::announce_parked(parked, [] {
                return weft::sleep_for(std::chrono::milliseconds{std::int64_t{1} << 36});
            });
        });
    EXPECT_EQ(short_sleeps, 3);
    EXPECT_EQ(far, std::errc::operation_canceled);
}

TEST(sleep_until, time_point_max_leaves_other_timers_working) {
    const auto [short_sleeps, far] = far_waiter_leaves_other_timers_working(
        [](weft::latch& parked) -> weft::task<weft::result<void>> {
            co_return co_await weft::test::announce_parked(
                parked, [] { return weft::sleep_until(clock_type::time_point::max()); });
        });
    EXPECT_EQ(short_sleeps, 3);
    EXPECT_EQ(far, std::errc::operation_canceled);
}

// A deadline_timer never set waits for "never": the same far entry.
TEST(deadline_timer, waiting_on_a_default_timer_leaves_other_timers_working) {
    weft::deadline_timer never;
    const auto [short_sleeps, far] = far_waiter_leaves_other_timers_working(
        [&](weft::latch& parked) -> weft::task<weft::result<void>> {
            co_return co_await weft::test::announce_parked(parked, [&] { return never.wait(); });
        });
    EXPECT_EQ(short_sleeps, 3);
    EXPECT_EQ(far, std::errc::operation_canceled);
    EXPECT_FALSE(never.expired());
}

// The reported reproduction: a task sleeping 2^36 ms under a short with_timeout times out.
TEST(with_timeout, sleep_past_the_wheel_span_times_out) {
    weft::runtime rt{{.workers = 1}};
    auto r = rt.block_on(weft::with_timeout(20ms, []() -> weft::task<weft::result<void>> {
        co_return co_await weft::sleep_for(std::chrono::milliseconds{std::int64_t{1} << 36});
    }()));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::timed_out);
}

// Durations whose deadline is past the clock's range saturate to "never" (they must not wrap
// into the past and expire at once); those before its start are a deadline already passed.
TEST(sleep_for, duration_max_never_expires) {
    weft::runtime rt{{.workers = 1}};
    auto sleep_max = [](auto d) {
        return weft::with_timeout(5ms, [](auto d) -> weft::task<weft::result<void>> {
            co_return co_await weft::sleep_for(d);
        }(d));
    };
    auto a = rt.block_on(sleep_max(std::chrono::nanoseconds::max()));
    auto b = rt.block_on(sleep_max(std::chrono::hours::max()));
    auto c = rt.block_on(sleep_max(std::chrono::duration<double>::max()));
    ASSERT_FALSE(a);
    EXPECT_EQ(a.error(), std::errc::timed_out);
    ASSERT_FALSE(b);
    EXPECT_EQ(b.error(), std::errc::timed_out);
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error(), std::errc::timed_out);
}

TEST(sleep_for, duration_min_completes_at_once) {
    weft::runtime rt{{.workers = 1}};
    auto r = rt.block_on(weft::with_timeout(1h, []() -> weft::task<weft::result<void>> {
        (co_await weft::sleep_for(std::chrono::nanoseconds::min())).value();
        co_return co_await weft::sleep_for(std::chrono::hours::min());
    }()));
    ASSERT_TRUE(r);
    EXPECT_TRUE(*r);
}

TEST(with_timeout, duration_max_never_times_out) {
    weft::runtime rt{{.workers = 1}};
    auto a = rt.block_on(weft::with_timeout(
        std::chrono::nanoseconds::max(),
        []() -> weft::task<weft::result<void>> { co_return co_await weft::sleep_for(1ms); }()));
    auto b = rt.block_on(weft::with_timeout(
        std::chrono::hours::max(),
        []() -> weft::task<weft::result<void>> { co_return co_await weft::sleep_for(1ms); }()));
    ASSERT_TRUE(a);
    EXPECT_TRUE(*a);
    ASSERT_TRUE(b);
    EXPECT_TRUE(*b);
}

TEST(when_any, sleeps_race_and_loser_is_cancelled) {
    weft::runtime rt{{.workers = 2}};
    auto r = rt.block_on(weft::when_any(
        []() -> weft::task<int> {
            auto s = co_await weft::sleep_for(1h);
            co_return s ? 1 : -1;
        }(),
        []() -> weft::task<int> {
            auto s = co_await weft::sleep_for(1ms);
            co_return s ? 2 : -2;
        }()));
    EXPECT_EQ(r.index, 1U);
    EXPECT_EQ(r.value, 2);
}

}  // namespace

namespace deadline_tests {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

// A wait armed for an hour ends when the deadline is moved to the past from another task: the
// move re-files the pending wait, it does not wait for the hour (the test would hang).
TEST(deadline_timer, moving_earlier_re_files_the_pending_wait) {
    for (unsigned workers : {1U, 2U}) {
        weft::runtime rt{{.workers = workers}};
        const bool expired = rt.block_on([]() -> weft::task<bool> {
            weft::deadline_timer dl{clock_type::now() + 1h};
            bool seen = false;
            co_await weft::with_scope([&](weft::scope& s) -> weft::task<> {
                s.spawn([&]() -> weft::task<> {
                    (co_await dl.wait()).value();
                    seen = dl.expired();
                });
                co_await weft::yield();
                dl.expires_at(clock_type::now() + 2ms);
            });
            co_return seen;
        }());
        EXPECT_TRUE(expired) << workers;
    }
}

// Moves to a later time only record it: the wait wakes at the armed time, sees the deadline
// has not passed, and a watchdog loop waits again; it ends exactly once, after the last move.
TEST(deadline_timer, moving_later_is_seen_when_the_armed_wait_ends) {
    weft::runtime rt{{.workers = 1}};
    const auto [rounds, after_last] = rt.block_on([]() -> weft::task<std::pair<int, bool>> {
        weft::deadline_timer dl{clock_type::now() + 2ms};
        int waits = 0;
        bool late = false;
        clock_type::time_point last;
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<> {
            s.spawn([&]() -> weft::task<> {
                for (;;) {
                    (co_await dl.wait()).value();
                    ++waits;
                    if (dl.expired()) {
                        late = clock_type::now() >= last;
                        co_return;
                    }
                }
            });
            for (int i = 0; i < 5; ++i) {
                last = clock_type::now() + 5ms;
                dl.expires_at(last);
                (co_await weft::sleep_for(1ms)).value();
            }
        });
        co_return std::pair{waits, late};
    }());
    EXPECT_GE(rounds, 1);
    EXPECT_TRUE(after_last);
}

TEST(deadline_timer, expires_after_duration_max_is_never) {
    weft::deadline_timer a;
    a.expires_after(std::chrono::nanoseconds::max());
    EXPECT_EQ(a.expiry(), clock_type::time_point::max());
    EXPECT_FALSE(a.expired());
    weft::deadline_timer b;
    b.expires_after(std::chrono::hours::max());
    EXPECT_EQ(b.expiry(), clock_type::time_point::max());
    EXPECT_FALSE(b.expired());
    weft::deadline_timer c;
    c.expires_after(std::chrono::hours::min());
    EXPECT_TRUE(c.expired());
}

TEST(deadline_timer, cancelled_wait_returns_operation_canceled) {
    weft::runtime rt{{.workers = 1}};
    const auto err = rt.block_on([]() -> weft::task<std::error_code> {
        weft::deadline_timer dl{clock_type::now() + 1h};
        std::error_code ec;
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<> {
            s.spawn([&]() -> weft::task<> {
                auto r = co_await dl.wait();
                ec = r ? std::error_code{} : r.error();
            });
            co_await weft::yield();
            s.request_stop();
        });
        co_return ec;
    }());
    EXPECT_EQ(err, std::errc::operation_canceled);
}

}  // namespace deadline_tests
