// Where a woken waiter resumes (detail::resume_waiter): on the waker's worker when the waker
// runs on the waiter's own executor, else back on its own executor, never on another runtime's
// or another sync_wait's thread.
//
// Every case parks the waiter in a rendezvous channel's recv and wakes it with try_send, which
// succeeds only into a parked receiver: once it succeeds, the waker has woken it (no sleeps).

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "test_util.hpp"
#include "weft/core/sync_wait.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/yield.hpp"
#include "weft/sync/channel.hpp"

namespace {

/// The threads of `rt`'s workers.
auto worker_threads(weft::runtime& rt) -> std::set<std::thread::id> {
    return rt.block_on([&rt]() -> weft::task<std::set<std::thread::id>> {
        std::set<std::thread::id> ids;
        for (unsigned i = 0; i < rt.worker_count(); ++i) {
            const weft::switch_to_worker to{i};
            co_await to;
            ids.insert(std::this_thread::get_id());
        }
        co_return ids;
    }());
}

/// Where the waiter ran after it was woken.
struct resumed {
    std::thread::id thread;
    weft::stop_state* executor = nullptr;  // current_worker()->root_stop()
};

[[gnu::noinline]] auto record_resumption() -> resumed {
    return resumed{std::this_thread::get_id(), weft::detail::current_worker()->root_stop()};
}

// Same runtime, thread-per-core so that nothing is stolen: the waiter parks on worker 0 and a
// task on worker 1 wakes it; it runs next on worker 1 (the LIFO slot), with the item in cache.
TEST(resume_waiter, woken_by_a_task_of_its_runtime_runs_on_the_wakers_worker) {
    weft::runtime rt{{.workers = 2, .stealing = false}};
    std::thread::id parked_on;
    std::thread::id waker;
    resumed at;
    rt.block_on([&]() -> weft::task<void> {
        weft::channel<int> ch{0};
        const weft::switch_to_worker to_0{0};
        co_await to_0;
        // Queued on worker 0, where it stays (nobody steals); it runs once this task has left.
        auto waiter = weft::spawn([&]() -> weft::task<void> {
            parked_on = std::this_thread::get_id();
            (void)co_await ch.recv();
            at = record_resumption();
        });
        const weft::switch_to_worker to_1{1};
        co_await to_1;
        // No suspension from here to the end of the loop: this task stays on worker 1. (A
        // weft::yield could move it: it may go through the injector.)
        while (!ch.try_send(1)) {
            std::this_thread::yield();
        }
        waker = std::this_thread::get_id();
        co_await std::move(waiter);
    }());
    EXPECT_NE(parked_on, waker);
    EXPECT_EQ(at.thread, waker);
    EXPECT_EQ(at.executor, &rt.stop());
}

// A plain thread wakes it: it goes back to its runtime (the injector) and runs on one of its
// workers, not on the waking thread.
TEST(resume_waiter, woken_from_a_foreign_thread_runs_on_its_runtime) {
    weft::runtime rt{{.workers = 2}};
    const auto threads = worker_threads(rt);
    weft::channel<int> ch{0};
    resumed at;
    auto waiter = rt.spawn([&]() -> weft::task<void> {
        (void)co_await ch.recv();
        at = record_resumption();
    });
    std::thread foreign([&] {
        while (!ch.try_send(1)) {
            std::this_thread::yield();
        }
    });
    const std::thread::id foreign_id = foreign.get_id();
    foreign.join();
    rt.block_on([&]() -> weft::task<void> { co_await std::move(waiter); }());
    EXPECT_NE(at.thread, foreign_id);
    EXPECT_EQ(threads.count(at.thread), 1U);
    EXPECT_EQ(at.executor, &rt.stop());
}

// A task of another runtime wakes it: it must go back to its own runtime, never run on the
// waker's.
TEST(resume_waiter, woken_by_a_task_of_another_runtime_runs_on_its_own_runtime) {
    weft::runtime home{{.workers = 2}};
    weft::runtime other{{.workers = 2}};
    const auto home_threads = worker_threads(home);
    const auto other_threads = worker_threads(other);
    weft::channel<int> ch{0};
    resumed at;
    auto waiter = home.spawn([&]() -> weft::task<void> {
        (void)co_await ch.recv();
        at = record_resumption();
    });
    other.block_on([&]() -> weft::task<void> {
        while (!ch.try_send(1)) {
            co_await weft::yield();
        }
    }());
    home.block_on([&]() -> weft::task<void> { co_await std::move(waiter); }());
    EXPECT_EQ(home_threads.count(at.thread), 1U);
    EXPECT_EQ(other_threads.count(at.thread), 0U);
    EXPECT_EQ(at.executor, &home.stop());
}

// A sync_wait (an inline executor on a thread of its own) wakes a runtime's task: the task goes
// back to its runtime instead of running inside the sync_wait.
TEST(resume_waiter, woken_inside_a_sync_wait_runs_on_its_runtime) {
    weft::runtime rt{{.workers = 2}};
    const auto threads = worker_threads(rt);
    weft::channel<int> ch{0};
    resumed at;
    auto waiter = rt.spawn([&]() -> weft::task<void> {
        (void)co_await ch.recv();
        at = record_resumption();
    });
    weft::sync_wait([&]() -> weft::task<void> {
        while (!ch.try_send(1)) {
            std::this_thread::yield();  // nothing else to run on this thread
        }
        co_return;
    }());
    rt.block_on([&]() -> weft::task<void> { co_await std::move(waiter); }());
    EXPECT_NE(at.thread, std::this_thread::get_id());
    EXPECT_EQ(threads.count(at.thread), 1U);
    EXPECT_EQ(at.executor, &rt.stop());
}

// The other way round: a runtime's task wakes a task parked inside sync_wait, which resumes on
// the sync_wait's own thread.
TEST(resume_waiter, a_sync_wait_task_woken_by_a_runtime_resumes_on_its_own_thread) {
    weft::runtime rt{{.workers = 2}};
    const auto threads = worker_threads(rt);
    weft::channel<int> ch{0};
    auto waker = rt.spawn([&]() -> weft::task<void> {
        while (!ch.try_send(1)) {
            co_await weft::yield();
        }
    });
    resumed at;
    weft::stop_state* own = nullptr;
    weft::sync_wait([&]() -> weft::task<void> {
        own = weft::detail::current_worker()->root_stop();
        (void)co_await ch.recv();
        at = record_resumption();
    }());
    rt.block_on([&]() -> weft::task<void> { co_await std::move(waker); }());
    EXPECT_EQ(at.thread, std::this_thread::get_id());
    EXPECT_EQ(threads.count(at.thread), 0U);
    EXPECT_EQ(at.executor, own);
}

}  // namespace
