#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <string_view>
#include <thread>

#include "weft/io/buffer.hpp"

namespace {

auto as_bytes(std::string_view s) -> std::span<const std::byte> {
    return std::as_bytes(std::span{s});
}
auto text(std::span<const std::byte> b) -> std::string {
    return {reinterpret_cast<const char*>(b.data()), b.size()};
}

TEST(buffer, appends_and_grows_keeping_content) {
    weft::buffer b;
    std::string expect;
    for (int i = 0; i < 1000; ++i) {
        const std::string piece = "piece " + std::to_string(i) + ";";
        b.append(as_bytes(piece));
        expect += piece;
    }
    EXPECT_EQ(text(b.span()), expect);
    EXPECT_GE(b.capacity(), b.size());
}

TEST(buffer, prepare_and_commit) {
    weft::buffer b;
    auto room = b.prepare(5);
    std::memcpy(room.data(), "hello", 5);
    b.commit(3);
    EXPECT_EQ(text(b.span()), "hel");
}

TEST(buffer, freeze_shares_storage_without_copy) {
    weft::buffer b;
    b.append(as_bytes("frozen"));
    const std::byte* where = b.data();
    weft::bytes f = std::move(b).freeze();
    EXPECT_EQ(f.data(), where);
    EXPECT_EQ(text(f.span()), "frozen");
    EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move): documented state
}

TEST(buffer, storage_is_reused_in_steady_state) {
    { weft::buffer warm(4000); }
    const auto before = weft::this_thread_buffer_stats();
    for (int i = 0; i < 100; ++i) {
        weft::buffer b(3000);
        b.append(as_bytes("x"));
    }
    const auto after = weft::this_thread_buffer_stats();
    EXPECT_EQ(after.mallocs, before.mallocs);
    EXPECT_EQ(after.reused - before.reused, 100U);
}

TEST(buffer, frozen_bytes_released_on_another_thread) {
    weft::buffer b(2048);
    b.append(as_bytes("cross-thread"));
    weft::bytes f = std::move(b).freeze();
    std::thread t([g = std::move(f)]() mutable { g.reset(); });
    t.join();  // the block went to that thread's pool (and is freed with it): no leak, no race
}

TEST(buffer, huge_buffers_bypass_the_pool) {
    weft::buffer b(4 << 20);
    b.append(as_bytes("big"));
    EXPECT_GE(b.capacity(), std::size_t{4} << 20);
}

}  // namespace
