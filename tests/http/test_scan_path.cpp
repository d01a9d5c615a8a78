#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>

#include "char_class.hpp"
#include "scan.hpp"
#include "weft/http/scan_path.hpp"

namespace weft::http::test {
namespace {

TEST(scan_path, names_round_trip) {
    for (scan_path p : {scan_path::avx2, scan_path::sse2, scan_path::scalar}) {
        EXPECT_EQ(parse_scan_path(to_string(p)), p);
    }
    EXPECT_FALSE(parse_scan_path("AVX2").has_value());
    EXPECT_FALSE(parse_scan_path("neon").has_value());
    EXPECT_TRUE(scan_path_supported(scan_path::scalar));
}

// Without WEFT_HTTP_SCAN the widest path the CPU has is chosen. CTest also runs this with the
// variable set to each path (tests/CMakeLists.txt), each in a process of its own: the variable
// is read at the first parse. Every other test here restores the path it changes.
TEST(scan_path, environment_forces_the_path) {
    const char* env = std::getenv("WEFT_HTTP_SCAN");
    if (env == nullptr) {
        const scan_path widest = scan_path_supported(scan_path::avx2)   ? scan_path::avx2
                                 : scan_path_supported(scan_path::sse2) ? scan_path::sse2
                                                                        : scan_path::scalar;
        EXPECT_EQ(active_scan_path(), widest);
        return;
    }
    const auto wanted = parse_scan_path(env);
    ASSERT_TRUE(wanted.has_value()) << env;
    if (scan_path_supported(*wanted)) {
        EXPECT_EQ(active_scan_path(), *wanted);
    } else {
        EXPECT_NE(active_scan_path(), *wanted);  // fell back to one the CPU has
    }
}

TEST(scan_path, set_and_restore) {
    const scan_path saved = active_scan_path();
    ASSERT_TRUE(set_scan_path(scan_path::scalar));
    EXPECT_EQ(active_scan_path(), scan_path::scalar);
    EXPECT_TRUE(set_scan_path(saved));
    EXPECT_EQ(active_scan_path(), saved);
}

// Every path finds the same stop byte as a byte-by-byte reference, for every start alignment
// and length, over bytes drawn to hit each class often.
TEST(scan_path, every_path_agrees_with_the_reference) {
    const auto ref_target = [](const char* p, const char* end) {
        while (p != end && detail::has(*p, detail::target_bit)) {
            ++p;
        }
        return p;
    };
    const auto ref_value = [](const char* p, const char* end) {
        while (p != end && detail::has(*p, detail::value_bit)) {
            ++p;
        }
        return p;
    };
    const scan_path saved = active_scan_path();
    std::mt19937 rng{12345};
    const std::string specials = std::string("\t\r\n ?#\x7f\x80\xff\x01\x1f", 11) + '\0';
    for (scan_path path : {scan_path::avx2, scan_path::sse2, scan_path::scalar}) {
        if (!scan_path_supported(path)) {
            continue;
        }
        ASSERT_TRUE(set_scan_path(path));
        const detail::scan_ops& ops = detail::active_scan();
        for (int round = 0; round < 3000; ++round) {
            std::string buf(static_cast<std::size_t>(rng() % 130), 'x');
            const unsigned density = 1 + rng() % 40;  // 1 in `density` bytes is special
            for (char& c : buf) {
                const unsigned r = rng();
                c = r % density == 0 ? specials[(r / 64) % specials.size()]
                                     : static_cast<char>(0x21 + (r / 64) % 0x5e);
            }
            for (std::size_t from = 0; from <= buf.size() && from < 40; ++from) {
                const char* b = buf.data() + from;
                const char* e = buf.data() + buf.size();
                ASSERT_EQ(ops.target_stop(b, e), ref_target(b, e)) << to_string(path);
                ASSERT_EQ(ops.value_stop(b, e), ref_value(b, e)) << to_string(path);
            }
        }
    }
    set_scan_path(saved);
}

}  // namespace
}  // namespace weft::http::test
