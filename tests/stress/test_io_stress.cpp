// weft::io stress tests, run under ThreadSanitizer in CI, on both backends. They count: every
// connection a client makes is served exactly once while several tasks accept on one listener
// and their waits are cancelled at random moments (a connection the kernel handed to a waiter
// that was being cancelled must go to the next accept, never be dropped).

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <random>

#include "io/backend_test.hpp"
#include "test_util.hpp"
#include "weft/core/scope.hpp"
#include "weft/io/tcp_listener.hpp"
#include "weft/io/tcp_stream.hpp"
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

}  // namespace
