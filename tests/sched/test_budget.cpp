#include <gtest/gtest.h>

#include "test_util.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/yield.hpp"
#include "weft/sync/channel.hpp"

// Channels are the means here: their hand-offs are what fill a worker's LIFO slot and spend a
// task's budget.

namespace {

// A producer that never blocks (an unbounded channel) spends its turn again and again; the
// consumer it woke waits in the worker's LIFO slot. Each spent turn must let that consumer run
// (one worker: nobody can steal it), so it sees items while the producer is still sending.
TEST(budget, a_spent_turn_lets_the_woken_task_run) {
    weft::runtime rt{{.workers = 1}};
    constexpr int items = 20 * weft::detail::worker_base::budget_per_turn;
    const int sent_when_first_received = rt.block_on([]() -> weft::task<int> {
        weft::channel<int> ch{weft::unbounded};
        int sent = 0;
        int seen_at = -1;
        auto consumer = weft::spawn([&]() -> weft::task<void> {
            for (int got = 0; got < items; ++got) {
                (void)(co_await ch.recv()).value();
                if (seen_at < 0) {
                    seen_at = sent;
                }
            }
        });
        co_await weft::yield();  // the consumer parks on the empty channel
        for (; sent < items; ++sent) {
            (void)co_await ch.send(sent);
        }
        co_await std::move(consumer);
        co_return seen_at;
    }());
    EXPECT_GE(sent_when_first_received, 0);
    EXPECT_LT(sent_when_first_received, items);
}

// Two tasks that keep handing off through channels run from the worker's LIFO slot, which is
// not capped (see worker_base::wake): a task queued before them must still run, within a
// fairness interval (61 tasks), not after the pair is done. One worker: nobody can steal it.
TEST(budget, a_handing_off_pair_does_not_starve_an_older_task) {
    weft::runtime rt{{.workers = 1}};
    const long rounds_before_it_ran = rt.block_on([]() -> weft::task<long> {
        weft::channel<int> ping{1};
        weft::channel<int> pong{1};
        long rounds = 0;
        long seen_at = -1;
        // Queued first: the oldest task in the deque for the whole ping-pong.
        auto older = weft::spawn([&]() -> weft::task<void> {
            seen_at = rounds;
            co_return;
        });
        auto partner = weft::spawn([&]() -> weft::task<void> {
            while (auto v = co_await ping.recv()) {
                (void)co_await pong.send(*v);
            }
        });
        while (seen_at < 0 && rounds < 1'000'000) {
            (void)co_await ping.send(1);
            (void)co_await pong.recv();
            ++rounds;
        }
        ping.close();
        co_await std::move(partner);
        co_await std::move(older);
        co_return seen_at;
    }());
    EXPECT_GE(rounds_before_it_ran, 0);
    EXPECT_LT(rounds_before_it_ran, 100);
}

}  // namespace
