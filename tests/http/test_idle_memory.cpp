// The heap an idle keep-alive connection holds: connections that each sent one GET / and read
// the answer, then idle, on both backends. A count of malloc's bytes (mallinfo2), never a time
// or the RSS: the clients are blocking sockets on a thread of their own that allocate nothing
// while they connect, so every byte the heap grows by is the server's.

#include <gtest/gtest.h>
#include <malloc.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <thread>
#include <vector>

#include "connection.hpp"  // src/http: receive_counts (request states held)
#include "test_util.hpp"
#include "weft/core/scope.hpp"
#include "weft/http.hpp"
#include "weft/io/reactor.hpp"
#include "weft/io/tcp_listener.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"

namespace weft::http::test {
namespace {

using namespace std::chrono_literals;

// The bytes malloc has handed out (mmapped chunks included): 0 where the allocator does not
// report them (the sanitizers' own).
auto heap_in_use() -> std::size_t {
    const struct mallinfo2 m = ::mallinfo2();
    return m.uordblks + m.hblkhd;
}

// Opens `n` connections to `addr` one after the other, each sending one GET / and reading its
// whole answer; appends their descriptors to `fds` (reserved by the caller: no allocation).
// False if a connection or its answer failed.
auto open_idle(const sockaddr_in& addr, int n, std::vector<int>& fds) -> bool {
    constexpr std::string_view get = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
    constexpr std::string_view body = "Hello, World!";
    for (int i = 0; i < n; ++i) {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            return false;
        }
        fds.push_back(fd);
        if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
            ::send(fd, get.data(), get.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(get.size())) {
            return false;
        }
        char buf[512];
        std::size_t got = 0;
        for (;;) {  // until the body, which ends the answer
            const ssize_t r = ::recv(fd, buf + got, sizeof buf - got, 0);
            if (r <= 0) {
                return false;
            }
            got += static_cast<std::size_t>(r);
            if (std::string_view{buf, got}.ends_with(body)) {
                break;
            }
            if (got == sizeof buf) {
                return false;
            }
        }
    }
    return true;
}

class idle_memory_test : public ::testing::TestWithParam<io_backend> {
protected:
    void SetUp() override {
        try {
            (void)resolve_io_backend(GetParam());
        } catch (const std::system_error&) {
            GTEST_SKIP() << "io_uring unavailable here";
        }
        // Both ends of every connection are in this process.
        constexpr rlim_t needed = 2 * (256 + 2048) + 256;
        rlimit lim{};
        if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_max < needed) {
            GTEST_SKIP() << "RLIMIT_NOFILE's hard limit is under " << needed;
        }
        if (lim.rlim_cur < needed) {
            lim.rlim_cur = needed;
            ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &lim), 0);
        }
        const std::size_t before = heap_in_use();
        auto* probe = new std::vector<char>(1 << 20);
        const bool reported = heap_in_use() >= before + (1 << 20);
        delete probe;
        if (!reported) {
            GTEST_SKIP() << "this allocator does not report its use through mallinfo2";
        }
    }
};

// What each further idle connection adds to the heap, measured between `warm` and
// `warm + measured` connections held (the first ones make what a server makes once: the
// threads' frame slabs and buffer pools, a request state per thread). The bound is the figure
// reached (about 1.55 KiB with g++ 12: the three frames the idle wait keeps, and on io_uring the
// multishot receive's queue; docs/design/http-connection.md) plus a margin; a frame that keeps
// the locals of a path it does not take (the TLS handshake, another backend's receive), or a
// fourth frame, crosses it. NOTE: each case in a process of its own, as ctest runs them: frames
// an earlier runtime of the process freed are reused here, and the figure would leave them out.
TEST_P(idle_memory_test, idle_connection_heap_stays_under_bound) {
    constexpr int warm = 256;
    constexpr int measured = 2048;
    constexpr std::size_t bound = 1792;
    detail::receive_counts counts;
    detail::receive_counts_for_test.store(&counts, std::memory_order_relaxed);
    std::size_t per_connection = 0;
    bool opened = false;
    {
        // One worker: frames come from 64 KiB slabs per size class and thread, and a slab
        // part-used at the end is counted whole; one thread keeps that rounding under 256 B
        // per connection at this count.
        runtime rt{io_runtime_options(1, GetParam())};
        rt.block_on([&]() -> task<void> {
            server srv{server_options{}};
            srv.route(method::get, "/", [](request&) -> task<response> {
                co_return response::text("Hello, World!");
            });
            auto l = tcp_listener::bind(socket_address::parse("127.0.0.1", 0).value()).value();
            const auto addr = l.local_address().value();
            sockaddr_in sin{};
            std::memcpy(&sin, addr.data(), sizeof sin);
            co_await with_scope([&](scope& s) -> task<void> {
                s.spawn(srv.serve(l));
                std::vector<int> fds;
                fds.reserve(warm + measured);
                // Every connection answered and idle: none holds a request state.
                auto settle = [&](int held) -> task<std::size_t> {
                    while (srv.stats().open != static_cast<std::uint64_t>(held) ||
                           counts.states_held.load(std::memory_order_relaxed) != 0) {
                        (void)co_await sleep_for(1ms);
                    }
                    co_return heap_in_use();
                };
                // The clients block: they run on a thread of their own, this task waits.
                auto open = [&](int n) -> task<bool> {
                    std::atomic<int> done{0};
                    bool ok = false;
                    std::thread t{[&] {
                        ok = open_idle(sin, n, fds);
                        done.store(1, std::memory_order_release);
                    }};
                    while (done.load(std::memory_order_acquire) == 0) {
                        (void)co_await sleep_for(1ms);
                    }
                    t.join();
                    co_return ok;
                };
                opened = co_await open(warm);
                const std::size_t at_warm = co_await settle(warm);
                const bool more = co_await open(measured);
                opened = opened && more;
                const std::size_t at_all = co_await settle(warm + measured);
                per_connection = at_all > at_warm ? (at_all - at_warm) / measured : 0;
                for (const int fd : fds) {
                    ::close(fd);
                }
                co_await srv.shutdown();
            });
        }());
    }
    detail::receive_counts_for_test.store(nullptr, std::memory_order_relaxed);
    ASSERT_TRUE(opened);
    std::printf("heap per idle connection (%s): %zu B\n",
                GetParam() == io_backend::io_uring ? "io_uring" : "epoll", per_connection);
    EXPECT_LE(per_connection, bound);
}

INSTANTIATE_TEST_SUITE_P(backends,
                         idle_memory_test,
                         ::testing::Values(io_backend::io_uring, io_backend::epoll),
                         [](const auto& info) {
                             return std::string(info.param == io_backend::io_uring ? "io_uring"
                                                                                   : "epoll");
                         });

}  // namespace
}  // namespace weft::http::test
