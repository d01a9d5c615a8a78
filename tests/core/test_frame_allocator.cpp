#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <thread>

#include "weft/core/frame_allocator.hpp"
#include "weft/core/join_handle.hpp"
#include "weft/core/sync_wait.hpp"

// Counts every global operator new of this binary, so a test can prove a loop allocates nothing.
namespace {
thread_local std::uint64_t tl_news = 0;
}
// NOLINTBEGIN
auto operator new(std::size_t n) -> void* {
    ++tl_news;
    if (void* p = std::malloc(n == 0 ? 1 : n)) {
        return p;
    }
    throw std::bad_alloc();
}
// g++ 12 at -O1 inlines these into GoogleTest's `new TestClass`, takes that for the library's
// operator new, and reports the free() of its pointer as a mismatch: this file replaces both.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop
// NOLINTEND

namespace {

auto leaf(int v) -> weft::task<int> { co_return v + 1; }

auto fork_loop(int n) -> weft::task<long> {
    long sum = 0;
    for (int i = 0; i < n; ++i) {
        auto h = co_await weft::fork(leaf(i));
        sum += co_await std::move(h);
    }
    co_return sum;
}

TEST(frame_allocator, fork_steady_state_takes_nothing_from_the_system) {
    // Warm up: the first frames of each size class come from malloc.
    EXPECT_EQ(weft::sync_wait(fork_loop(1000)), 1000L * 1001 / 2);
    const auto before = weft::this_thread_frame_stats();
    const std::uint64_t news_before = tl_news;
    constexpr int forks = 100'000;
    auto t = fork_loop(forks);  // this frame is counted: it is the one allocation outside
    const std::uint64_t news_after_create = tl_news;
    EXPECT_EQ(weft::sync_wait(std::move(t)), static_cast<long>(forks) * (forks + 1) / 2);
    const auto after = weft::this_thread_frame_stats();
    EXPECT_EQ(after.system_allocs - before.system_allocs, 0U);
    EXPECT_GE(after.recycled - before.recycled, static_cast<std::uint64_t>(forks));
    EXPECT_EQ(news_after_create, news_before);
    // sync_wait's own bookkeeping may allocate a few times; the forks none.
    EXPECT_LT(tl_news - news_before, 8U);
}

TEST(frame_allocator, recycles_freed_frames) {
    void* a = weft::detail::frame_alloc(100);
    weft::detail::frame_free(a, 100);
    const auto before = weft::this_thread_frame_stats();
    void* b = weft::detail::frame_alloc(120);  // same 128-byte class
    EXPECT_EQ(a, b);
    weft::detail::frame_free(b, 120);
    EXPECT_EQ(weft::this_thread_frame_stats().recycled, before.recycled + 1);
}

// In a weft built with AddressSanitizer a cached frame is poisoned, past its link word, on both
// ways into the cache (the inline path onto a non-empty list, the compiled path onto an empty
// one) and unpoisoned when it is handed out again. Elsewhere nothing is poisoned.
TEST(frame_allocator, cached_frames_are_poisoned_exactly_when_weft_is_built_with_asan) {
    constexpr std::size_t size = 1000;  // a class of its own in these tests
    void* a = weft::detail::frame_alloc(size);
    void* b = weft::detail::frame_alloc(size);
    weft::detail::frame_free(a, size);  // the list was empty, or the cap applies: either path
    weft::detail::frame_free(b, size);  // onto a non-empty list: the inline path
    auto poisoned = [](void* p) {
#if WEFT_SANITIZE_ADDRESS
        return __asan_address_is_poisoned(static_cast<char*>(p) + 64) != 0;
#else
        (void)p;
        return false;
#endif
    };
    EXPECT_EQ(poisoned(a), WEFT_SANITIZE_ADDRESS == 1);
    EXPECT_EQ(poisoned(b), WEFT_SANITIZE_ADDRESS == 1);
    void* c = weft::detail::frame_alloc(size);  // the list's head: b
    EXPECT_EQ(c, b);
    EXPECT_FALSE(poisoned(c));
    static_cast<char*>(c)[size - 1] = 1;  // a report here under ASan if it were still poisoned
    weft::detail::frame_free(c, size);
}

TEST(frame_allocator, large_frames_go_to_the_system) {
    const auto before = weft::this_thread_frame_stats();
    void* p = weft::detail::frame_alloc(weft::detail::max_recycled_frame + 1);
    weft::detail::frame_free(p, weft::detail::max_recycled_frame + 1);
    const auto after = weft::this_thread_frame_stats();
    EXPECT_EQ(after.system_allocs, before.system_allocs + 1);
    EXPECT_EQ(after.system_frees, before.system_frees + 1);
}

// live_frames() counts frames made on one thread and freed on another, and by threads that
// have exited since.
TEST(frame_allocator, live_frames_counts_across_threads) {
    const std::int64_t base = weft::live_frames();
    auto t = leaf(1);  // made here
    EXPECT_EQ(weft::live_frames(), base + 1);
    std::thread([&] {
        auto other = leaf(2);  // made and kept past this thread's exit
        t = std::move(other);  // the first frame is freed here
    }).join();
    EXPECT_EQ(weft::live_frames(), base + 1);
    t = {};
    EXPECT_EQ(weft::live_frames(), base);
}

}  // namespace
