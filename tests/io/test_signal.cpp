// wait_for_signal on both backends: the number of the signal that came, whether it came while
// the task waited or before; from any thread, with no signal blocked anywhere (the workers start
// before the first wait); cancellation; the checks at the call.
//
// NOTE: nothing in this binary blocks a signal. A test sends a signal only once wait_for_signal
// has been called for it (that call installs the handler): sent earlier, SIGTERM would end the
// process.

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <thread>

#include "backend_test.hpp"
#include "epoll_reactor.hpp"
#include "io_waits.hpp"
#include "reactor.hpp"
#include "weft/core/scope.hpp"
#include "weft/io/signal.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/yield.hpp"

namespace {

#if defined(__SANITIZE_THREAD__)
#define WEFT_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WEFT_TEST_TSAN 1
#endif
#endif

// Sends `sig` to the whole process (kill), so the kernel hands it to any thread that does not
// block it. NOTE: under ThreadSanitizer a handler runs only when its thread is inside one of
// TSan's interceptors, or next enters one; the kernel prefers the main thread, which sits in
// block_on's futex wait (no interceptor) until the test ends, so the handler could wait
// forever. There the sender raises it on itself instead, which TSan handles at once; the
// wake-up still crosses threads through the waiting task's eventfd.
auto send_to_process(int sig) -> int {
#if defined(WEFT_TEST_TSAN)
    return ::raise(sig);
#else
    return ::kill(::getpid(), sig);
#endif
}

class signal_wait : public weft::test::io_wait_test {};

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

// The process's open eventfds (what a wait holds), by their /proc/self/fd links.
auto open_eventfds() -> std::size_t {
    std::size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
        std::error_code ec;
        if (std::filesystem::read_symlink(e.path(), ec).string() == "anon_inode:[eventfd]") {
            ++n;
        }
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
            EXPECT_EQ(send_to_process(SIGUSR2), 0);
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

TEST_P(signal_wait, a_signal_sent_after_the_call_and_before_the_await_is_returned_at_once) {
    weft::runtime rt{options(2)};
    auto wait = weft::wait_for_signal({SIGUSR2, SIGUSR1});  // the handlers are installed here
    ASSERT_EQ(send_to_process(SIGUSR1), 0);                 // nobody waits yet: it is kept
    auto got = rt.block_on(std::move(wait));
    ASSERT_TRUE(got);
    EXPECT_EQ(*got, SIGUSR1);
}

// A program that never blocks a signal: the runtime's workers run before the wait, and the
// signal comes from a thread that is not the runtime's. It must end the wait, not the process.
TEST_P(signal_wait, sigterm_raised_on_another_thread_ends_the_wait_not_the_process) {
    weft::runtime rt{options(2)};
    std::optional<weft::result<int>> got;
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {
                got = co_await weft::wait_for_signal({SIGINT, SIGTERM});
            });
            co_await weft::test::until([] { return weft::test::io_waits() == 1; });
            std::thread([] { EXPECT_EQ(::raise(SIGTERM), 0); }).join();  // to that thread only
        });
    }());
    ASSERT_TRUE(got.has_value());
    ASSERT_TRUE(*got) << got->error().message();
    EXPECT_EQ(**got, SIGTERM);
}

TEST_P(signal_wait, a_signal_killed_from_another_thread_is_returned) {
    weft::runtime rt{options(2)};
    std::optional<weft::result<int>> got;
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> { got = co_await weft::wait_for_signal({SIGUSR1}); });
            co_await weft::test::until([] { return weft::test::io_waits() == 1; });
            std::thread([] { EXPECT_EQ(send_to_process(SIGUSR1), 0); }).join();
        });
    }());
    ASSERT_TRUE(got.has_value());
    ASSERT_TRUE(*got) << got->error().message();
    EXPECT_EQ(**got, SIGUSR1);
}

// Two waits for different signals at once: each signal ends the wait that asked for it, and
// only that one.
TEST_P(signal_wait, each_signal_ends_the_wait_for_it_and_no_other) {
    weft::runtime rt{options(2)};
    // The signal each wait returned (-1: an error, 0: not yet). Atomic: the waits run on any
    // worker while this task reads.
    std::atomic<int> usr1{0};
    std::atomic<int> usr2{0};
    int usr1_early = -2;
    auto wait = [](int sig, std::atomic<int>& out) -> weft::task<void> {
        auto r = co_await weft::wait_for_signal({sig});
        out.store(r ? *r : -1);
    };
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn(wait(SIGUSR1, usr1));
            s.spawn(wait(SIGUSR2, usr2));
            co_await weft::test::until([] { return weft::test::io_waits() == 2; });
            EXPECT_EQ(send_to_process(SIGUSR2), 0);
            co_await weft::test::until([&] { return usr2.load() != 0; });
            // The SIGUSR1 wait is still parked: the SIGUSR2 wait took its own signal.
            co_await weft::test::until([] { return weft::test::io_waits() == 1; });
            usr1_early = usr1.load();
            EXPECT_EQ(send_to_process(SIGUSR1), 0);
        });
    }());
    EXPECT_EQ(usr1_early, 0);
    EXPECT_EQ(usr1.load(), SIGUSR1);
    EXPECT_EQ(usr2.load(), SIGUSR2);
}

TEST_P(signal_wait, a_cancelled_wait_returns_operation_canceled_and_the_signal_stays_pending) {
    weft::runtime rt{options(1)};
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
        EXPECT_EQ(send_to_process(SIGUSR1), 0);  // nobody waits: it stays pending
        next = co_await weft::wait_for_signal({SIGUSR1});
    }());
    ASSERT_TRUE(cancelled.has_value());
    EXPECT_EQ(cancelled->error(), std::errc::operation_canceled);
    EXPECT_EQ(left_registrations, 0U);
    EXPECT_EQ(left_pending, 0U);
    ASSERT_TRUE(next.has_value());
    ASSERT_TRUE(*next);
    EXPECT_EQ(**next, SIGUSR1);
}

TEST_P(signal_wait, each_signal_ends_one_wait_of_many_in_a_row) {
    constexpr int rounds = 200;
    weft::runtime rt{options(2)};
    int usr1 = 0;
    int usr2 = 0;
    std::size_t eventfds_after_first = 0;
    rt.block_on([&]() -> weft::task<void> {
        for (int i = 0; i < rounds; ++i) {
            auto wait = weft::wait_for_signal({SIGUSR1, SIGUSR2});
            EXPECT_EQ(send_to_process(i % 2 == 0 ? SIGUSR1 : SIGUSR2), 0);
            auto sig = co_await std::move(wait);
            if (sig && *sig == SIGUSR1) {
                ++usr1;
            } else if (sig && *sig == SIGUSR2) {
                ++usr2;
            }
            if (i == 0) {
                eventfds_after_first = open_eventfds();
            }
        }
    }());
    EXPECT_EQ(usr1, rounds / 2);
    EXPECT_EQ(usr2, rounds / 2);
    EXPECT_EQ(open_eventfds(), eventfds_after_first);  // a wait's descriptor serves the next one
}

TEST(signal_wait_checks, an_empty_set_a_fault_signal_or_a_non_signal_is_refused_at_the_call) {
    EXPECT_THROW((void)weft::wait_for_signal({SIGSEGV}), std::invalid_argument);
    EXPECT_THROW((void)weft::wait_for_signal({SIGUSR1, SIGFPE}), std::invalid_argument);
    EXPECT_THROW((void)weft::wait_for_signal({SIGUSR1, SIGKILL}), std::invalid_argument);
    EXPECT_THROW((void)weft::wait_for_signal({0}), std::invalid_argument);
    EXPECT_THROW((void)weft::wait_for_signal(weft::signal_set{}), std::invalid_argument);
    EXPECT_THROW((void)weft::signal_set{SIGSTOP}, std::invalid_argument);
    EXPECT_THROW((void)weft::signal_set{65}, std::invalid_argument);
    const int list[] = {SIGUSR1, SIGUSR2};
    const weft::signal_set from_span(list);
    EXPECT_TRUE(from_span.contains(SIGUSR1) && from_span.contains(SIGUSR2));
    EXPECT_FALSE(from_span.contains(SIGINT));
}

}  // namespace

WEFT_TEST_ON_BOTH_BACKENDS(signal_wait);
