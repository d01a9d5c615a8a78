#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "weft/core/scope.hpp"
#include "weft/io/fd_wait.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"
#include "weft/sync/channel.hpp"

namespace {

using namespace std::chrono_literals;

auto find(const weft::task_dump& d, std::string_view name) -> const weft::task_info* {
    for (const auto& t : d.tasks) {
        if (t.name == name) {
            return &t;
        }
    }
    return nullptr;
}

auto ends_with(std::string_view s, std::string_view tail) -> bool {
    return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

auto recv_one(weft::channel<int>& ch) -> weft::task<int> {
    auto r = co_await ch.recv();
    co_return r ? *r : -1;
}
auto chan_waiter(weft::channel<int>& ch) -> weft::task<int> { co_return co_await recv_one(ch); }
auto sleeper() -> weft::task<void> { (void)co_await weft::sleep_for(std::chrono::hours(1)); }
auto socket_waiter(int fd) -> weft::task<bool> {
    auto r = co_await weft::wait_readable(fd);
    co_return static_cast<bool>(r);
}
auto trivial() -> weft::task<int> { co_return 7; }

// One worker, so that what is queued stays queued while the root task (which takes the dump)
// runs: a task on a channel, one on a timer, one on a socket, one queued; each with its spawn
// site and name, the waiting ones with their chain of coroutines.
TEST(task_dump, shows_each_state_with_site_and_chain) {
    weft::runtime rt{{.workers = 1, .stall_threshold = std::nullopt, .task_records = true}};
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    weft::channel<int> ch(1);
    unsigned line_chan = 0;
    unsigned line_timer = 0;
    unsigned line_sock = 0;
    unsigned line_queued = 0;
    weft::task_dump d;
    rt.block_on([&]() -> weft::task<void> {
        auto a = weft::spawn(weft::task_name{"chan"}, chan_waiter(ch));
        line_chan = __LINE__ - 1;
        weft::spawn(weft::task_name{"timer"}, sleeper()).detach();
        line_timer = __LINE__ - 1;
        auto c = weft::spawn(weft::task_name{"sock"}, socket_waiter(sv[0]));
        line_sock = __LINE__ - 1;
        // Let the three run until each waits (read from the dump itself: no timing assumed).
        for (;;) {
            (void)co_await weft::sleep_for(1ms);
            auto now = rt.dump();
            const auto* ta = find(now, "chan");
            const auto* tb = find(now, "timer");
            const auto* tc = find(now, "sock");
            if (ta != nullptr && tb != nullptr && tc != nullptr &&
                ta->waiting_on == weft::wait_kind::channel &&
                tb->waiting_on == weft::wait_kind::timer && tc->waiting_on == weft::wait_kind::io) {
                break;
            }
        }
        auto q = weft::spawn(weft::task_name{"queued"}, trivial());
        line_queued = __LINE__ - 1;
        d = rt.dump();  // q has not run: this task keeps the only worker
        EXPECT_EQ(co_await std::move(q), 7);
        // Finished and joined: gone from the next dump.
        EXPECT_EQ(find(rt.dump(), "queued"), nullptr);
        EXPECT_TRUE(co_await ch.send(5));
        EXPECT_EQ(co_await std::move(a), 5);
        EXPECT_EQ(::write(sv[1], "x", 1), 1);
        EXPECT_TRUE(co_await std::move(c));
    }());
    ::close(sv[0]);
    ::close(sv[1]);

    EXPECT_TRUE(d.unresponsive_workers.empty());
    const auto* chan = find(d, "chan");
    const auto* timer = find(d, "timer");
    const auto* sock = find(d, "sock");
    const auto* queued = find(d, "queued");
    const auto* root = find(d, "block_on");
    ASSERT_NE(chan, nullptr);
    ASSERT_NE(timer, nullptr);
    ASSERT_NE(sock, nullptr);
    ASSERT_NE(queued, nullptr);
    ASSERT_NE(root, nullptr);

    EXPECT_EQ(chan->state, weft::task_state::suspended);
    EXPECT_EQ(chan->waiting_on, weft::wait_kind::channel);
    EXPECT_EQ(chan->site.line(), line_chan);
    EXPECT_TRUE(ends_with(chan->site.file_name(), "test_task_dump.cpp"));
    // recv_one, waiting; chan_waiter, the task's own coroutine, awaiting it.
    ASSERT_EQ(chan->chain.size(), 2U);
    EXPECT_EQ(chan->chain.back().site.line(), line_chan);
    EXPECT_EQ(chan->chain.front().site.line(), 0U);  // only awaited: no site of its own

    EXPECT_EQ(timer->state, weft::task_state::suspended);
    EXPECT_EQ(timer->waiting_on, weft::wait_kind::timer);
    EXPECT_EQ(timer->site.line(), line_timer);
    EXPECT_EQ(timer->chain.size(), 1U);

    EXPECT_EQ(sock->state, weft::task_state::suspended);
    EXPECT_EQ(sock->waiting_on, weft::wait_kind::io);
    EXPECT_EQ(sock->site.line(), line_sock);
    EXPECT_EQ(sock->chain.size(), 2U);  // wait_readable's coroutine, socket_waiter

    EXPECT_EQ(queued->state, weft::task_state::queued);
    EXPECT_EQ(queued->site.line(), line_queued);
    EXPECT_TRUE(queued->chain.empty());

    EXPECT_EQ(root->state, weft::task_state::running);
    EXPECT_EQ(root->worker, 0U);

    const std::string text = d.to_string();
    EXPECT_NE(text.find("'chan' suspended on channel, spawned at "), std::string::npos) << text;
    EXPECT_NE(text.find("test_task_dump.cpp:" + std::to_string(line_chan)), std::string::npos);
    EXPECT_NE(text.find("'queued' queued"), std::string::npos) << text;
}

// A forked child's site is kept in its frame: a spawned task waiting in a join on a fork shows
// its own site; a fork that waits on a channel is no spawned task and is not listed.
TEST(task_dump, join_and_scope_waits) {
    weft::runtime rt{{.workers = 1, .stall_threshold = std::nullopt, .task_records = true}};
    weft::channel<int> ch(1);
    weft::task_dump d;
    rt.block_on([&]() -> weft::task<void> {
        auto outer = weft::spawn(weft::task_name{"joiner"}, [&]() -> weft::task<int> {
            auto inner = weft::spawn(weft::task_name{"inner"}, chan_waiter(ch));
            co_return co_await std::move(inner);
        });
        auto scoped = weft::spawn(weft::task_name{"scoper"}, [&]() -> weft::task<void> {
            co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
                s.spawn(weft::task_name{"child"}, chan_waiter(ch));
                co_return;
            });
        });
        for (;;) {
            (void)co_await weft::sleep_for(1ms);
            d = rt.dump();
            const auto* j = find(d, "joiner");
            const auto* s = find(d, "scoper");
            if (j != nullptr && s != nullptr && j->waiting_on == weft::wait_kind::join &&
                s->waiting_on == weft::wait_kind::scope) {
                break;
            }
        }
        EXPECT_TRUE(co_await ch.send(1));
        EXPECT_TRUE(co_await ch.send(2));
        EXPECT_GT(co_await std::move(outer), 0);
        co_await std::move(scoped);
    }());
    const auto* j = find(d, "joiner");
    const auto* s = find(d, "scoper");
    ASSERT_NE(j, nullptr);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(j->state, weft::task_state::suspended);
    EXPECT_EQ(s->state, weft::task_state::suspended);
    ASSERT_NE(find(d, "inner"), nullptr);
    ASSERT_NE(find(d, "child"), nullptr);
    EXPECT_EQ(find(d, "inner")->waiting_on, weft::wait_kind::channel);
    EXPECT_EQ(find(d, "child")->waiting_on, weft::wait_kind::channel);
    // with_scope's coroutine waits in the scope's join, awaited by the task's lambda coroutine.
    EXPECT_EQ(s->chain.size(), 3U);  // with_scope, call_holding's, the lambda's
}

// Dumps taken from another thread while tasks are spawned, stolen and finished as fast as the
// workers go (TSan checks the stop protocol): every dump is well formed, no task appears twice,
// and every spawned task ran exactly once.
TEST(task_dump, dump_during_heavy_spawning) {
    weft::runtime rt{{.workers = 3, .stall_threshold = std::nullopt, .task_records = true}};
    constexpr int rounds = 50;
    constexpr int per_round = 100;
    std::atomic<int> ran{0};
    std::atomic<bool> done{false};
    std::thread dumper([&] {
        int dumps = 0;
        while (!done.load(std::memory_order_acquire) || dumps < 5) {
            const auto d = rt.dump();
            std::set<std::uint64_t> ids;
            for (const auto& t : d.tasks) {
                EXPECT_TRUE(ids.insert(t.id).second);
                EXPECT_NE(t.site.line(), 0U);
                EXPECT_TRUE(ends_with(t.site.file_name(), "test_task_dump.cpp"));
            }
            ++dumps;
            std::this_thread::sleep_for(std::chrono::microseconds(500));  // let the spawns run
        }
    });
    rt.block_on([&]() -> weft::task<void> {
        for (int r = 0; r < rounds; ++r) {
            co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
                for (int i = 0; i < per_round; ++i) {
                    s.spawn([&]() -> weft::task<void> {
                        auto inner = weft::spawn([&]() -> weft::task<void> {
                            ran.fetch_add(1, std::memory_order_relaxed);
                            co_return;
                        });
                        co_await std::move(inner);
                    });
                }
                co_return;
            });
        }
    }());
    done.store(true, std::memory_order_release);
    dumper.join();
    EXPECT_EQ(ran.load(), rounds * per_round);
    // Everything finished and was joined: the records close with the frames (block_on's own
    // frame is freed just after block_on returns; the watchdog bounds the wait).
    while (!rt.dump().tasks.empty()) {
        std::this_thread::yield();
    }
}

// runtime_options::task_records off (the default): spawns open no record, so the dump lists no
// task, says so, and still names a worker that does not stop.
TEST(task_dump, records_off_lists_no_tasks) {
    weft::runtime rt{{.workers = 1, .stall_threshold = std::nullopt}};
    weft::channel<int> ch(1);
    auto waiting = rt.spawn(weft::task_name{"chan"}, chan_waiter(ch));
    const auto d = rt.block_on([&]() -> weft::task<weft::task_dump> {
        auto queued = weft::spawn(weft::task_name{"queued"}, trivial());
        auto out = rt.dump();
        EXPECT_EQ(co_await std::move(queued), 7);
        EXPECT_TRUE(co_await ch.send(5));
        co_return out;
    }());
    EXPECT_EQ(rt.block_on([](weft::join_handle<int> j) -> weft::task<int> {
        co_return co_await std::move(j);
    }(std::move(waiting))),
              5);
    EXPECT_FALSE(d.task_records);
    EXPECT_TRUE(d.tasks.empty());
    EXPECT_TRUE(d.unresponsive_workers.empty());
    EXPECT_NE(d.to_string().find("tasks not recorded (task_records off)"), std::string::npos)
        << d.to_string();
}

}  // namespace
