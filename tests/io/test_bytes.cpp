#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <thread>

#include "weft/io/bytes.hpp"

namespace {

auto as_text(const weft::bytes& b) -> std::string {
    return {reinterpret_cast<const char*>(b.data()), b.size()};
}

TEST(bytes, copy_of_owns_a_copy) {
    std::string src = "hello";
    auto b = weft::bytes::copy_of(std::as_bytes(std::span{src}));
    src[0] = 'j';
    EXPECT_EQ(as_text(b), "hello");
    EXPECT_EQ(b.size(), 5U);
}

TEST(bytes, copies_and_slices_share_memory) {
    const std::string src = "0123456789";
    auto b = weft::bytes::copy_of(std::as_bytes(std::span{src}));
    auto c = b;
    auto s = b.slice(2, 3);
    EXPECT_EQ(c.data(), b.data());
    EXPECT_EQ(s.data(), b.data() + 2);
    EXPECT_EQ(as_text(s), "234");
    EXPECT_EQ(as_text(b.slice(8, 100)), "89");  // clamped
    EXPECT_TRUE(b.slice(20, 1).empty());
    b.reset();
    EXPECT_EQ(as_text(c), "0123456789");  // still alive through the other references
}

TEST(bytes, last_reference_on_another_thread_releases) {
    const std::string src(1000, 'x');
    auto b = weft::bytes::copy_of(std::as_bytes(std::span{src}));
    std::thread t([c = b]() mutable { c.reset(); });
    t.join();
    EXPECT_EQ(b.size(), 1000U);  // ASan/LSan: no leak, no use after free
}

TEST(bytes, empty_by_default) {
    weft::bytes b;
    EXPECT_TRUE(b.empty());
    EXPECT_EQ(b.data(), nullptr);
    weft::bytes moved = std::move(b);
    EXPECT_TRUE(moved.empty());
}

}  // namespace
