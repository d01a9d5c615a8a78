#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

#include "weft/bus/message_id.hpp"

namespace {

using weft::bus::message_id;

TEST(message_id, is_a_uuid_v7) {
    const message_id id = message_id::generate();
    EXPECT_FALSE(id.is_nil());
    EXPECT_EQ(id.bytes[6] >> 4, 7);     // version
    EXPECT_EQ(id.bytes[8] >> 6, 0b10);  // variant
}

// unix_ms() reads the 48-bit big-endian timestamp of RFC 9562's UUIDv7 example (appendix A.6):
// 0x017F22E279B0 ms.
TEST(message_id, unix_ms_reads_the_rfc_9562_example) {
    const auto id = message_id::parse("017f22e2-79b0-7cc3-98c4-dc0c0c07398f");
    ASSERT_TRUE(id);
    EXPECT_EQ(id->unix_ms(), 0x017F22E279B0U);
    EXPECT_EQ(id->unix_ms(), 1'645'557'742'000U);
}

TEST(message_id, strictly_increasing_within_a_process) {
    message_id prev = message_id::generate();
    for (int i = 0; i < 200'000; ++i) {  // > 65536: the sequence carries within a millisecond
        const message_id id = message_id::generate();
        ASSERT_LT(prev, id) << i;
        prev = id;
    }
}

TEST(message_id, unique_across_threads) {
    constexpr int threads = 4;
    constexpr int each = 20'000;
    std::vector<std::vector<message_id>> made(threads);
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
        ts.emplace_back([&, t] {
            for (int i = 0; i < each; ++i) {
                made[static_cast<std::size_t>(t)].push_back(message_id::generate());
            }
        });
    }
    for (auto& t : ts) {
        t.join();
    }
    std::set<message_id> all;
    for (const auto& v : made) {
        for (std::size_t i = 1; i < v.size(); ++i) {
            ASSERT_LT(v[i - 1], v[i]);  // monotonic per thread too
        }
        all.insert(v.begin(), v.end());
    }
    EXPECT_EQ(all.size(), std::size_t{threads * each});
}

TEST(message_id, string_round_trip) {
    const message_id id = message_id::generate();
    const std::string s = id.to_string();
    ASSERT_EQ(s.size(), 36U);
    EXPECT_EQ(s[8], '-');
    EXPECT_EQ(s[14], '7');
    EXPECT_EQ(message_id::parse(s), id);
    std::string upper = s;
    for (char& c : upper) {
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    EXPECT_EQ(message_id::parse(upper), id);
}

TEST(message_id, parse_rejects_malformed) {
    EXPECT_FALSE(message_id::parse(""));
    EXPECT_FALSE(message_id::parse("0190b6d1-7c3a-7e01-8a4f-1b2c3d4e5f6"));    // short
    EXPECT_FALSE(message_id::parse("0190b6d1-7c3a-7e01-8a4f-1b2c3d4e5f600"));  // long
    EXPECT_FALSE(message_id::parse("0190b6d1x7c3a-7e01-8a4f-1b2c3d4e5f60"));   // dash
    EXPECT_FALSE(message_id::parse("0190b6d1-7c3a-7e01-8a4f-1b2c3d4e5g60"));   // hex
    EXPECT_TRUE(message_id::parse("00000000-0000-0000-0000-000000000000")->is_nil());
}

}  // namespace
