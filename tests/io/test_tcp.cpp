// TCP over both reactors: every test runs once on io_uring and once on epoll (the suite is
// parameterised; io_uring runs report skipped where the kernel has no io_uring).

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "accept_queue.hpp"
#include "backend_test.hpp"
#include "foreign_stop.hpp"
#include "io_waits.hpp"
#include "multishot.hpp"
#include "recv_queue.hpp"
#include "test_util.hpp"
#include "weft/core/scope.hpp"
#include "weft/core/when_all.hpp"
#include "weft/io/buffer.hpp"
#include "weft/io/reactor.hpp"
#include "weft/io/tcp_listener.hpp"
#include "weft/io/tcp_stream.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"
#include "weft/sched/yield.hpp"
#include "weft/sync/channel.hpp"

namespace {

using namespace std::chrono_literals;

auto loopback() -> weft::socket_address {
    return weft::socket_address::parse("127.0.0.1", 0).value();
}

auto bytes(std::string_view s) -> std::span<const std::byte> { return std::as_bytes(std::span{s}); }

class tcp : public weft::test::io_wait_test {};

// Reads until eof, returns everything.
auto read_to_end(weft::tcp_stream& s) -> weft::task<weft::result<std::string>> {
    std::string out;
    std::array<std::byte, 4096> buf{};
    for (;;) {
        auto n = co_await s.read_some(buf);
        if (!n) {
            if (n.error() == weft::io_errc::eof) {
                co_return out;
            }
            co_return n.error();
        }
        out.append(reinterpret_cast<const char*>(buf.data()), *n);
    }
}

auto echo_once(weft::tcp_listener& l) -> weft::task<void> {
    auto c = co_await l.accept();
    c.value();
    std::array<std::byte, 4096> buf{};
    for (;;) {
        auto n = co_await c->read_some(buf);
        if (!n) {
            co_return;  // eof or error: done
        }
        (co_await c->write_all(std::span<const std::byte>(buf.data(), *n))).value();
    }
}

// Where receives go when the IO home is dropped: an even split over the workers for runs of
// descriptors however they are spaced (a server that opens a file per connection would give its
// sockets every other number).
TEST(recv_queue, spread_worker_splits_descriptors_evenly_whatever_their_spacing) {
    for (unsigned workers = 2; workers <= 4; ++workers) {
        for (int stride = 1; stride <= 4; ++stride) {
            std::vector<int> count(workers, 0);
            for (int i = 0; i < 1000; ++i) {
                const unsigned w = weft::detail::spread_worker(10 + i * stride, workers);
                ASSERT_LT(w, workers);
                ++count[w];
            }
            for (unsigned w = 0; w < workers; ++w) {
                EXPECT_NEAR(count[w], 1000.0 / workers, 0.1 * 1000.0 / workers)
                    << workers << " workers, stride " << stride << ", worker " << w;
            }
        }
    }
}

// reserve_descriptors sizes the descriptor table at once (so that accepting connections later
// never waits for it to grow), leaves no descriptor open, and a request beyond RLIMIT_NOFILE
// is capped there.
TEST(descriptors, reserve_descriptors_sizes_the_table_at_once) {
    rlimit rl{};
    ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &rl), 0);
    const std::size_t before = weft::test::descriptor_table_size();
    ASSERT_GT(before, 0U);
    const std::size_t limit = rl.rlim_cur == RLIM_INFINITY ? std::size_t{1} << 20 : rl.rlim_cur;
    const std::size_t want = std::min<std::size_t>(limit, 4 * std::max<std::size_t>(before, 256));
    if (want <= before) {
        GTEST_SKIP() << "the table (" << before << ") already holds RLIMIT_NOFILE (" << limit
                     << ")";
    }
    auto open_now = [] {
        return static_cast<std::size_t>(
            std::distance(std::filesystem::directory_iterator("/proc/self/fd"), {}));
    };
    const std::size_t open_before = open_now();
    EXPECT_TRUE(weft::reserve_descriptors(want));
    EXPECT_GE(weft::test::descriptor_table_size(), want);
    EXPECT_EQ(open_now(), open_before);
    if (limit <= 65536) {  // (a larger limit would cost the test its table's memory)
        EXPECT_TRUE(weft::reserve_descriptors(2 * limit));  // capped at RLIMIT_NOFILE
        EXPECT_GE(weft::test::descriptor_table_size(), limit);
        EXPECT_EQ(open_now(), open_before);
    }
}

TEST_P(tcp, echo_round_trip_and_backend_is_the_requested_one) {
    weft::runtime rt{options()};
    auto got = rt.block_on([&]() -> weft::task<std::string> {
        EXPECT_EQ(weft::current_io_backend(), GetParam());
        auto l = weft::tcp_listener::bind(loopback()).value();
        const auto addr = l.local_address().value();
        auto server = weft::spawn(echo_once(l));
        auto c = (co_await weft::tcp_stream::connect(addr)).value();
        (co_await c.write_all(bytes("hello weft"))).value();
        (void)c.shutdown_write();
        auto r = (co_await read_to_end(c)).value();
        co_await std::move(server);
        co_return r;
    }());
    EXPECT_EQ(got, "hello weft");
}

TEST_P(tcp, large_transfer_both_ways_arrives_intact) {
    weft::runtime rt{options()};
    std::string payload(8 << 20, '\0');
    std::mt19937 rng(7);
    for (auto& ch : payload) {
        ch = static_cast<char>(rng());
    }
    auto echoed = rt.block_on([&]() -> weft::task<std::string> {
        auto l = weft::tcp_listener::bind(loopback()).value();
        auto server = weft::spawn(echo_once(l));
        auto c = (co_await weft::tcp_stream::connect(l.local_address().value())).value();
        // Write and read concurrently (the echo would stall on full buffers otherwise).
        auto writer = weft::spawn([&]() -> weft::task<void> {
            const std::string_view v = payload;
            const std::span<const std::byte> parts[2] = {bytes(v.substr(0, 1000)),
                                                         bytes(v.substr(1000))};
            (co_await c.write_all(std::span<const std::span<const std::byte>>(parts))).value();
            c.shutdown_write().value();
        });
        auto r = (co_await read_to_end(c)).value();
        co_await std::move(writer);
        co_await std::move(server);
        co_return r;
    }());
    EXPECT_EQ(echoed.size(), payload.size());
    EXPECT_TRUE(echoed == payload);
}

TEST_P(tcp, peer_close_is_reported_as_eof) {
    weft::runtime rt{options()};
    auto err = rt.block_on([&]() -> weft::task<std::error_code> {
        auto l = weft::tcp_listener::bind(loopback()).value();
        auto closer = weft::spawn([&]() -> weft::task<void> {
            auto c = co_await l.accept();
            c->close();
        });
        auto c = (co_await weft::tcp_stream::connect(l.local_address().value())).value();
        co_await std::move(closer);
        std::array<std::byte, 16> buf{};
        auto n = co_await c.read_some(buf);
        co_return n.error();
    }());
    EXPECT_EQ(err, weft::io_errc::eof);
    EXPECT_EQ(err.message(), "connection closed by peer");
}

TEST_P(tcp, half_close_lets_the_other_side_answer) {
    weft::runtime rt{options()};
    auto reply = rt.block_on([&]() -> weft::task<std::string> {
        auto l = weft::tcp_listener::bind(loopback()).value();
        auto server = weft::spawn([&]() -> weft::task<void> {
            auto c = (co_await l.accept()).value();
            auto req = (co_await read_to_end(c)).value();  // until the client's half-close
            (co_await c.write_all(bytes("got " + req))).value();
        });
        auto c = (co_await weft::tcp_stream::connect(l.local_address().value())).value();
        (co_await c.write_all(bytes("ping"))).value();
        c.shutdown_write().value();
        auto r = (co_await read_to_end(c)).value();
        co_await std::move(server);
        co_return r;
    }());
    EXPECT_EQ(reply, "got ping");
}

TEST_P(tcp, connect_refused_is_an_error_value) {
    weft::runtime rt{options()};
    auto err = rt.block_on([&]() -> weft::task<std::error_code> {
        weft::socket_address closed_port;
        {
            auto l = weft::tcp_listener::bind(loopback()).value();
            closed_port = l.local_address().value();
        }  // closed: nothing listens there now
        auto c = co_await weft::tcp_stream::connect(closed_port);
        co_return c.error();
    }());
    EXPECT_EQ(err, std::errc::connection_refused);
}

// A listener with a full backlog that never accepts makes the kernel drop further SYNs: the
// connect hangs, and its timeout form gives up.
TEST_P(tcp, connect_times_out) {
    weft::runtime rt{options()};
    auto err = rt.block_on([&]() -> weft::task<std::error_code> {
        auto l = weft::tcp_listener::bind(loopback(), {.backlog = 0}).value();
        const auto addr = l.local_address().value();
        std::vector<weft::tcp_stream> fillers;
        std::error_code last;
        for (int i = 0; i < 8 && !last; ++i) {
            auto c = co_await weft::tcp_stream::connect(addr, 200ms);
            if (c) {
                fillers.push_back(std::move(*c));
            } else {
                last = c.error();
            }
        }
        co_return last;
    }());
    EXPECT_EQ(err, std::errc::timed_out);
}

TEST_P(tcp, pending_accept_and_read_are_cancelled) {
    weft::runtime rt{options()};
    auto [accept_err, read_err] =
        rt.block_on([&]() -> weft::task<std::pair<std::error_code, std::error_code>> {
            auto l = weft::tcp_listener::bind(loopback()).value();
            auto l2 = weft::tcp_listener::bind(loopback()).value();
            auto c = (co_await weft::tcp_stream::connect(l2.local_address().value())).value();
            std::error_code a;
            std::error_code r;
            co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
                s.spawn([&]() -> weft::task<void> { a = (co_await l.accept()).error(); });
                s.spawn([&]() -> weft::task<void> {
                    std::array<std::byte, 8> buf{};
                    r = (co_await c.read_some(buf)).error();
                });
                // Both wait: the read in the reactor, the accept there too (epoll) or queued on
                // the listener's multishot accept (io_uring). Cancelled before they got there,
                // they would also report operation_canceled, without testing a pending one.
                co_await weft::test::until([] { return weft::test::io_waits() >= 2; });
                s.request_stop();
            });
            co_return std::pair{a, r};
        }());
    EXPECT_EQ(accept_err, std::errc::operation_canceled);
    EXPECT_EQ(read_err, std::errc::operation_canceled);
}

// A stop requested from outside the waiting tasks' runtime (a plain thread, a thread in
// sync_wait, a task of another runtime) resumes a pending accept and receive on a worker of their
// own runtime, where its shutdown waits for them. The cancellation used to queue them on
// whichever executor asked: the thread in sync_wait or the other runtime's worker ran them.
TEST_P(tcp, accept_and_receive_stopped_from_elsewhere_resume_on_their_own_runtime) {
    for (const auto who : weft::test::every_stopper) {
        weft::runtime rt{options(1)};
        std::thread::id worker;
        std::thread::id accept_on;
        std::thread::id receive_on;
        std::error_code accept_err;
        std::error_code receive_err;
        rt.block_on([&]() -> weft::task<void> {
            auto l = weft::tcp_listener::bind(loopback()).value();
            auto l2 = weft::tcp_listener::bind(loopback()).value();
            auto c = (co_await weft::tcp_stream::connect(l2.local_address().value())).value();
            co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
                s.spawn([&]() -> weft::task<void> {
                    accept_err = (co_await l.accept()).error();
                    accept_on = std::this_thread::get_id();
                });
                s.spawn([&]() -> weft::task<void> {
                    receive_err = (co_await c.receive()).error();
                    receive_on = std::this_thread::get_id();
                });
                // Both wait (one worker: they ran while this task yielded): on epoll in the
                // reactor; on io_uring queued on the listener's multishot accept and on the
                // stream's multishot receive.
                co_await weft::test::until([&] {
                    if (GetParam() == weft::io_backend::epoll) {
                        return weft::test::io_waits() >= 2;
                    }
                    return weft::detail::accept_waiters_for_test.load() == 1 &&
                           weft::test::multishot_armed() == 2;
                });
                worker = std::this_thread::get_id();
                weft::test::stop_from(who, GetParam(), [&] { s.request_stop(); });
            });
        }());
        EXPECT_EQ(accept_err, std::errc::operation_canceled) << weft::test::to_string(who);
        EXPECT_EQ(receive_err, std::errc::operation_canceled) << weft::test::to_string(who);
        EXPECT_EQ(accept_on, worker) << "stopped by " << weft::test::to_string(who);
        EXPECT_EQ(receive_on, worker) << "stopped by " << weft::test::to_string(who);
    }
}

// A worker with IO in flight searches only briefly before it parks in its reactor (its work
// usually comes back as completions), but work queued on it must still reach the other worker:
// two tasks that each wait, without suspending, for the other to start finish only if they run
// at the same time (if they cannot, this hangs under the watchdog).
TEST_P(tcp, work_spreads_to_the_other_worker_while_io_is_in_flight) {
    weft::runtime rt{options()};
    int pairs = 0;
    rt.block_on([&]() -> weft::task<void> {
        auto l = weft::tcp_listener::bind(loopback()).value();
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> { (void)co_await l.accept(); });  // stays pending
            co_await weft::test::until([] { return weft::test::io_waits() >= 1; });
            for (int round = 0; round < 200; ++round) {
                co_await weft::test::meeting_pair();
                ++pairs;
            }
            s.request_stop();
        });
    }());
    EXPECT_EQ(pairs, 200);
}

// arm() failing inside accept's await_suspend: the error reaches the task as an exception and
// no stop callback is left pointing into the awaiter it unwound (a later stop request on the
// task would have run it: ASan reports that as a use after return).
TEST_P(tcp, accept_whose_arm_fails_throws_and_leaves_no_stop_callback) {
    if (GetParam() != weft::io_backend::io_uring) {
        GTEST_SKIP() << "epoll accepts are single-shot: nothing is armed";
    }
    weft::runtime rt{options(1)};
    bool threw = false;
    bool accepted = false;
    rt.block_on([&]() -> weft::task<void> {
        auto l = weft::tcp_listener::bind(loopback()).value();
        const auto addr = l.local_address().value();
        std::atomic<bool> failed{false};
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {
                weft::detail::fail_next_accept_arms_for_test(1);
                try {
                    (void)co_await l.accept();
                } catch (const std::system_error&) {
                    threw = true;
                }
                failed.store(true);
                (void)co_await weft::sleep_for(1h);  // until the stop request below
            });
            while (!failed.load()) {
                co_await weft::yield();
            }
            s.request_stop();  // runs every stop callback the child has registered
            co_return;
        });
        // The listener still works: the next accept arms it.
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {
                auto c = co_await weft::tcp_stream::connect(addr);
                c.value();
            });
            auto a = co_await l.accept();
            accepted = a.has_value();
        });
    }());
    EXPECT_TRUE(threw);
    EXPECT_TRUE(accepted);
}

// A socket first waited on by one runtime (on epoll: registered with that runtime's reactor,
// which goes on delivering its events) and then read by a task of another runtime, while the
// first is alive and idle: the reader resumes on its own runtime's thread (on epoll it was
// pushed onto the first runtime's worker, which then ran it).
TEST_P(tcp, a_reader_of_another_runtime_resumes_on_its_own_runtime) {
    weft::runtime a{options(1)};
    weft::runtime b{options(1)};
    auto [server, client] =
        a.block_on([]() -> weft::task<std::pair<weft::tcp_stream, weft::tcp_stream>> {
            auto l = weft::tcp_listener::bind(loopback()).value();
            auto c = (co_await weft::tcp_stream::connect(l.local_address().value())).value();
            auto s = (co_await l.accept()).value();
            // One wait here (the read parks before the write): on epoll the socket is now
            // registered with runtime a's reactor.
            std::array<std::byte, 1> one{};
            co_await weft::with_scope([&](weft::scope& sc) -> weft::task<void> {
                sc.spawn([&]() -> weft::task<void> { (co_await s.read_exact(one)).value(); });
                co_await weft::yield();
                (co_await c.write_all(bytes("x"))).value();
            });
            co_return std::pair{std::move(s), std::move(c)};
        }());
    constexpr int rounds = 20;
    int on_own_thread = 0;
    std::atomic<int> waiting{0};
    std::thread writer([&, fd = client.native_handle()] {
        for (int i = 1; i <= rounds; ++i) {
            while (waiting.load() < i) {
                std::this_thread::yield();
            }
            const char byte = 'y';
            EXPECT_EQ(::send(fd, &byte, 1, MSG_NOSIGNAL), 1);
        }
    });
    b.block_on([&]() -> weft::task<void> {
        for (int i = 0; i < rounds; ++i) {
            const auto before = std::this_thread::get_id();
            std::array<std::byte, 1> one{};
            waiting.fetch_add(1);  // the writer sends once this read is (most likely) parked
            (co_await server.read_exact(one)).value();
            on_own_thread += std::this_thread::get_id() == before ? 1 : 0;
        }
    }());
    writer.join();
    EXPECT_EQ(on_own_thread, rounds);
}

// A reader that moves between the workers of one runtime leaves its multishot receive armed
// where it is (the ring's worker resumes it); it used to cancel and re-arm it at every move.
TEST_P(tcp, a_receive_stays_armed_when_its_reader_moves_to_another_worker) {
    if (GetParam() != weft::io_backend::io_uring) {
        GTEST_SKIP() << "io_uring only (multishot receive)";
    }
    constexpr int moves = 20;
    auto o = options(2);
    o.consolidate_io = false;  // no IO home: the rule for a receive nobody moves
    weft::runtime rt{o};
    std::uint64_t arms = 0;
    rt.block_on([&]() -> weft::task<void> {
        auto l = weft::tcp_listener::bind(loopback()).value();
        auto c = (co_await weft::tcp_stream::connect(l.local_address().value())).value();
        auto s = (co_await l.accept()).value();
        co_await weft::switch_to_worker(0);
        (co_await c.write_all(bytes("a"))).value();
        (void)(co_await s.receive()).value();  // armed on worker 0's ring
        const std::uint64_t before = weft::detail::multishot_arms.load();
        for (int i = 0; i < moves; ++i) {
            co_await weft::switch_to_worker(static_cast<unsigned>((i + 1) % 2));
            (co_await c.write_all(bytes("b"))).value();
            (void)(co_await s.receive()).value();
        }
        arms = weft::detail::multishot_arms.load() - before;
    }());
    EXPECT_EQ(arms, 0U);
}

TEST_P(tcp, reset_while_writing_is_reported) {
    weft::runtime rt{options()};
    auto err = rt.block_on([&]() -> weft::task<std::error_code> {
        auto l = weft::tcp_listener::bind(loopback()).value();
        auto c = (co_await weft::tcp_stream::connect(l.local_address().value())).value();
        {
            auto s = (co_await l.accept()).value();
            linger lg{1, 0};  // close with RST
            ::setsockopt(s.native_handle(), SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        }
        const std::string chunk(1 << 20, 'x');
        for (int i = 0; i < 64; ++i) {
            auto r = co_await c.write_all(bytes(chunk));
            if (!r) {
                co_return r.error();
            }
        }
        co_return std::error_code{};
    }());
    EXPECT_TRUE(err == std::errc::connection_reset || err == std::errc::broken_pipe)
        << err.message();
}

TEST_P(tcp, thousands_of_concurrent_connections) {
    rlimit rl{};
    ::getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
    int n = rl.rlim_cur >= 25000 ? 10000 : static_cast<int>(rl.rlim_cur / 2 - 64);
    if (const char* e = std::getenv("WEFT_TEST_CONNS")) {
        n = std::atoi(e);
    }
    weft::runtime rt{options()};
    std::atomic<int> ok{0};
    rt.block_on([&]() -> weft::task<void> {
        auto l = weft::tcp_listener::bind(loopback(), {.backlog = 4096}).value();
        const auto addr = l.local_address().value();
        std::vector<weft::tcp_stream> clients;  // outlives the scope's children
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {  // acceptor: one echo task per connection
                co_await weft::with_scope([&](weft::scope& conns) -> weft::task<void> {
                    for (int i = 0; i < n; ++i) {
                        auto c = co_await l.accept();
                        conns.spawn([](weft::tcp_stream c) -> weft::task<void> {
                            std::array<std::byte, 64> buf{};
                            auto r = co_await c.read_some(buf);
                            if (r) {
                                (void)co_await c.write_all(
                                    std::span<const std::byte>(buf.data(), *r));
                            }
                        }(std::move(c).value()));
                    }
                    co_return;
                });
            });
            // Open every client first (all n connections are alive at once), then talk.
            clients.reserve(static_cast<std::size_t>(n));
            for (int i = 0; i < n; ++i) {
                clients.push_back((co_await weft::tcp_stream::connect(addr)).value());
            }
            for (auto& c : clients) {
                s.spawn([&c, &ok]() -> weft::task<void> {
                    (co_await c.write_all(bytes("ping"))).value();
                    std::array<std::byte, 8> buf{};
                    auto r = co_await c.read_some(buf);
                    if (r && *r == 4) {
                        ok.fetch_add(1);
                    }
                });
            }
            co_return;
        });
    }());
    EXPECT_EQ(ok.load(), n);
}

// With the descriptor limit exhausted, accept backs off (sleeping, not spinning) and serves the
// waiting connection as soon as a descriptor is free again.
TEST_P(tcp, accept_recovers_from_fd_exhaustion) {
    rlimit saved{};
    ::getrlimit(RLIMIT_NOFILE, &saved);
    weft::runtime rt{options()};
    auto served = rt.block_on([&]() -> weft::task<bool> {
        auto l = weft::tcp_listener::bind(loopback()).value();
        auto c = (co_await weft::tcp_stream::connect(l.local_address().value())).value();
        // Use up every descriptor below a low limit.
        rlimit low = saved;
        low.rlim_cur = 256;
        ::setrlimit(RLIMIT_NOFILE, &low);
        std::vector<int> hog;
        for (int fd; (fd = ::socket(AF_INET, SOCK_STREAM, 0)) >= 0;) {
            hog.push_back(fd);
        }
        const int backoffs = weft::detail::accept_backoffs_for_test.load();
        auto acceptor = weft::spawn(l.accept());
        // Accept failed with EMFILE and backed off twice: it retried after sleeping, and failed
        // again while no descriptor was free.
        co_await weft::test::until(
            [&] { return weft::detail::accept_backoffs_for_test.load() >= backoffs + 2; });
        const bool stuck = !acceptor.done();
        for (int fd : hog) {
            ::close(fd);
        }
        ::setrlimit(RLIMIT_NOFILE, &saved);
        auto s = co_await std::move(acceptor);
        co_return stuck&& s.has_value();
    }());
    ::setrlimit(RLIMIT_NOFILE, &saved);
    EXPECT_TRUE(served);
}

TEST_P(tcp, receive_returns_data_then_eof) {
    weft::runtime rt{options()};
    auto [text, end] = rt.block_on([&]() -> weft::task<std::pair<std::string, std::error_code>> {
        auto l = weft::tcp_listener::bind(loopback()).value();
        auto c = (co_await weft::tcp_stream::connect(l.local_address().value())).value();
        auto s = (co_await l.accept()).value();
        (co_await s.write_all(bytes("hello"))).value();
        s.shutdown_write().value();
        std::string got;
        std::error_code ec;
        for (;;) {
            auto b = co_await c.receive();
            if (!b) {
                ec = b.error();
                break;
            }
            got.append(reinterpret_cast<const char*>(b->data()), b->size());
        }
        co_return std::pair{got, ec};
    }());
    EXPECT_EQ(text, "hello");
    EXPECT_EQ(end, weft::io_errc::eof);
}

// receive() in steady state takes its memory from a pool: the provided-buffer ring on io_uring,
// the worker's buffer pool on epoll. Counted as malloc calls on the one worker's thread.
TEST_P(tcp, receive_allocates_nothing_per_call_in_steady_state) {
    weft::runtime rt{options(1)};
    const auto [mallocs, reused] =
        rt.block_on([&]() -> weft::task<std::pair<std::size_t, std::size_t>> {
            auto l = weft::tcp_listener::bind(loopback()).value();
            auto c = (co_await weft::tcp_stream::connect(l.local_address().value())).value();
            auto s = (co_await l.accept()).value();
            const std::string msg(256, 'r');
            weft::buffer_pool_stats before{};
            for (int turn = 0; turn < 220; ++turn) {
                if (turn == 20) {
                    before = weft::this_thread_buffer_stats();  // after the warm-up
                }
                (co_await s.write_all(bytes(msg))).value();
                std::size_t got = 0;
                while (got < msg.size()) {
                    got += (co_await c.receive()).value().size();  // dropped at once
                }
            }
            const auto after = weft::this_thread_buffer_stats();
            co_return std::pair{after.mallocs - before.mallocs, after.reused - before.reused};
        }());
    EXPECT_EQ(mallocs, 0U);
    if (GetParam() == weft::io_backend::epoll) {
        EXPECT_GE(reused, 200U);  // one pooled block per receive
    }
}

// More connections hold received data at once than the worker's provided-buffer ring has
// buffers (1024): receive falls back to heap buffers and every byte still arrives; released
// buffers go back to the ring from whichever thread drops them.
TEST_P(tcp, receive_survives_more_held_buffers_than_the_ring_has) {
    weft::runtime rt{options()};
    constexpr int n = 1500;
    auto total = rt.block_on([&]() -> weft::task<std::size_t> {
        auto l = weft::tcp_listener::bind(loopback(), {.backlog = 4096}).value();
        const auto addr = l.local_address().value();
        std::vector<weft::tcp_stream> clients;
        std::vector<weft::tcp_stream> servers;
        for (int i = 0; i < n; ++i) {
            clients.push_back((co_await weft::tcp_stream::connect(addr)).value());
            servers.push_back((co_await l.accept()).value());
        }
        for (auto& s : servers) {
            (co_await s.write_all(bytes("0123456789"))).value();
        }
        std::vector<weft::bytes> held;  // keep every buffer out of the ring
        std::size_t sum = 0;
        for (auto& c : clients) {
            auto b = (co_await c.receive()).value();
            sum += b.size();
            held.push_back(std::move(b));
        }
        // Hand half of them to another task (and maybe another worker) to drop.
        std::vector<weft::bytes> half(held.begin(), held.begin() + n / 2);
        held.erase(held.begin(), held.begin() + n / 2);
        co_await weft::spawn([](std::vector<weft::bytes> v) -> weft::task<void> {
            v.clear();
            co_return;
        }(std::move(half)));
        co_return sum;
    }());
    EXPECT_EQ(total, static_cast<std::size_t>(n) * 10);
}

// The provided-buffer count the fixture checks after every test (io_waits.hpp) is not zero by
// construction: one worker, so one ring, and fewer connections than the ring's first grant
// (grow_by), so no receive runs out of buffers and falls back to the heap. Each chunk held is
// one buffer out of the ring on io_uring (none on epoll, whose receive uses its own pool);
// dropped on the ring's own thread, each is back at once.
TEST_P(tcp, provided_buffers_held_are_counted_out_until_dropped) {
    weft::runtime rt{options(1)};
    constexpr int n = 100;
    static_assert(n < static_cast<int>(weft::detail::provided_buffer_ring::grow_by));
    struct counts {
        std::int64_t chunks = 0;
        std::int64_t out_while_held = 0;
        std::int64_t out_after_drop = 0;
    };
    const counts c = rt.block_on([&]() -> weft::task<counts> {
        auto l = weft::tcp_listener::bind(loopback()).value();
        const auto addr = l.local_address().value();
        std::vector<weft::tcp_stream> clients;
        std::vector<weft::tcp_stream> servers;
        for (int i = 0; i < n; ++i) {
            clients.push_back((co_await weft::tcp_stream::connect(addr)).value());
            servers.push_back((co_await l.accept()).value());
        }
        for (auto& s : servers) {
            (co_await s.write_all(bytes("0123456789"))).value();
        }
        std::vector<weft::bytes> held;
        for (auto& client : clients) {
            std::size_t got = 0;
            while (got < 10) {
                auto b = (co_await client.receive()).value();
                got += b.size();
                held.push_back(std::move(b));
            }
        }
        counts r;
        r.chunks = static_cast<std::int64_t>(held.size());
        r.out_while_held = weft::test::provided_buffers_out.load();
        held.clear();
        r.out_after_drop = weft::test::provided_buffers_out.load();
        co_return r;
    }());
    EXPECT_GE(c.chunks, n);
    if (GetParam() == weft::io_backend::io_uring) {
        EXPECT_EQ(c.out_while_held, c.chunks);
    } else {
        EXPECT_EQ(c.out_while_held, 0);
    }
    EXPECT_EQ(c.out_after_drop, 0);
}

// Connections that arrive while nobody accepts wait (on io_uring: accepted by the multishot
// operation, up to its queue limit of 128, the rest in the kernel's backlog) and are all handed
// out, each once, when accepting resumes.
TEST_P(tcp, connections_made_while_nobody_accepts_are_all_served) {
    weft::runtime rt{options()};
    constexpr int n = 300;
    auto seen = rt.block_on([&]() -> weft::task<std::vector<int>> {
        auto l = weft::tcp_listener::bind(loopback(), {.backlog = 4096}).value();
        const auto addr = l.local_address().value();
        std::vector<weft::tcp_stream> clients;
        clients.push_back((co_await weft::tcp_stream::connect(addr)).value());
        auto first = (co_await l.accept()).value();  // arms the multishot accept on io_uring
        for (int i = 1; i < n; ++i) {
            clients.push_back((co_await weft::tcp_stream::connect(addr)).value());
            const std::string id = std::to_string(i) + "\n";
            (co_await clients.back().write_all(bytes(id))).value();
        }
        // Every connection is in the backlog once connect returned. On io_uring the multishot
        // accept takes them until max_ready wait unclaimed, then is cancelled (the rest stay in
        // the backlog): wait until it has stopped, so every CQE it posts has been reaped.
        co_await weft::test::until([] { return weft::test::multishot_armed() == 0; });
        const bool uring = GetParam() == weft::io_backend::io_uring;
        EXPECT_GE(weft::detail::accepted_unclaimed_for_test.load(),
                  uring ? static_cast<int>(weft::detail::accept_queue::max_ready) : 0);
        std::vector<int> ids;
        for (int i = 1; i < n; ++i) {
            auto s = (co_await l.accept()).value();
            std::string line;
            std::array<std::byte, 16> buf{};
            while (line.find('\n') == std::string::npos) {
                const std::size_t got = (co_await s.read_some(buf)).value();
                line.append(reinterpret_cast<const char*>(buf.data()), got);
            }
            ids.push_back(std::stoi(line));
        }
        co_return ids;
    }());
    std::sort(seen.begin(), seen.end());
    std::vector<int> want(n - 1);
    std::iota(want.begin(), want.end(), 1);
    EXPECT_EQ(seen, want);
}

// Several tasks accept on one listener at once (on any workers): every connection goes to
// exactly one of them.
TEST_P(tcp, concurrent_acceptors_share_one_listener) {
    weft::runtime rt{options()};
    constexpr int acceptors = 8;
    constexpr int per = 25;
    auto seen = rt.block_on([&]() -> weft::task<std::vector<int>> {
        auto l = weft::tcp_listener::bind(loopback(), {.backlog = 4096}).value();
        const auto addr = l.local_address().value();
        std::vector<int> ids;
        std::mutex mu;
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            for (int a = 0; a < acceptors; ++a) {
                s.spawn([&]() -> weft::task<void> {
                    for (int i = 0; i < per; ++i) {
                        auto c = (co_await l.accept()).value();
                        std::array<std::byte, 4> buf{};
                        (co_await c.read_exact(buf)).value();
                        int id = 0;
                        std::memcpy(&id, buf.data(), sizeof(id));
                        std::lock_guard lock(mu);
                        ids.push_back(id);
                    }
                });
            }
            for (int i = 0; i < acceptors * per; ++i) {
                auto c = (co_await weft::tcp_stream::connect(addr)).value();
                (co_await c.write_all(std::as_bytes(std::span{&i, 1}))).value();
            }
            co_return;
        });
        co_return ids;
    }());
    std::sort(seen.begin(), seen.end());
    std::vector<int> want(acceptors * per);
    std::iota(want.begin(), want.end(), 0);
    EXPECT_EQ(seen, want);
}

// A listener may outlive the runtime it accepted on: the ring lets go of its multishot
// operation when the runtime stops, a connection accepted meanwhile is handed out by the next
// runtime, and one never taken is closed with the listener.
// A listener outlives runtime after runtime. On io_uring each runtime arms the multishot accept
// on its own ring, and every round waits for connections that arrive while it is armed: a
// wake-up taken by an ended runtime's ring would leave the connection in the backlog (Recv-Q 1)
// and the round waits until the watchdog fails the test.
TEST_P(tcp, listener_outlives_its_runtime_and_serves_in_the_next) {
    constexpr int rounds = 40;
    const auto leftovers_before = weft::detail::multishot_detach_leftovers.load();
    auto l = weft::tcp_listener::bind(loopback()).value();
    const auto addr = l.local_address().value();
    std::vector<weft::tcp_stream> clients;
    std::vector<int> served;
    int connected = 0;
    auto connect_next = [&]() -> weft::task<void> {
        clients.push_back((co_await weft::tcp_stream::connect(addr)).value());
        const std::array id{static_cast<std::byte>(connected++)};
        (co_await clients.back().write_all(id)).value();
    };
    auto serve_one = [&]() -> weft::task<void> {
        auto s = (co_await l.accept()).value();
        std::array<std::byte, 1> id{};
        (co_await s.read_exact(id)).value();
        served.push_back(static_cast<int>(id[0]));
    };
    for (int round = 0; round < rounds; ++round) {
        weft::runtime rt{options()};
        rt.block_on([&]() -> weft::task<void> {
            if (round == 0) {
                co_await connect_next();
            }
            // Round 0: from the backlog. Later rounds: the connection the previous runtime's
            // multishot accept took and queued on the listener (io_uring; handed out without
            // arming), or the backlog's (epoll).
            co_await serve_one();
            // (On io_uring in later rounds: arms this ring's multishot accept, which finds the
            // connection in the backlog. Sequential rather than when_all(accept, connect): in a
            // Debug TSan build that drew the race clang 16 -O0 reports in when_all's run_members,
            // see WEFT_PUBLISHES_HANDLE in worker_base.hpp.)
            co_await connect_next();
            co_await serve_one();
            // Left for the next runtime: on io_uring, once this runtime's armed accept took it
            // (the wait that hangs if an ended ring took the wake-up); on epoll, in the backlog.
            co_await connect_next();
            co_await weft::test::until([] {
                return weft::test::multishot_armed() == 0 ||
                       weft::detail::accepted_unclaimed_for_test.load() >= 1;
            });
        }());
    }
    // Every runtime's detach saw its multishot accept end (none left to the ring's exit).
    EXPECT_EQ(weft::detail::multishot_detach_leftovers.load(), leftovers_before);
    std::vector<int> expected(2 * rounds);
    std::iota(expected.begin(), expected.end(), 0);
    EXPECT_EQ(served, expected);
    l.close();
    weft::runtime rt{options()};
    auto end = rt.block_on([&]() -> weft::task<std::error_code> {
        std::array<std::byte, 1> buf{};
        co_return (co_await clients.back().read_some(buf)).error();
    }());
    EXPECT_TRUE(end == weft::io_errc::eof || end == std::errc::connection_reset) << end.message();
}

// A stream written as numbered bytes: byte i is i % 251.
auto pattern(std::size_t from, std::size_t n) -> std::vector<std::byte> {
    std::vector<std::byte> v(n);
    for (std::size_t i = 0; i < n; ++i) {
        v[i] = static_cast<std::byte>((from + i) % 251);
    }
    return v;
}

// A connected pair over a fresh loopback listener: {client, server}.
auto connected_pair() -> weft::task<std::pair<weft::tcp_stream, weft::tcp_stream>> {
    auto l = weft::tcp_listener::bind(loopback()).value();
    auto c = (co_await weft::tcp_stream::connect(l.local_address().value())).value();
    auto s = (co_await l.accept()).value();
    co_return std::pair{std::move(c), std::move(s)};
}

// Writes all of `data`, then half-closes: the reader gets eof right after the last byte.
auto write_then_eof(weft::tcp_stream& s, std::span<const std::byte> data) -> weft::task<void> {
    (co_await s.write_all(data)).value();
    s.shutdown_write().value();
}

// receive() (on io_uring: the multishot receive) and read_some / read_exact on one stream take
// the bytes in order, none twice, none lost, also when read_some takes part of a chunk.
TEST_P(tcp, receive_and_read_some_mixed_keep_the_byte_order) {
    weft::runtime rt{options()};
    constexpr std::size_t total = 300'000;
    auto ok = rt.block_on([&]() -> weft::task<bool> {
        auto [c, s] = co_await connected_pair();
        const auto data = pattern(0, total);
        auto writer = weft::spawn(write_then_eof(s, data));
        std::vector<std::byte> got;
        std::array<std::byte, 7> small{};
        for (int turn = 0;; ++turn) {
            if (turn % 3 == 0) {
                auto b = co_await c.receive();
                if (!b) {
                    break;
                }
                got.insert(got.end(), b->data(), b->data() + b->size());
            } else if (turn % 3 == 1) {
                auto n = co_await c.read_some(small);  // leaves most of a chunk behind
                if (!n) {
                    break;
                }
                got.insert(got.end(), small.begin(), small.begin() + static_cast<long>(*n));
            } else {
                std::array<std::byte, 1000> exact{};
                const std::size_t want = std::min(exact.size(), total - got.size());
                if (want == 0) {
                    continue;
                }
                (co_await c.read_exact(std::span(exact.data(), want))).value();
                got.insert(got.end(), exact.begin(), exact.begin() + static_cast<long>(want));
            }
        }
        co_await std::move(writer);
        co_return got == data;
    }());
    EXPECT_TRUE(ok);
}

// Request/response turns of random sizes. On epoll a read that returns less than asked marks the
// socket drained, and the next read waits for the next readiness event instead of trying: every
// later byte and the final eof must still arrive (a lost edge would hang here, under the
// watchdog), through receive() and read_some alike.
TEST_P(tcp, a_drained_socket_still_gets_every_later_byte_and_the_eof) {
    weft::runtime rt{options()};
    constexpr int turns = 2000;
    auto ok = rt.block_on([&]() -> weft::task<bool> {
        auto [c, s] = co_await connected_pair();
        auto server = weft::spawn([&s]() -> weft::task<std::size_t> {
            std::size_t echoed = 0;
            for (;;) {
                auto b = co_await s.receive();
                if (!b) {
                    EXPECT_EQ(b.error(), weft::io_errc::eof);
                    co_return echoed;
                }
                (co_await s.write_all(b->span())).value();
                echoed += b->size();
            }
        });
        std::mt19937 rng(11);
        std::size_t sent = 0;
        bool same = true;
        for (int t = 0; t < turns; ++t) {
            const auto msg = pattern(sent, 1 + rng() % 3000);
            (co_await c.write_all(msg)).value();
            std::vector<std::byte> back(msg.size());
            std::size_t got = 0;
            while (got < back.size()) {
                // Ask for more than is coming, so most reads come back short.
                std::array<std::byte, 4096> buf{};
                const auto n = (co_await c.read_some(buf)).value();
                std::memcpy(back.data() + got, buf.data(), std::min(n, back.size() - got));
                got += n;
            }
            same = same && got == msg.size() && back == msg;
            sent += msg.size();
        }
        c.shutdown_write().value();
        const std::size_t echoed = co_await std::move(server);
        co_return same&& echoed == sent;
    }());
    EXPECT_TRUE(ok);
}

// A reader that stops reading: on io_uring the multishot receive queues a few chunks, then is
// cancelled so the rest waits in the socket (flow control), and re-armed when reading resumes.
TEST_P(tcp, lagging_reader_gets_every_byte_after_a_pause) {
    weft::runtime rt{options()};
    constexpr std::size_t total = 2 << 20;
    auto ok = rt.block_on([&]() -> weft::task<bool> {
        auto [c, s] = co_await connected_pair();
        const auto data = pattern(0, total);
        auto writer = weft::spawn(write_then_eof(s, data));
        std::vector<std::byte> got;
        const int lag_cancels = weft::detail::recv_lag_cancels_for_test.load();
        auto first = (co_await c.receive()).value();  // arms the multishot receive
        got.insert(got.end(), first.data(), first.data() + first.size());
        // The writer fills every buffer meanwhile: on io_uring the multishot receive queues
        // max_ready chunks and is cancelled (no longer armed), the rest waits in the socket.
        // Then the writer waits for room (on epoll in the reactor; on io_uring its send is in
        // flight), or has finished: loopback's socket buffers may grow to hold all 2 MiB.
        co_await weft::test::until([&] {
            return weft::test::multishot_armed() == 0 &&
                   (weft::test::io_waits() >= 1 || writer.done());
        });
        if (GetParam() == weft::io_backend::io_uring) {  // it stopped for lagging, not run dry
            EXPECT_GT(weft::detail::recv_lag_cancels_for_test.load(), lag_cancels);
        }
        for (;;) {
            auto b = co_await c.receive();
            if (!b) {
                EXPECT_EQ(b.error(), weft::io_errc::eof);
                break;
            }
            got.insert(got.end(), b->data(), b->data() + b->size());
        }
        co_await std::move(writer);
        co_return got == data;
    }());
    EXPECT_TRUE(ok);
}

// Receives cancelled at random moments (some while a chunk is arriving) lose nothing: what
// arrived is handed to the next receive.
TEST_P(tcp, receives_cancelled_at_random_lose_no_data) {
    weft::runtime rt{options()};
    constexpr std::size_t total = 400'000;
    auto ok = rt.block_on([&]() -> weft::task<bool> {
        auto [c, s] = co_await connected_pair();
        const auto data = pattern(0, total);
        std::atomic<int> timeouts{0};
        auto writer = weft::spawn([&]() -> weft::task<void> {
            for (std::size_t off = 0; off < total; off += 1000) {  // in dribs, with pauses
                const std::size_t n = std::min<std::size_t>(1000, total - off);
                (co_await s.write_all(std::span(data).subspan(off, n))).value();
                if (off % 40'000 == 0) {
                    // Pauses until a receive has timed out: some surely do.
                    const int seen = timeouts.load();
                    co_await weft::test::until([&] { return timeouts.load() > seen; });
                }
            }
            s.shutdown_write().value();
        });
        std::vector<std::byte> got;
        std::minstd_rand rng(7);
        for (;;) {
            auto r =
                co_await weft::with_timeout(std::chrono::microseconds(rng() % 1500), c.receive());
            if (!r) {
                timeouts.fetch_add(1);  // cancelled while waiting
                continue;
            }
            if (!*r) {
                EXPECT_EQ(r->error(), weft::io_errc::eof);
                break;
            }
            got.insert(got.end(), (*r)->data(), (*r)->data() + (*r)->size());
        }
        co_await std::move(writer);
        EXPECT_GT(timeouts.load(), 0);
        co_return got == data;
    }());
    EXPECT_TRUE(ok);
}

// A stream that received on an io_uring runtime (its multishot receive armed on that ring, with
// chunks queued) and is then read on another runtime of the backend under test gets every
// byte, in order: the operation ends on the first ring and what it queued comes first. Once
// with the first runtime still running (its ring cancels the operation), once after it ended
// (its ring let go of the operation when it detached).
TEST_P(tcp, stream_moved_to_another_runtime_keeps_every_byte) {
    try {
        (void)weft::resolve_io_backend(weft::io_backend::io_uring);
    } catch (const std::system_error&) {
        GTEST_SKIP() << "io_uring unavailable here";
    }
    constexpr std::size_t first_part = 64 * 1024;
    constexpr std::size_t total = 1 << 20;
    const auto data = pattern(0, total);
    for (const bool first_still_running : {true, false}) {
        auto first = std::make_unique<weft::runtime>(
            weft::io_runtime_options(2, weft::io_backend::io_uring));
        std::vector<std::byte> got;
        auto streams =
            first->block_on([&]() -> weft::task<std::pair<weft::tcp_stream, weft::tcp_stream>> {
                auto p = co_await connected_pair();
                (co_await p.second.write_all(std::span(data).first(first_part))).value();
                auto b = (co_await p.first.receive()).value();  // arms the multishot receive
                got.insert(got.end(), b.data(), b.data() + b.size());
                // More chunks queue meanwhile: wait until the receive has stopped (64 KiB is
                // more than max_ready chunks: flow control cancels it), every CQE reaped.
                co_await weft::test::until([] { return weft::test::multishot_armed() == 0; });
                co_return std::move(p);
            }());
        if (!first_still_running) {
            first.reset();
        }
        weft::tcp_stream& c = streams.first;
        weft::tcp_stream& s = streams.second;
        weft::runtime second{options()};
        const bool ok = second.block_on([&]() -> weft::task<bool> {
            auto writer = weft::spawn(write_then_eof(s, std::span(data).subspan(first_part)));
            std::array<std::byte, 3000> buf{};
            for (int turn = 0;; ++turn) {
                if (turn % 2 == 0) {
                    auto b = co_await c.receive();
                    if (!b) {
                        EXPECT_EQ(b.error(), weft::io_errc::eof);
                        break;
                    }
                    got.insert(got.end(), b->data(), b->data() + b->size());
                } else {
                    auto n = co_await c.read_some(buf);
                    if (!n) {
                        EXPECT_EQ(n.error(), weft::io_errc::eof);
                        break;
                    }
                    got.insert(got.end(), buf.begin(), buf.begin() + static_cast<long>(*n));
                }
            }
            co_await std::move(writer);
            co_return got == data;
        }());
        EXPECT_TRUE(ok) << (first_still_running ? "first runtime running" : "first runtime gone");
    }
}

// SQEs the kernel has taken from every io_uring of this process (SqHead in each ring's fdinfo).
auto sqes_submitted() -> unsigned long {
    unsigned long sum = 0;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
        std::error_code ec;
        const auto target = std::filesystem::read_symlink(e.path(), ec);
        if (ec || target.string().find("io_uring") == std::string::npos) {
            continue;
        }
        std::ifstream info("/proc/self/fdinfo/" + e.path().filename().string());
        for (std::string line; std::getline(info, line);) {
            if (line.rfind("SqHead:", 0) == 0) {
                sum += std::stoul(line.substr(7));
            }
        }
    }
    return sum;
}

// Plain blocking client sockets (no weft, no SQEs of their own).
auto plain_connect(const weft::socket_address& addr) -> int {
    const int fd = ::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_EQ(::connect(fd, addr.data(), addr.size()), 0);
    return fd;
}

// The multishot operations are what they claim: 64 connections accepted and 64 chunks
// received cost a handful of SQEs, not one per accept and one per receive.
TEST_P(tcp, multishot_accept_and_receive_take_one_sqe_for_many_completions) {
    if (GetParam() != weft::io_backend::io_uring) {
        GTEST_SKIP() << "io_uring only";
    }
    constexpr int n = 64;
    weft::runtime rt{options(1)};
    auto [accept_sqes, receive_sqes] =
        rt.block_on([&]() -> weft::task<std::pair<unsigned long, unsigned long>> {
            auto l = weft::tcp_listener::bind(loopback()).value();
            const auto addr = l.local_address().value();
            std::vector<int> clients;
            std::vector<weft::tcp_stream> servers;
            const unsigned long before_accepts = sqes_submitted();
            std::thread connector([&] {
                for (int i = 0; i < n; ++i) {
                    clients.push_back(plain_connect(addr));
                }
            });
            for (int i = 0; i < n; ++i) {
                servers.push_back((co_await l.accept()).value());
            }
            connector.join();
            const unsigned long accepts = sqes_submitted() - before_accepts;

            // One chunk at a time: the writer waits for each to be received.
            std::atomic<int> received{0};
            const unsigned long before_receives = sqes_submitted();
            std::thread writer([&] {
                for (int i = 0; i < n; ++i) {
                    EXPECT_EQ(::send(clients[0], "x", 1, MSG_NOSIGNAL), 1);
                    while (received.load() <= i) {
                        std::this_thread::yield();
                    }
                }
            });
            for (int i = 0; i < n; ++i) {
                auto b = (co_await servers[0].receive()).value();
                received.fetch_add(static_cast<int>(b.size()));
            }
            writer.join();
            const unsigned long receives = sqes_submitted() - before_receives;
            for (int fd : clients) {
                ::close(fd);
            }
            co_return std::pair{accepts, receives};
        }());
    // Besides the one multishot operation: the worker's wake-up eventfd read re-arms after each
    // wake-up from another thread; a few of those, never one per completion.
    EXPECT_LT(accept_sqes, static_cast<unsigned long>(n / 2));
    EXPECT_LT(receive_sqes, static_cast<unsigned long>(n / 2));
}

// ---- IO home (runtime_options::consolidate_io) ----------------------------------------------

auto echo_by_receive(weft::tcp_stream s) -> weft::task<void> {
    for (;;) {
        auto b = co_await s.receive();
        if (!b) {
            co_return;  // eof
        }
        auto w = co_await s.write_all(b->span());
        if (!w) {
            co_return;
        }
    }
}

// `hashed_to`, when given (two counters), counts the accepted sockets by the worker of 2 they
// hash to (detail::spread_worker).
auto accept_and_echo(weft::tcp_listener& l, int n, std::atomic<int>* hashed_to = nullptr)
    -> weft::task<void> {
    co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
        for (int i = 0; i < n; ++i) {
            weft::tcp_stream c = (co_await l.accept()).value();
            if (hashed_to != nullptr) {
                hashed_to[weft::detail::spread_worker(c.native_handle(), 2)].fetch_add(1);
            }
            s.spawn(echo_by_receive(std::move(c)));
        }
    });
}

// One round over plain blocking sockets: each sends `size` bytes made of its index and the round,
// then reads them back. True if every byte came back, in order.
auto echo_round(const std::vector<int>& fds, int round, std::size_t size) -> bool {
    auto pattern = [&](std::size_t i, std::size_t k) {
        return static_cast<char>((i * 131 + static_cast<std::size_t>(round) * 7 + k * 13) & 0xff);
    };
    std::string msg(size, '\0');
    for (std::size_t i = 0; i < fds.size(); ++i) {
        for (std::size_t k = 0; k < size; ++k) {
            msg[k] = pattern(i, k);
        }
        for (std::size_t done = 0; done < size;) {
            const ssize_t n = ::send(fds[i], msg.data() + done, size - done, MSG_NOSIGNAL);
            if (n <= 0) {
                return false;
            }
            done += static_cast<std::size_t>(n);
        }
    }
    std::string got(size, '\0');
    for (std::size_t i = 0; i < fds.size(); ++i) {
        for (std::size_t done = 0; done < size;) {
            const ssize_t n = ::recv(fds[i], got.data() + done, size - done, 0);
            if (n <= 0) {
                return false;
            }
            done += static_cast<std::size_t>(n);
        }
        for (std::size_t k = 0; k < size; ++k) {
            if (got[k] != pattern(i, k)) {
                return false;
            }
        }
    }
    return true;
}

auto receives_armed_on(int worker) -> int {
    return weft::detail::recv_armed_on_worker_for_test[worker].load();
}

// The IO home moves every stream's multishot receive to the home's ring at its reader's next
// wait, once per change (forced here: home 0, 1, 0, none, 1, none, 0, 1): a switch from one
// settled home to the other moves every stream exactly once, more traffic then moves none, and
// every byte comes back in order. When the home is dropped, every receive its socket hashes
// away from the home (detail::spread_worker) moves, and a receive moves at most once. On epoll
// nothing is armed and nothing moves.
TEST_P(tcp, receives_follow_the_io_home_back_and_forth_with_their_bytes_in_order) {
    constexpr int conns = 8;
    const bool uring = GetParam() == weft::io_backend::io_uring;
    auto o = options(2);
    o.consolidate_io = true;
    weft::runtime rt{o};
    auto set_home = [&](int w) { weft::test::force_io_home(rt, w); };
    set_home(-1);  // and the automatic choice off
    std::optional<weft::tcp_listener> l;
    rt.block_on([&]() -> weft::task<void> {
        l.emplace(weft::tcp_listener::bind(loopback()).value());
        co_return;
    }());
    std::atomic<int> hashed_to[2] = {};
    auto server = rt.spawn(accept_and_echo(*l, conns, hashed_to));
    const auto addr = l->local_address().value();
    std::vector<int> fds;
    for (int i = 0; i < conns; ++i) {
        fds.push_back(plain_connect(addr));
    }
    int round = 0;
    ASSERT_TRUE(echo_round(fds, round++, 1024));  // armed wherever their readers first ran
    ASSERT_EQ(hashed_to[0].load() + hashed_to[1].load(), conns);
    const std::uint64_t start = weft::detail::recv_home_moves.load();
    constexpr int homes[] = {0, 1, 0, -1, 1, -1, 0, 1};
    int settled_home = -1;
    int exact_switches = 0;
    int prev = -1;
    for (int home : homes) {
        const std::uint64_t before = weft::detail::recv_home_moves.load();
        // Settled on the other home (checked below): nothing is moving, all move now.
        const bool from_the_other = uring && home >= 0 && prev == 1 - home;
        prev = home;
        set_home(home);
        if (uring && home >= 0) {
            while (receives_armed_on(home) != conns) {
                ASSERT_TRUE(echo_round(fds, round++, 1024));
            }
        } else {
            ASSERT_TRUE(echo_round(fds, round++, 1024));
            ASSERT_TRUE(echo_round(fds, round++, 1024));
        }
        const std::uint64_t moved = weft::detail::recv_home_moves.load() - before;
        if (from_the_other) {
            EXPECT_EQ(moved, static_cast<std::uint64_t>(conns))
                << "home " << home << " armed " << receives_armed_on(0) << "/"
                << receives_armed_on(1);
            ++exact_switches;
        } else {
            // After no home, a move begun then (to a thief) may be counted here and be followed
            // by the move to this home: at most two per stream.
            EXPECT_LE(moved, static_cast<std::uint64_t>(2 * conns)) << "home " << home;
        }
        // Settled: more traffic (up to 16 KiB a message, several chunks) moves nothing.
        for (std::size_t size : {1024U, 3000U, 16384U}) {
            ASSERT_TRUE(echo_round(fds, round++, size));
        }
        if (home >= 0) {
            EXPECT_EQ(weft::detail::recv_home_moves.load() - before, moved) << "home " << home;
        }
        if (uring && home >= 0) {
            EXPECT_EQ(receives_armed_on(home), conns);
            EXPECT_EQ(receives_armed_on(1 - home), 0);
        }
        if (uring && home < 0 && settled_home >= 0) {
            // The home dropped: every stream its socket hashes away from it moves, once.
            EXPECT_GE(moved, static_cast<std::uint64_t>(hashed_to[1 - settled_home].load()))
                << "home " << settled_home << " dropped";
        }
        settled_home = home;
    }
    for (int fd : fds) {
        ::close(fd);
    }
    rt.block_on([&]() -> weft::task<void> {
        co_await std::move(server);
        l.reset();
    }());
    const std::uint64_t moves = weft::detail::recv_home_moves.load() - start;
    if (uring) {
        EXPECT_EQ(exact_switches, 3);  // 0 -> 1 -> 0 and the last 0 -> 1
        EXPECT_GE(moves, static_cast<std::uint64_t>(3 * conns));
        // At most one move per stream per change of home.
        EXPECT_LE(moves, static_cast<std::uint64_t>(std::size(homes) * conns));
    } else {
        EXPECT_EQ(moves, 0U);
    }
    EXPECT_EQ(receives_armed_on(0) + receives_armed_on(1), 0);
}

// Chosen by the runtime (no test hook): light traffic (one round trip at a time over 8
// connections) fits one worker, so a home is chosen and every receive gathers on its ring.
TEST_P(tcp, light_traffic_gathers_every_receive_on_the_chosen_home) {
    constexpr int conns = 8;
    const bool uring = GetParam() == weft::io_backend::io_uring;
    auto o = options(2);
    o.consolidate_io = true;
    weft::runtime rt{o};
    std::optional<weft::tcp_listener> l;
    rt.block_on([&]() -> weft::task<void> {
        l.emplace(weft::tcp_listener::bind(loopback()).value());
        co_return;
    }());
    auto server = rt.spawn(accept_and_echo(*l, conns));
    std::vector<int> fds;
    for (int i = 0; i < conns; ++i) {
        fds.push_back(plain_connect(l->local_address().value()));
    }
    auto home = [&] {
        return rt.block_on(
            []() -> weft::task<int> { co_return weft::detail::current_io_home().worker; }());
    };
    // Until the runtime chose a home and (io_uring) every receive is armed there; the watchdog
    // fails the test if it never does.
    int round = 0;
    for (;;) {
        ASSERT_TRUE(echo_round(fds, round++, 512));
        const int h = home();
        if (h >= 0 && (!uring || receives_armed_on(h) == conns)) {
            break;
        }
    }
    const std::uint64_t moves = weft::detail::recv_home_moves.load();
    for (int i = 0; i < 20; ++i) {
        ASSERT_TRUE(echo_round(fds, round++, 512));
    }
    if (home() >= 0) {  // (still light: nothing spread them)
        EXPECT_EQ(weft::detail::recv_home_moves.load(), moves) << "moved again while settled";
    }
    for (int fd : fds) {
        ::close(fd);
    }
    rt.block_on([&]() -> weft::task<void> {
        co_await std::move(server);
        l.reset();
    }());
}

// A task whose operations all complete at once (it drains a channel it keeps full) spends its
// turn's budget and yields (weft::channel), and the connections on its worker go on being served
// meanwhile: the round trips of a client thread to an echo on the same, only, worker all
// complete. On io_uring the echo's receive waits in a multishot operation, which the ring's
// count of operations in flight leaves out: the spent turn found nothing else waiting, the task
// kept its worker, and the ping's completion was never reaped.
TEST_P(tcp, a_task_that_never_waits_leaves_the_connections_on_its_worker_served) {
    constexpr int round_trips = 20;
    weft::runtime rt{options(1)};
    std::atomic<int> replies{0};
    std::thread client;
    rt.block_on([&]() -> weft::task<void> {
        auto l = weft::tcp_listener::bind(loopback()).value();
        auto c = (co_await weft::tcp_stream::connect(l.local_address().value())).value();
        auto s = (co_await l.accept()).value();
        const int fd = c.native_handle();
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);  // the client thread blocks
        client = std::thread([fd, &replies] {
            for (int i = 0; i < round_trips; ++i) {
                ASSERT_EQ(::send(fd, "ping", 4, MSG_NOSIGNAL), 4);
                char buf[4];
                for (std::size_t got = 0; got < 4;) {
                    const ssize_t n = ::recv(fd, buf, sizeof(buf) - got, 0);
                    ASSERT_GT(n, 0);
                    got += static_cast<std::size_t>(n);
                }
                replies.fetch_add(1);
            }
        });
        weft::channel<int> always_ready{1};
        co_await weft::with_scope([&](weft::scope& sc) -> weft::task<void> {
            sc.spawn([&]() -> weft::task<void> {  // echo
                for (;;) {
                    auto chunk = co_await s.receive();
                    if (!chunk) {
                        co_return;
                    }
                    (co_await s.write_all(chunk->span())).value();
                }
            });
            while (replies.load() < round_trips) {
                (co_await always_ready.send(1)).value();
                (void)(co_await always_ready.recv()).value();
            }
            sc.request_stop();  // the echo's pending receive
        });
        client.join();
    }());
    EXPECT_EQ(replies.load(), round_trips);
}

WEFT_TEST_ON_BOTH_BACKENDS(tcp);

}  // namespace
