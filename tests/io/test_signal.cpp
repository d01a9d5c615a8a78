// wait_for_signal on both backends: the number of the signal that came, whether it came while
// the task waited or before; cancellation; the checks that guard against a signal taken the
// default way.

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <optional>
#include <stdexcept>

#include "backend_test.hpp"
#include "epoll_reactor.hpp"
#include "reactor.hpp"
#include "weft/core/scope.hpp"
#include "weft/io/signal.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/yield.hpp"

namespace {

// Blocked before any thread of this binary exists (priority constructors run before every
// ordinary static initialiser, among them the watchdog's, which starts a thread): every thread
// inherits the mask, as weft::block_signals asks of a program's main.
[[gnu::constructor(101)]] void block_test_signals() { weft::block_signals({SIGUSR1, SIGUSR2}); }

class signal_wait : public weft::test::backend_test {
protected:
    void TearDown() override {
        // A failed test must not leave a pending signal for the next one.
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGUSR1);
        sigaddset(&set, SIGUSR2);
        const timespec zero{};
        while (::sigtimedwait(&set, nullptr, &zero) > 0) {
        }
    }
};

[[gnu::noinline]] auto reactor_pending() -> std::size_t {
    return weft::detail::reactor::current()->pending();
}

[[gnu::noinline]] auto registrations() -> std::size_t {
    auto* r = weft::detail::reactor::current();
    if (r->backend() != weft::io_backend::epoll) {
        return 0;
    }
    return static_cast<weft::detail::epoll_reactor*>(r)->foreign_registrations();
}

// Yields until `n` waits are parked in this worker's reactor (one worker: synchronises on
// state, not on time).
auto until_parked(std::size_t n) -> weft::task<void> {
    while (reactor_pending() < n) {
        co_await weft::yield();
    }
}

auto open_fds() -> std::size_t {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
        ++n;
    }
    return n;
}

TEST_P(signal_wait, a_signal_sent_to_the_process_while_waiting_is_returned) {
    weft::runtime rt{options(1)};
    std::optional<weft::result<int>> got;
    bool early = false;
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {
                got = co_await weft::wait_for_signal({SIGUSR1, SIGUSR2});
            });
            co_await until_parked(1);
            early = got.has_value();
            EXPECT_EQ(::kill(::getpid(), SIGUSR2), 0);
        });
    }());
    EXPECT_FALSE(early);
    ASSERT_TRUE(got.has_value());
    ASSERT_TRUE(*got) << got->error().message();
    EXPECT_EQ(**got, SIGUSR2);
}

TEST_P(signal_wait, a_signal_sent_to_the_worker_thread_is_returned) {
    weft::runtime rt{options(1)};
    std::optional<weft::result<int>> got;
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> { got = co_await weft::wait_for_signal({SIGUSR1}); });
            co_await until_parked(1);
            // One worker: this is the thread the waiter reads the signal on.
            EXPECT_EQ(::pthread_kill(::pthread_self(), SIGUSR1), 0);
        });
    }());
    ASSERT_TRUE(got.has_value());
    ASSERT_TRUE(*got) << got->error().message();
    EXPECT_EQ(**got, SIGUSR1);
}

TEST_P(signal_wait, a_signal_sent_before_the_wait_is_returned_at_once) {
    weft::runtime rt{options(2)};
    ASSERT_EQ(::kill(::getpid(), SIGUSR1), 0);  // pending: every thread blocks it
    auto got = rt.block_on(weft::wait_for_signal({SIGUSR2, SIGUSR1}));
    ASSERT_TRUE(got);
    EXPECT_EQ(*got, SIGUSR1);
}

TEST_P(signal_wait, a_cancelled_wait_returns_operation_canceled_and_the_signal_stays_pending) {
    weft::runtime rt{options(1)};
    const std::size_t fds_before = open_fds();
    std::optional<weft::result<int>> cancelled;
    std::optional<weft::result<int>> next;
    std::size_t left_registrations = 1;
    std::size_t left_pending = 1;
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {
                cancelled = co_await weft::wait_for_signal({SIGUSR1});
            });
            co_await until_parked(1);
            s.request_stop();
        });
        left_registrations = registrations();
        left_pending = reactor_pending();
        EXPECT_EQ(::kill(::getpid(), SIGUSR1), 0);  // nobody waits: it stays pending
        next = co_await weft::wait_for_signal({SIGUSR1});
    }());
    ASSERT_TRUE(cancelled.has_value());
    EXPECT_EQ(cancelled->error(), std::errc::operation_canceled);
    EXPECT_EQ(left_registrations, 0U);
    EXPECT_EQ(left_pending, 0U);
    ASSERT_TRUE(next.has_value());
    ASSERT_TRUE(*next);
    EXPECT_EQ(**next, SIGUSR1);
    EXPECT_EQ(open_fds(), fds_before);  // each wait's signalfd is closed
}

TEST_P(signal_wait, each_signal_ends_one_wait_of_many_in_a_row) {
    constexpr int rounds = 200;
    weft::runtime rt{options(2)};
    int usr1 = 0;
    int usr2 = 0;
    rt.block_on([&]() -> weft::task<void> {
        for (int i = 0; i < rounds; ++i) {
            EXPECT_EQ(::kill(::getpid(), i % 2 == 0 ? SIGUSR1 : SIGUSR2), 0);
            auto sig = co_await weft::wait_for_signal({SIGUSR1, SIGUSR2});
            if (sig && *sig == SIGUSR1) {
                ++usr1;
            } else if (sig && *sig == SIGUSR2) {
                ++usr2;
            }
        }
    }());
    EXPECT_EQ(usr1, rounds / 2);
    EXPECT_EQ(usr2, rounds / 2);
}

TEST(signal_wait_checks, an_unblocked_signal_or_a_non_signal_is_refused_at_the_call) {
    // SIGWINCH is not blocked in this process: its wait would race with the default action.
    EXPECT_THROW((void)weft::wait_for_signal({SIGWINCH}), std::logic_error);
    EXPECT_THROW((void)weft::wait_for_signal({SIGUSR1, SIGKILL}), std::invalid_argument);
    EXPECT_THROW((void)weft::wait_for_signal({0}), std::invalid_argument);
    EXPECT_THROW((void)weft::wait_for_signal(weft::signal_set{}), std::invalid_argument);
    EXPECT_THROW(weft::block_signals({SIGSTOP}), std::invalid_argument);
    EXPECT_THROW(weft::block_signals({65}), std::invalid_argument);
    EXPECT_THROW(weft::block_signals(weft::signal_set{}), std::invalid_argument);
    const int list[] = {SIGUSR1, SIGUSR2};
    const weft::signal_set from_span(list);
    EXPECT_TRUE(from_span.contains(SIGUSR1) && from_span.contains(SIGUSR2));
    EXPECT_FALSE(from_span.contains(SIGINT));
}

}  // namespace

WEFT_TEST_ON_BOTH_BACKENDS(signal_wait);
