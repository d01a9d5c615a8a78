// weft::io stress tests, run under ThreadSanitizer in CI, on both backends. They count: every
// connection a client makes is served exactly once while several tasks accept on one listener
// and their waits are cancelled at random moments (a connection the kernel handed to a waiter
// that was being cancelled must go to the next accept, never be dropped). And every byte of
// streams whose receives are moved between the workers' rings as fast as the IO home can be
// changed (runtime_options::consolidate_io) arrives once, in order, with no buffer leaked.

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "io/backend_test.hpp"
#include "io/io_waits.hpp"
#include "recv_queue.hpp"
#include "test_util.hpp"
#include "weft/core/scope.hpp"
#include "weft/io/tcp_listener.hpp"
#include "weft/io/tcp_stream.hpp"
#include "weft/sched/detail/io_home.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"

namespace {

using weft::test::scaled;

class io_stress : public weft::test::backend_test {};

// One byte in, the same byte back.
auto echo_one(weft::tcp_stream c) -> weft::task<void> {
    std::array<std::byte, 1> b{};
    if (co_await c.read_exact(b)) {
        (void)co_await c.write_all(b);
    }
}

TEST_P(io_stress, accepts_cancelled_at_random_never_lose_a_connection) {
    const int n = scaled(2000);
    constexpr int acceptors = 4;
    constexpr int clients = 8;
    weft::runtime rt{options()};
    std::atomic<int> served{0};
    std::atomic<int> echoed{0};
    std::atomic<int> cancelled_waits{0};
    rt.block_on([&]() -> weft::task<void> {
        auto l = weft::tcp_listener::bind(weft::socket_address::parse("127.0.0.1", 0).value(),
                                          {.backlog = 4096})
                     .value();
        const auto addr = l.local_address().value();
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            for (int a = 0; a < acceptors; ++a) {
                s.spawn([&, a]() -> weft::task<void> {
                    std::minstd_rand rng(static_cast<unsigned>(a) + 1);
                    co_await weft::with_scope([&](weft::scope& conns) -> weft::task<void> {
                        while (served.load() < n) {
                            // Give up after 0-2 ms: waits end while connections arrive.
                            const auto limit = std::chrono::microseconds(rng() % 2000);
                            auto r = co_await weft::with_timeout(limit, l.accept());
                            if (!r) {
                                cancelled_waits.fetch_add(1);
                                continue;
                            }
                            auto c = std::move(*r).value();  // anything but a stream: fail
                            served.fetch_add(1);
                            conns.spawn(echo_one(std::move(c)));
                        }
                    });
                });
            }
            for (int k = 0; k < clients; ++k) {
                s.spawn([&, k]() -> weft::task<void> {
                    for (int i = k; i < n; i += clients) {
                        auto c = (co_await weft::tcp_stream::connect(addr)).value();
                        const auto sent = static_cast<std::byte>(i & 0xff);
                        std::array<std::byte, 1> b{sent};
                        (co_await c.write_all(b)).value();
                        (co_await c.read_exact(b)).value();  // eof here = a lost connection
                        if (b[0] == sent) {
                            echoed.fetch_add(1);
                        }
                    }
                });
            }
            co_return;
        });
    }());
    EXPECT_EQ(served.load(), n);
    EXPECT_EQ(echoed.load(), n);
    EXPECT_GT(cancelled_waits.load(), 0);  // the race the test is about did happen
}

WEFT_TEST_ON_BOTH_BACKENDS(io_stress);

class io_home_stress : public weft::test::io_wait_test {};

// Echo through receive() (whole chunks) or read_some (a part of a chunk, the rest put back).
auto echo_stream(weft::tcp_stream c, bool by_parts) -> weft::task<void> {
    std::array<std::byte, 1000> part{};
    for (;;) {
        if (by_parts) {
            auto n = co_await c.read_some(part);
            if (!n) {
                co_return;
            }
            if (!co_await c.write_all(std::span<const std::byte>(part.data(), *n))) {
                co_return;
            }
        } else {
            auto b = co_await c.receive();
            if (!b) {
                co_return;
            }
            if (!co_await c.write_all(b->span())) {
                co_return;
            }
        }
    }
}

// 16 connections echo messages of 1 B to 32 KiB (blocking client threads) while another
// thread moves the IO home 0 -> 1 -> none -> ... without pause: every byte comes back once and
// in order, the receives did move (io_uring), and no provided buffer is left out (fixture).
TEST_P(io_home_stress, receives_moved_between_rings_under_traffic_keep_every_byte_in_order) {
    constexpr int conns = 16;
    constexpr int client_threads = 4;
    const int messages = scaled(300);  // per connection
    auto o = options(2);
    o.consolidate_io = true;
    weft::runtime rt{o};
    auto set_home = [&](int w) { weft::test::force_io_home(rt, w); };
    set_home(-1);
    std::optional<weft::tcp_listener> l;
    rt.block_on([&]() -> weft::task<void> {
        l.emplace(
            weft::tcp_listener::bind(weft::socket_address::parse("127.0.0.1", 0).value()).value());
        co_return;
    }());
    auto server = rt.spawn([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            for (int i = 0; i < conns; ++i) {
                s.spawn(echo_stream((co_await l->accept()).value(), i % 2 == 1));
            }
        });
    });
    const auto addr = l->local_address().value();
    std::vector<int> fds;
    for (int i = 0; i < conns; ++i) {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ASSERT_EQ(::connect(fd, addr.data(), addr.size()), 0);
        fds.push_back(fd);
    }
    const std::uint64_t moves_before = weft::detail::recv_home_moves.load();
    std::atomic<long long> bytes_ok{0};
    std::atomic<long long> bytes_sent{0};
    std::atomic<int> clients_left{client_threads};
    std::vector<std::thread> clients;
    for (int t = 0; t < client_threads; ++t) {
        clients.emplace_back([&, t] {
            std::minstd_rand rng(static_cast<unsigned>(t) + 7);
            std::vector<std::size_t> offset(conns, 0);  // bytes sent so far per connection
            std::string out;
            std::string in;
            auto pattern = [](int conn, std::size_t at) {
                return static_cast<char>(
                    (static_cast<std::size_t>(conn) * 131 + at * 7 + (at >> 8)) & 0xff);
            };
            for (int m = 0; m < messages; ++m) {
                for (int c = t; c < conns; c += client_threads) {
                    const std::size_t size = 1 + rng() % 32768;
                    out.resize(size);
                    for (std::size_t k = 0; k < size; ++k) {
                        out[k] = pattern(c, offset[static_cast<std::size_t>(c)] + k);
                    }
                    for (std::size_t done = 0; done < size;) {
                        const ssize_t n = ::send(fds[static_cast<std::size_t>(c)],
                                                 out.data() + done, size - done, MSG_NOSIGNAL);
                        ASSERT_GT(n, 0);
                        done += static_cast<std::size_t>(n);
                    }
                    bytes_sent.fetch_add(static_cast<long long>(size));
                    in.resize(size);
                    for (std::size_t done = 0; done < size;) {
                        const ssize_t n = ::recv(fds[static_cast<std::size_t>(c)], in.data() + done,
                                                 size - done, 0);
                        ASSERT_GT(n, 0);
                        done += static_cast<std::size_t>(n);
                    }
                    long long ok = 0;
                    for (std::size_t k = 0; k < size; ++k) {
                        ok += in[k] == pattern(c, offset[static_cast<std::size_t>(c)] + k) ? 1 : 0;
                    }
                    bytes_ok.fetch_add(ok);
                    offset[static_cast<std::size_t>(c)] += size;
                }
            }
            clients_left.fetch_sub(1);
        });
    }
    int changes = 0;
    constexpr int homes[] = {0, 1, -1, 1, 0, -1};
    while (clients_left.load() != 0) {
        set_home(homes[changes % std::size(homes)]);
        ++changes;
        std::this_thread::yield();
    }
    for (auto& c : clients) {
        c.join();
    }
    for (int fd : fds) {
        ::close(fd);
    }
    rt.block_on([&]() -> weft::task<void> {
        co_await std::move(server);
        l.reset();
    }());
    const std::uint64_t moves = weft::detail::recv_home_moves.load() - moves_before;
    std::printf("%d home changes, %llu receives moved, %lld bytes echoed\n", changes,
                static_cast<unsigned long long>(moves), bytes_sent.load());
    EXPECT_EQ(bytes_ok.load(), bytes_sent.load());
    EXPECT_GT(changes, 1);
    if (GetParam() == weft::io_backend::io_uring) {
        EXPECT_GT(moves, 0U);
    }
}

WEFT_TEST_ON_BOTH_BACKENDS(io_home_stress);

}  // namespace
