// Shutdown with everything in flight, on both backends: a runtime destroyed while its tasks wait
// on socket reads (with data arriving meanwhile), accepts, timers, blocking calls and channels
// must run or cancel every one of them, so that every coroutine frame is destroyed
// (weft::live_frames) and every descriptor closed. A completion racing the shutdown (the
// kernel's, a blocking thread's) must never leave a task queued after the workers stopped.

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "io/backend_test.hpp"
#include "test_util.hpp"
#include "weft/core/frame_allocator.hpp"
#include "weft/io/tcp_listener.hpp"
#include "weft/io/tcp_stream.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/spawn_blocking.hpp"
#include "weft/sched/timer.hpp"
#include "weft/sync/channel.hpp"

namespace {

using namespace std::chrono_literals;

using weft::test::scaled;

auto open_fds() -> int {
    int n = 0;
    if (DIR* d = ::opendir("/proc/self/fd")) {
        while (::readdir(d) != nullptr) {
            ++n;
        }
        ::closedir(d);
    }
    return n;
}

class shutdown_stress : public weft::test::backend_test {};

TEST_P(shutdown_stress, every_frame_is_destroyed_whatever_is_in_flight) {
    const int rounds = scaled(60);
    const std::int64_t frames_before = weft::live_frames();
    const int fds_before = open_fds();
    std::minstd_rand rng(7);
    for (int round = 0; round < rounds; ++round) {
        std::atomic<int> blocking_ran{0};
        std::mutex fds_mu;
        std::vector<int> client_fds;  // guarded by fds_mu; written to by `writer`
        std::thread writer;
        {
            weft::runtime rt{options(2)};
            auto ch = std::make_shared<weft::channel<int>>(0);
            // Sockets: a listener with a pending accept, and connected pairs with pending reads.
            auto l = rt.block_on([]() -> weft::task<weft::tcp_listener> {
                co_return weft::tcp_listener::bind(
                    weft::socket_address::parse("127.0.0.1", 0).value())
                    .value();
            }());
            auto shared_l = std::make_shared<weft::tcp_listener>(std::move(l));
            const auto addr = shared_l->local_address().value();
            constexpr int pairs = 8;
            for (int i = 0; i < pairs; ++i) {
                rt.spawn([addr, &client_fds, &fds_mu]() -> weft::task<void> {
                      auto c = co_await weft::tcp_stream::connect(addr);
                      if (!c) {
                          co_return;
                      }
                      {
                          const std::lock_guard lock(fds_mu);
                          client_fds.push_back(::dup(c->native_handle()));
                      }
                      // Keeps the client open: the server side's read below has a peer.
                      std::array<std::byte, 16> b{};
                      (void)co_await c->read_some(b);
                  }).detach();
            }
            for (int i = 0; i < pairs + 1; ++i) {  // the last accept stays pending
                rt.spawn([shared_l]() -> weft::task<void> {
                      auto s = co_await shared_l->accept();
                      if (!s) {
                          co_return;
                      }
                      std::array<std::byte, 64> b{};
                      while (co_await s->read_some(b)) {
                      }
                  }).detach();
            }
            for (int i = 0; i < 16; ++i) {
                rt.spawn([]() -> weft::task<void> { (void)co_await weft::sleep_for(1h); }).detach();
                rt.spawn([ch]() -> weft::task<void> { (void)co_await ch->recv(); }).detach();
                rt.spawn([&blocking_ran]() -> weft::task<void> {
                      (void)co_await weft::spawn_blocking([&blocking_ran] {
                          std::this_thread::sleep_for(std::chrono::microseconds(200));
                          blocking_ran.fetch_add(1);
                      });
                  }).detach();
            }
            // Let some of it start, a different amount each round.
            const int steps = static_cast<int>(rng() % 50);
            for (int i = 0; i < steps; ++i) {
                rt.block_on([]() -> weft::task<void> { co_return; }());
            }
            // Data arriving while the runtime shuts down: completions racing its quiescence
            // check.
            std::vector<int> fds;
            {
                const std::lock_guard lock(fds_mu);
                fds = client_fds;
            }
            writer = std::thread([fds] {
                for (int k = 0; k < 20; ++k) {
                    for (const int fd : fds) {
                        const char byte = 'x';
                        (void)::send(fd, &byte, 1, MSG_NOSIGNAL);
                    }
                }
            });
        }  // ~runtime: requests stop on every task, waits until nothing is left, joins
        writer.join();
        for (const int fd : client_fds) {
            ::close(fd);
        }
        ASSERT_EQ(weft::live_frames(), frames_before) << "round " << round;
    }
    EXPECT_EQ(open_fds(), fds_before);
}

WEFT_TEST_ON_BOTH_BACKENDS(shutdown_stress);

}  // namespace
