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

}  // namespace
