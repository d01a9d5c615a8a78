#include <gtest/gtest.h>

#include <memory_resource>
#include <stdexcept>
#include <string>

#include "weft/core/sync_wait.hpp"
#include "weft/core/task.hpp"

namespace {

auto answer() -> weft::task<int> { co_return 42; }

auto add(int a, int b) -> weft::task<int> {
    int x = co_await answer();
    co_return x - 42 + a + b;
}

TEST(task, returns_value) { EXPECT_EQ(weft::sync_wait(add(2, 3)), 5); }

TEST(task, is_lazy) {
    bool started = false;
    auto body = [&]() -> weft::task<void> {
        started = true;
        co_return;
    };
    auto t = body();
    EXPECT_FALSE(started);
    weft::sync_wait(std::move(t));
    EXPECT_TRUE(started);
}

TEST(task, destroying_unstarted_task_frees_frame) {
    auto s = std::make_shared<int>(1);
    {
        auto t = [](std::shared_ptr<int> p) -> weft::task<int> { co_return *p; }(s);
        EXPECT_EQ(s.use_count(), 2);
    }
    EXPECT_EQ(s.use_count(), 1);
}

TEST(task, void_and_reference) {
    int storage = 7;
    auto ref = [&]() -> weft::task<int&> { co_return storage; };
    auto outer = [&]() -> weft::task<void> {
        int& r = co_await ref();
        r = 9;
    };
    weft::sync_wait(outer());
    EXPECT_EQ(storage, 9);
}

TEST(task, move_only_value) {
    auto t = []() -> weft::task<std::unique_ptr<std::string>> {
        co_return std::make_unique<std::string>("hi");
    };
    EXPECT_EQ(*weft::sync_wait(t()), "hi");
}

TEST(task, exception_is_rethrown_at_await) {
    auto thrower = []() -> weft::task<int> {
        throw std::runtime_error("boom");
        co_return 1;
    };
    auto catcher = [&]() -> weft::task<std::string> {
        try {
            (void)co_await thrower();
        } catch (const std::runtime_error& e) {
            co_return e.what();
        }
        co_return "none";
    };
    EXPECT_EQ(weft::sync_wait(catcher()), "boom");
    EXPECT_THROW(weft::sync_wait(thrower()), std::runtime_error);
}

auto chain(int n) -> weft::task<int> {
    if (n == 0) {
        co_return 0;
    }
    co_return co_await chain(n - 1) + 1;
}

// Symmetric transfer: a million nested awaits must not grow the stack (each level would take
// ~100 bytes of native stack otherwise: 100 MB, far past the 8 MB default).
TEST(task, million_deep_await_chain_does_not_grow_stack) {
    EXPECT_EQ(weft::sync_wait(chain(1'000'000)), 1'000'000);
}

auto with_resource(std::allocator_arg_t, std::pmr::memory_resource*, int v) -> weft::task<int> {
    co_return v * 2;
}

TEST(task, allocates_frame_from_given_memory_resource) {
    std::pmr::monotonic_buffer_resource upstream;
    struct counting : std::pmr::memory_resource {
        std::pmr::memory_resource* up;
        int allocs = 0;
        int frees = 0;
        explicit counting(std::pmr::memory_resource* u) : up(u) {}
        auto do_allocate(std::size_t n, std::size_t a) -> void* override {
            ++allocs;
            return up->allocate(n, a);
        }
        void do_deallocate(void* p, std::size_t n, std::size_t a) override {
            ++frees;
            up->deallocate(p, n, a);
        }
        auto do_is_equal(const memory_resource& o) const noexcept -> bool override {
            return this == &o;
        }
    } res(&upstream);
    EXPECT_EQ(weft::sync_wait(with_resource(std::allocator_arg, &res, 21)), 42);
    EXPECT_EQ(res.allocs, 1);
    EXPECT_EQ(res.frees, 1);
}

TEST(task, inherits_stop_token_of_awaiter) {
    auto inner = []() -> weft::task<bool> {
        auto tok = co_await weft::get_stop_token();
        co_return tok.stop_possible();
    };
    auto outer = [&]() -> weft::task<bool> { co_return co_await inner(); };
    EXPECT_TRUE(weft::sync_wait(outer()));
}

}  // namespace
