// The worker paths that run inside noexcept functions (firing timers, queuing a woken task,
// a yield that overflows a full deque) while every allocation fails: they must not end in
// std::terminate. This binary replaces operator new (a switch that makes it throw), so it links
// neither under TSan (whose runtime defines operator new too) nor beside other test files.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <new>
#include <thread>
#include <vector>

#include "weft/core/detail/work_deque.hpp"
#include "weft/core/join_handle.hpp"
#include "weft/core/task.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"
#include "weft/sync/event.hpp"

namespace {
// While set, every operator new in the process throws std::bad_alloc (and counts it).
std::atomic<bool> refuse_allocations{false};
std::atomic<std::uint64_t> refused{0};
}  // namespace

auto operator new(std::size_t n) -> void* {
    if (refuse_allocations.load(std::memory_order_relaxed)) {
        refused.fetch_add(1, std::memory_order_relaxed);
        throw std::bad_alloc();
    }
    if (void* p = std::malloc(n == 0 ? 1 : n)) {
        return p;
    }
    throw std::bad_alloc();
}
// Out of line: inlined, g++ sees free() called on what operator new returned and warns.
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

using namespace std::chrono_literals;

// Allocations fail from construction to destruction (the scope of one hostile section).
class allocations_refused {
public:
    allocations_refused() noexcept { refuse_allocations.store(true, std::memory_order_seq_cst); }
    allocations_refused(const allocations_refused&) = delete;
    auto operator=(const allocations_refused&) -> allocations_refused& = delete;
    ~allocations_refused() { refuse_allocations.store(false, std::memory_order_seq_cst); }
};

// The switch works: an allocation made while it is on throws.
auto refused_now() -> bool {
    try {
        ::operator delete(::operator new(16));
    } catch (const std::bad_alloc&) {
        return true;
    }
    return false;
}

// Many sleepers come due together while nothing can be allocated: the worker fires them all
// (the fired entries are linked through the entries themselves) and they run.
TEST(alloc_failure, timers_fire_while_every_allocation_fails) {
    weft::runtime rt{{.workers = 1}};
    constexpr int sleepers = 500;
    const int woke = rt.block_on([]() -> weft::task<int> {
        std::atomic<int> woke{0};
        std::vector<weft::join_handle<void>> all;
        all.reserve(sleepers);
        for (int i = 0; i < sleepers; ++i) {
            all.push_back(weft::spawn([](std::atomic<int>& n) -> weft::task<void> {
                (void)co_await weft::sleep_for(1ms);
                n.fetch_add(1, std::memory_order_relaxed);
            }(woke)));
        }
        {
            allocations_refused off;
            EXPECT_TRUE(refused_now());
            // Due after every sleeper: it fires in their batch or later, never before.
            (void)co_await weft::sleep_for(20ms);
        }
        for (auto& h : all) {
            co_await std::move(h);
        }
        co_return woke.load();
    }());
    EXPECT_EQ(woke, sleepers);
}

// Tasks woken from a thread outside the runtime go through the injector (schedule_remote, a
// noexcept path): waking hundreds of them while nothing can be allocated queues and runs them.
TEST(alloc_failure, remote_wake_ups_queue_while_every_allocation_fails) {
    weft::runtime rt{{.workers = 2}};
    constexpr int waiters = 500;
    weft::event go;
    std::atomic<int> ready{0};
    std::atomic<int> ran{0};
    std::vector<weft::join_handle<void>> all;
    all.reserve(waiters);
    for (int i = 0; i < waiters; ++i) {
        all.push_back(rt.spawn([&]() -> weft::task<void> {
            ready.fetch_add(1, std::memory_order_relaxed);
            (void)co_await go.wait();
            ran.fetch_add(1, std::memory_order_relaxed);
        }));
    }
    while (ready.load() != waiters) {
        std::this_thread::yield();
    }
    std::this_thread::sleep_for(20ms);  // let the last of them reach its wait
    {
        allocations_refused off;
        EXPECT_TRUE(refused_now());
        go.set();
    }
    rt.block_on([&]() -> weft::task<void> {
        for (auto& h : all) {
            co_await std::move(h);
        }
    }());
    EXPECT_EQ(ran.load(), waiters);
}

// A task whose turn is spent yields into a full deque (the older half moves to the injector)
// while nothing can be allocated: the yield queues it, everything queued runs, and it resumes.
TEST(alloc_failure, a_yield_into_a_full_deque_while_every_allocation_fails) {
    weft::runtime rt{{.workers = 1}};
    constexpr int queued = static_cast<int>(weft::detail::work_deque::capacity);
    const int ran = rt.block_on([]() -> weft::task<int> {
        std::atomic<int> ran{0};
        std::vector<weft::join_handle<void>> all;
        all.reserve(queued);
        for (int i = 0; i < queued; ++i) {
            all.push_back(weft::spawn([](std::atomic<int>& n) -> weft::task<void> {
                n.fetch_add(1, std::memory_order_relaxed);
                co_return;
            }(ran)));
        }
        {
            allocations_refused off;
            EXPECT_TRUE(refused_now());
            // An expired sleep charges the budget; once it is spent the task yields.
            for (int i = 0; i < 2 * weft::detail::worker_base::budget_per_turn; ++i) {
                (void)co_await weft::sleep_for(0ms);
            }
        }
        for (auto& h : all) {
            co_await std::move(h);
        }
        co_return ran.load();
    }());
    EXPECT_EQ(ran, queued);
}

}  // namespace
