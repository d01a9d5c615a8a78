// wait_readable / wait_writable on descriptors weft does not own, on both backends: a wait
// returns once the descriptor is ready, is cancellable, leaves the descriptor open and usable,
// and leaves no registration behind in the reactor.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <thread>
#include <vector>

#include "backend_test.hpp"
#include "epoll_reactor.hpp"
#include "foreign_stop.hpp"
#include "reactor.hpp"
#include "test_util.hpp"
#include "weft/core/scope.hpp"
#include "weft/io/error.hpp"
#include "weft/io/fd_wait.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/yield.hpp"

namespace {

using namespace std::chrono_literals;

class fd_wait : public weft::test::backend_test {};

// The reactor of this worker: operations in flight (io_uring) or tasks waiting (epoll).
// Out of line: called from coroutine bodies, it must read this thread's reactor each time.
[[gnu::noinline]] auto reactor_pending() -> std::size_t {
    return weft::detail::reactor::current()->pending();
}

// Foreign descriptors registered with this worker's epoll (0 on io_uring: a one-shot poll is
// the only state, and it is counted in reactor_pending()).
[[gnu::noinline]] auto registrations() -> std::size_t {
    auto* r = weft::detail::reactor::current();
    if (r->backend() != weft::io_backend::epoll) {
        return 0;
    }
    return static_cast<weft::detail::epoll_reactor*>(r)->foreign_registrations();
}

// Yields until `n` waits are parked in this worker's reactor (one worker: the waiters run,
// and park, while this task yields). Synchronises on state, not on time.
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

void signal_eventfd(int efd) {
    const std::uint64_t one = 1;
    ASSERT_EQ(::write(efd, &one, sizeof(one)), static_cast<ssize_t>(sizeof(one)));
}

auto drain_eventfd(int efd) -> std::uint64_t {
    std::uint64_t v = 0;
    if (::read(efd, &v, sizeof(v)) != static_cast<ssize_t>(sizeof(v))) {
        return 0;
    }
    return v;
}

struct owned_fd {
    int fd;
    explicit owned_fd(int f) : fd(f) {}
    owned_fd(const owned_fd&) = delete;
    auto operator=(const owned_fd&) -> owned_fd& = delete;
    ~owned_fd() {
        if (fd >= 0) {
            ::close(fd);
        }
    }
};

TEST_P(fd_wait, eventfd_wait_returns_once_written_and_the_fd_stays_usable) {
    weft::runtime rt{options(1)};
    owned_fd efd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    ASSERT_GE(efd.fd, 0);
    std::optional<weft::result<void>> got;
    bool returned_early = false;
    std::size_t parked_registrations = 0;
    std::size_t left_registrations = 1;
    std::size_t left_pending = 1;
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> { got = co_await weft::wait_readable(efd.fd); });
            co_await until_parked(1);
            returned_early = got.has_value();
            parked_registrations = registrations();
            signal_eventfd(efd.fd);
        });
        left_registrations = registrations();
        left_pending = reactor_pending();
    }());
    EXPECT_FALSE(returned_early);
    ASSERT_TRUE(got.has_value());
    EXPECT_TRUE(*got) << got->error().message();
    EXPECT_EQ(parked_registrations, GetParam() == weft::io_backend::epoll ? 1U : 0U);
    EXPECT_EQ(left_registrations, 0U);
    EXPECT_EQ(left_pending, 0U);
    // weft read nothing: the value written is still there for the owner.
    EXPECT_GE(::fcntl(efd.fd, F_GETFD), 0);
    EXPECT_EQ(drain_eventfd(efd.fd), 1U);
}

TEST_P(fd_wait, a_ready_descriptor_returns_at_once) {
    weft::runtime rt{options(1)};
    owned_fd efd(::eventfd(3, EFD_NONBLOCK | EFD_CLOEXEC));
    auto [r, w] =
        rt.block_on([&]() -> weft::task<std::pair<weft::result<void>, weft::result<void>>> {
            auto rr = co_await weft::wait_readable(efd.fd);
            auto ww = co_await weft::wait_writable(efd.fd);
            co_return std::pair{rr, ww};
        }());
    EXPECT_TRUE(r);
    EXPECT_TRUE(w);
    EXPECT_EQ(drain_eventfd(efd.fd), 3U);
}

TEST_P(fd_wait, pipe_read_end_wakes_on_data_and_write_end_on_room) {
    weft::runtime rt{options(1)};
    int p[2];
    ASSERT_EQ(::pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
    owned_fd rd(p[0]);
    owned_fd wr(p[1]);
    std::optional<weft::result<void>> readable;
    std::optional<weft::result<void>> writable;
    bool read_early = false;
    bool write_early = false;
    std::size_t filled = 0;
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> { readable = co_await weft::wait_readable(rd.fd); });
            co_await until_parked(1);
            read_early = readable.has_value();
            EXPECT_EQ(::write(wr.fd, "x", 1), 1);
        });
        // Fill the pipe, then wait for room.
        std::vector<char> chunk(4096, 'y');
        for (;;) {
            const ssize_t n = ::write(wr.fd, chunk.data(), chunk.size());
            if (n < 0) {
                EXPECT_EQ(errno, EAGAIN);
                break;
            }
            filled += static_cast<std::size_t>(n);
        }
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> { writable = co_await weft::wait_writable(wr.fd); });
            co_await until_parked(1);
            write_early = writable.has_value();
            while (::read(rd.fd, chunk.data(), chunk.size()) > 0) {
            }
        });
    }());
    EXPECT_FALSE(read_early);
    EXPECT_FALSE(write_early);
    ASSERT_TRUE(readable && writable);
    EXPECT_TRUE(*readable);
    EXPECT_TRUE(*writable);
    EXPECT_GT(filled, 0U);
    EXPECT_EQ(::write(wr.fd, "z", 1), 1);  // both ends still open and usable
    char c = 0;
    EXPECT_EQ(::read(rd.fd, &c, 1), 1);
    EXPECT_EQ(c, 'z');
}

TEST_P(fd_wait, a_parked_wait_is_cancelled_and_leaves_nothing_registered) {
    weft::runtime rt{options(1)};
    owned_fd efd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    std::optional<weft::result<void>> got;
    std::size_t left_registrations = 1;
    std::size_t left_pending = 1;
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> { got = co_await weft::wait_readable(efd.fd); });
            co_await until_parked(1);
            s.request_stop();
        });
        left_registrations = registrations();
        // io_uring: the poll is counted until the kernel confirmed the cancel, which resumed us.
        left_pending = reactor_pending();
    }());
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->error(), std::errc::operation_canceled);
    EXPECT_EQ(left_registrations, 0U);
    EXPECT_EQ(left_pending, 0U);
    // Still open, and a later wait on it works.
    signal_eventfd(efd.fd);
    auto again = rt.block_on(weft::wait_readable(efd.fd));
    EXPECT_TRUE(again);
    EXPECT_EQ(drain_eventfd(efd.fd), 1U);
}

// A stop requested from outside the waiting task's runtime (a plain thread, a thread in
// sync_wait, a task of another runtime) resumes the cancelled wait on a worker of its own
// runtime. On epoll the cancellation used to queue it on whichever executor asked.
TEST_P(fd_wait, a_wait_stopped_from_elsewhere_resumes_on_its_own_runtime) {
    for (const auto who : weft::test::every_stopper) {
        weft::runtime rt{options(1)};
        owned_fd efd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
        std::optional<weft::result<void>> got;
        std::thread::id worker;
        std::thread::id resumed_on;
        rt.block_on([&]() -> weft::task<void> {
            co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
                s.spawn([&]() -> weft::task<void> {
                    got = co_await weft::wait_readable(efd.fd);
                    resumed_on = std::this_thread::get_id();
                });
                co_await until_parked(1);
                worker = std::this_thread::get_id();
                weft::test::stop_from(who, GetParam(), [&] { s.request_stop(); });
            });
        }());
        ASSERT_TRUE(got.has_value());
        EXPECT_EQ(got->error(), std::errc::operation_canceled) << weft::test::to_string(who);
        EXPECT_EQ(resumed_on, worker) << "stopped by " << weft::test::to_string(who);
    }
}

TEST_P(fd_wait, a_wait_whose_stop_was_already_requested_is_cancelled) {
    weft::runtime rt{options(1)};
    owned_fd efd(::eventfd(1, EFD_NONBLOCK | EFD_CLOEXEC));  // ready: cancellation still wins
    std::optional<weft::result<void>> got;
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.request_stop();
            s.spawn([&]() -> weft::task<void> { got = co_await weft::wait_readable(efd.fd); });
            co_return;
        });
    }());
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->error(), std::errc::operation_canceled);
    EXPECT_EQ(drain_eventfd(efd.fd), 1U);
}

TEST_P(fd_wait, the_timeout_overload_gives_up_with_timed_out) {
    weft::runtime rt{options(1)};
    owned_fd efd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    auto [r, w] =
        rt.block_on([&]() -> weft::task<std::pair<weft::result<void>, weft::result<void>>> {
            auto rr = co_await weft::wait_readable(efd.fd, 5ms);
            auto ww = co_await weft::wait_writable(efd.fd, 5ms);  // writable: returns at once
            co_return std::pair{rr, ww};
        }());
    EXPECT_EQ(r.error(), std::errc::timed_out);
    EXPECT_TRUE(w);
}

// Two tasks on one descriptor (one registration on epoll): both readers wake on one write;
// a cancelled reader leaves the other waiting; a writer on the same socket returns at once
// while a reader there still waits.
TEST_P(fd_wait, several_waiters_on_one_descriptor) {
    weft::runtime rt{options(1)};
    owned_fd efd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    int sp[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sp), 0);
    owned_fd a(sp[0]);
    owned_fd b(sp[1]);
    std::optional<weft::result<void>> r1;
    std::optional<weft::result<void>> r2;
    std::optional<weft::result<void>> r3;
    std::optional<weft::result<void>> reader;
    std::optional<weft::result<void>> writer;
    std::size_t shared = 0;
    bool r2_early = false;
    bool reader_early = false;
    std::size_t left = 1;
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            co_await weft::with_scope([&](weft::scope& inner) -> weft::task<void> {
                inner.spawn(
                    [&]() -> weft::task<void> { r1 = co_await weft::wait_readable(efd.fd); });
                s.spawn([&]() -> weft::task<void> { r2 = co_await weft::wait_readable(efd.fd); });
                s.spawn([&]() -> weft::task<void> { r3 = co_await weft::wait_readable(efd.fd); });
                co_await until_parked(3);
                shared = registrations();
                inner.request_stop();  // r1 only
            });
            r2_early = r2.has_value();
            signal_eventfd(efd.fd);
        });
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> { reader = co_await weft::wait_readable(a.fd); });
            co_await until_parked(1);
            writer = co_await weft::wait_writable(a.fd);
            reader_early = reader.has_value();
            EXPECT_EQ(::write(b.fd, "x", 1), 1);
        });
        left = registrations();
    }());
    EXPECT_EQ(shared, GetParam() == weft::io_backend::epoll ? 1U : 0U);
    ASSERT_TRUE(r1 && r2 && r3 && reader && writer);
    EXPECT_EQ(r1->error(), std::errc::operation_canceled);
    EXPECT_FALSE(r2_early);
    EXPECT_TRUE(*r2);
    EXPECT_TRUE(*r3);
    EXPECT_TRUE(*writer);
    EXPECT_FALSE(reader_early);
    EXPECT_TRUE(*reader);
    EXPECT_EQ(left, 0U);
}

// Many waits in a loop, some cancelled, some on a descriptor closed and replaced by a new one
// (usually the same number): nothing accumulates in the reactor, no descriptor leaks, and a
// new descriptor with an old number is waited on afresh (epoll: no stale registration).
TEST_P(fd_wait, many_waits_leave_no_registrations_behind) {
    constexpr int rounds = 2000;
    weft::runtime rt{options(1)};
    const std::size_t fds_before = open_fds();
    int woken = 0;
    int cancelled = 0;
    std::size_t left_registrations = 1;
    std::size_t left_pending = 1;
    rt.block_on([&]() -> weft::task<void> {
        int efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        for (int i = 0; i < rounds; ++i) {
            if (i % 3 == 2) {
                co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
                    s.spawn([&]() -> weft::task<void> {
                        if ((co_await weft::wait_readable(efd)).error() ==
                            std::errc::operation_canceled) {
                            ++cancelled;
                        }
                    });
                    co_await until_parked(1);
                    s.request_stop();
                });
            } else {
                signal_eventfd(efd);
                if (co_await weft::wait_readable(efd)) {
                    ++woken;
                }
                EXPECT_EQ(drain_eventfd(efd), 1U);
            }
            if (i % 100 == 99) {
                ::close(efd);
                efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
            }
        }
        ::close(efd);
        left_registrations = registrations();
        left_pending = reactor_pending();
    }());
    EXPECT_EQ(woken + cancelled, rounds);
    EXPECT_EQ(cancelled, rounds / 3);
    EXPECT_EQ(left_registrations, 0U);
    EXPECT_EQ(left_pending, 0U);
    EXPECT_EQ(open_fds(), fds_before);
}

TEST_P(fd_wait, a_bad_descriptor_is_an_error_value) {
    weft::runtime rt{options(1)};
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    ::close(p[0]);
    ::close(p[1]);
    auto r = rt.block_on(weft::wait_readable(p[0]));
    EXPECT_EQ(r.error(), std::errc::bad_file_descriptor);
}

TEST_P(fd_wait, a_regular_file_is_always_ready) {
    weft::runtime rt{options(1)};
    std::FILE* f = std::tmpfile();
    ASSERT_NE(f, nullptr);
    auto [r, w] =
        rt.block_on([&]() -> weft::task<std::pair<weft::result<void>, weft::result<void>>> {
            auto rr = co_await weft::wait_readable(::fileno(f));
            auto ww = co_await weft::wait_writable(::fileno(f));
            co_return std::pair{rr, ww};
        }());
    std::fclose(f);
    EXPECT_TRUE(r);
    EXPECT_TRUE(w);
}

// Wakers on another thread: a plain thread writes while tasks on two workers wait.
TEST_P(fd_wait, woken_from_another_thread_on_several_workers) {
    constexpr int waiters = 8;
    weft::runtime rt{options(2)};
    owned_fd efd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    std::atomic<int> ok{0};
    std::atomic<int> started{0};
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            for (int i = 0; i < waiters; ++i) {
                s.spawn([&]() -> weft::task<void> {
                    started.fetch_add(1);
                    if (co_await weft::wait_readable(efd.fd)) {
                        ok.fetch_add(1);
                    }
                });
            }
            while (started.load() < waiters) {
                co_await weft::yield();
            }
            std::thread([&] { signal_eventfd(efd.fd); }).join();  // level: every waiter sees it
            co_return;
        });
    }());
    EXPECT_EQ(ok.load(), waiters);
}

// A cancel from one thread racing the descriptor becoming ready on another: each wait ends once,
// either way, and no reactor keeps a registration or a wait.
TEST_P(fd_wait, cancels_racing_readiness_end_each_wait_once_and_leave_nothing_behind) {
    const int rounds = weft::test::scaled(400);
    weft::runtime rt{options(2)};
    int ready = 0;
    int cancelled = 0;
    int other = 0;
    std::size_t left = 0;
    rt.block_on([&]() -> weft::task<void> {
        for (int i = 0; i < rounds; ++i) {
            owned_fd efd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
            std::optional<weft::result<void>> r;
            co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
                s.spawn([&]() -> weft::task<void> { r = co_await weft::wait_readable(efd.fd); });
                std::thread writer([&] { signal_eventfd(efd.fd); });
                s.request_stop();
                writer.join();
                co_return;
            });
            if (r && *r) {
                ++ready;
            } else if (r && r->error() == std::errc::operation_canceled) {
                ++cancelled;
            } else {
                ++other;
            }
        }
        for (unsigned w = 0; w < 2; ++w) {
            co_await weft::switch_to_worker(w);
            left += registrations() + reactor_pending();
        }
    }());
    EXPECT_EQ(ready + cancelled, rounds);
    EXPECT_EQ(other, 0);
    EXPECT_EQ(left, 0U);
}

}  // namespace

WEFT_TEST_ON_BOTH_BACKENDS(fd_wait);
