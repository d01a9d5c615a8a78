// Core data structures under contention: the work-stealing deque with one owner and several
// thieves delivers every item exactly once; stop_state callbacks race registration.

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "weft/core/detail/work_deque.hpp"
#include "weft/core/stop.hpp"

namespace {

TEST(core_stress, work_deque_owner_and_thieves_deliver_each_item_once) {
    weft::detail::work_deque d;
    constexpr std::uintptr_t items = 200'000;
    auto seen = std::make_unique<std::atomic<int>[]>(items + 1);
    std::atomic<bool> done{false};
    std::vector<std::thread> thieves;
    for (int t = 0; t < 3; ++t) {
        thieves.emplace_back([&] {
            while (!done.load(std::memory_order_acquire) || d.size() != 0) {
                if (void* p = d.steal()) {
                    seen[reinterpret_cast<std::uintptr_t>(p) >> 4].fetch_add(1);
                }
            }
        });
    }
    std::uintptr_t next = 1;
    while (next <= items) {
        // Push a few, pop some back (owner LIFO end), while thieves take from the top.
        for (int k = 0; k < 7 && next <= items; ++k) {
            if (!d.push(reinterpret_cast<void*>(next << 4))) {
                break;
            }
            ++next;
        }
        for (int k = 0; k < 3; ++k) {
            if (void* p = d.pop()) {
                seen[reinterpret_cast<std::uintptr_t>(p) >> 4].fetch_add(1);
            }
        }
    }
    while (void* p = d.pop()) {
        seen[reinterpret_cast<std::uintptr_t>(p) >> 4].fetch_add(1);
    }
    done.store(true, std::memory_order_release);
    for (auto& t : thieves) {
        t.join();
    }
    std::uintptr_t bad = 0;
    for (std::uintptr_t i = 1; i <= items; ++i) {
        bad += seen[i].load() == 1 ? 0 : 1;
    }
    EXPECT_EQ(bad, 0U);
}

TEST(core_stress, stop_callbacks_race_registration_and_request) {
    for (int round = 0; round < 2000; ++round) {
        weft::stop_state s;
        std::atomic<int> calls{0};
        std::thread requester([&] { s.request_stop(); });
        std::vector<std::unique_ptr<weft::stop_callback<std::function<void()>>>> cbs;
        for (int i = 0; i < 4; ++i) {
            cbs.push_back(std::make_unique<weft::stop_callback<std::function<void()>>>(
                &s, std::function<void()>([&] { calls.fetch_add(1); })));
        }
        requester.join();
        EXPECT_EQ(calls.load(), 4);  // each exactly once: before or after the request
        cbs.clear();
    }
}

}  // namespace

namespace {

// The owner pushes, pops and moves half of its deque away in one batch (what it does when the
// deque is full) while thieves steal one at a time: every item is taken exactly once.
TEST(core_stress, owner_batches_and_pops_while_thieves_steal) {
    weft::detail::work_deque d;
    constexpr std::uintptr_t items = 300'000;
    auto seen = std::make_unique<std::atomic<int>[]>(items + 1);
    std::atomic<bool> done{false};
    std::vector<std::thread> thieves;
    for (int t = 0; t < 2; ++t) {
        thieves.emplace_back([&] {
            while (!done.load(std::memory_order_acquire) || d.size() != 0) {
                if (void* p = d.steal()) {
                    seen[reinterpret_cast<std::uintptr_t>(p) >> 4].fetch_add(1);
                }
            }
        });
    }
    std::uintptr_t next = 1;
    void* batch[512];
    std::uint64_t round = 0;
    while (next <= items) {
        for (int k = 0; k < 40 && next <= items; ++k) {
            if (!d.push(reinterpret_cast<void*>(next << 4))) {
                break;
            }
            ++next;
        }
        const int pops = static_cast<int>(++round % 7) * 5;
        for (int k = 0; k < pops; ++k) {
            if (void* p = d.pop()) {
                seen[reinterpret_cast<std::uintptr_t>(p) >> 4].fetch_add(1);
            }
        }
        if (round % 5 == 0) {
            const std::int64_t n = d.steal_batch(batch, 512);
            for (std::int64_t i = 0; i < n; ++i) {
                seen[reinterpret_cast<std::uintptr_t>(batch[i]) >> 4].fetch_add(1);
            }
        }
    }
    while (void* p = d.pop()) {
        seen[reinterpret_cast<std::uintptr_t>(p) >> 4].fetch_add(1);
    }
    done.store(true, std::memory_order_release);
    for (auto& t : thieves) {
        t.join();
    }
    std::uintptr_t bad = 0;
    for (std::uintptr_t i = 1; i <= items; ++i) {
        bad += seen[i].load() == 1 ? 0 : 1;
    }
    EXPECT_EQ(bad, 0U);
}

}  // namespace
