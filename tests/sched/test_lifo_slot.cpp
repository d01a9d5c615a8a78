#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "test_util.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/yield.hpp"
#include "weft/sync/channel.hpp"

// Channels are the means here: their hand-offs are what fill a worker's LIFO slot and spend a
// task's budget.

namespace {

// A task displaced from the LIFO slot (worker_base::wake) is left to its own worker for a
// moment only (sched_worker::settled): when that worker stays busy, an idle worker steals it.
// Here the worker that displaced it spins until it has run, so the test ends only if it was
// stolen.
TEST(lifo, a_displaced_task_is_stolen_while_its_worker_stays_busy) {
    weft::runtime rt{{.workers = 2}};
    std::atomic<bool> ran{false};
    std::thread::id spinner;
    std::thread::id ran_on;
    rt.block_on([&]() -> weft::task<void> {
        weft::channel<int> first{0};  // rendezvous: try_send succeeds only into a parked receiver
        weft::channel<int> second{0};
        auto displaced = weft::spawn([&]() -> weft::task<void> {
            (void)co_await first.recv();
            ran_on = std::this_thread::get_id();
            ran.store(true);
        });
        auto occupant = weft::spawn([&]() -> weft::task<void> { (void)co_await second.recv(); });
        // Both wakes land in this worker's LIFO slot: the second moves the first to the deque.
        while (!first.try_send(1)) {
            co_await weft::yield();  // until `displaced` is parked
        }
        // From here no yield (it would run `displaced` from the slot): `occupant` parks here
        // already or, stolen, on the other worker.
        while (!second.try_send(2)) {
            std::this_thread::yield();
        }
        spinner = std::this_thread::get_id();
        while (!ran.load()) {
            std::this_thread::yield();  // this worker stays busy
        }
        co_await std::move(displaced);
        co_await std::move(occupant);
    }());
    EXPECT_TRUE(ran.load());
    EXPECT_NE(ran_on, spinner);
}

// A task waiting in another worker's LIFO slot is not work an idle worker can take (thieves
// may not), so it must not keep that worker from sleeping. Worker 0 wakes a receiver into its
// LIFO slot, spawns a task that worker 1 is woken to steal, then computes without awaiting for
// a fixed number of steps; worker 1, once that task is done, has nothing it may run and goes
// to sleep. (It used to return from every park at once: a 2-worker process used 4 s of CPU in
// 2 s of such computing.)
// Work that never awaits. Not in the coroutine: g++ 12 drops `volatile` from a coroutine
// frame's locals and folded such a loop away.
[[gnu::noinline]] void compute(std::uint64_t steps) {
    volatile std::uint64_t sink = 0;
    for (std::uint64_t i = 0; i < steps; ++i) {
        sink = sink + i;
    }
}

TEST(lifo, an_idle_worker_sleeps_while_another_worker_s_slot_holds_a_task) {
    weft::runtime rt{{.workers = 2}};
    std::uint64_t attempts_during = 0;
    std::uint64_t sleeps_during = 0;
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::switch_to_worker(0);
        weft::channel<int> ch{0};
        auto receiver = weft::spawn([&]() -> weft::task<void> { (void)co_await ch.recv(); });
        while (!ch.try_send(1)) {  // until the receiver is parked; then it is in our LIFO slot
            co_await weft::yield();
            co_await weft::switch_to_worker(0);
        }
        // Work for worker 1, woken for it: once done, it looks for more and must go to sleep.
        const weft::worker_metrics before = rt.worker_metrics(1);
        auto other = weft::spawn([]() -> weft::task<void> { co_return; });
        compute(200'000'000);
        const weft::worker_metrics after = rt.worker_metrics(1);
        attempts_during = after.park_attempts - before.park_attempts;
        sleeps_during = after.sleeps - before.sleeps;
        co_await std::move(other);
        co_await std::move(receiver);
    }());
    EXPECT_LE(attempts_during, 3U);  // 6249 before, every one returning at once
    EXPECT_GE(sleeps_during, 1U);
}

}  // namespace
