// The rejection table (rejection_table.hpp): every row whole, cut once at every byte, fed one
// byte at a time, and through every scan path the CPU has; each must give the row's status and
// close decision, and every cut the same record as the whole.

#include <gtest/gtest.h>

#include <numeric>

#include "http/connection_driver.hpp"
#include "http/rejection_table.hpp"
#include "test_util.hpp"
#include "weft/http/scan_path.hpp"

namespace weft::http::test {
namespace {

class rejections : public ::testing::TestWithParam<scan_path> {
protected:
    void SetUp() override {
        if (!scan_path_supported(GetParam())) {
            GTEST_SKIP() << "this CPU has no " << to_string(GetParam());
        }
        saved_ = active_scan_path();
        ASSERT_TRUE(set_scan_path(GetParam()));
    }
    void TearDown() override { set_scan_path(saved_); }

private:
    scan_path saved_ = scan_path::scalar;
};

TEST_P(rejections, table_has_forty_hostile_rows) {
    const auto rows = rejection_rows();
    const auto hostile = std::count_if(rows.begin(), rows.end(),
                                       [](const rejection_row& r) { return r.status != 0; });
    EXPECT_GE(hostile, 40);
}

TEST_P(rejections, each_row_whole_split_and_bytewise) {
    for (const rejection_row& row : rejection_rows()) {
        SCOPED_TRACE(row.name);
        const std::string& in = row.request;
        const connection_record whole = run_connection(in, {}, row.limits);
        EXPECT_EQ(whole.status(), row.status) << describe(whole.error);
        EXPECT_EQ(whole.closes(), row.closes);
        EXPECT_FALSE(whole.partial);
        if (row.status == 0) {
            EXPECT_EQ(whole.requests.size(), 1U);
        }
        // Every single cut (every stress_scale()-th under the sanitizers; the byte-by-byte run
        // below still cuts at every byte).
        const auto stride = static_cast<std::size_t>(weft::test::stress_scale());
        for (std::size_t cut = 1; cut < in.size(); cut += stride) {
            const connection_record split = run_connection(in, {cut}, row.limits);
            ASSERT_EQ(split, whole) << "cut at " << cut;
        }
        std::vector<std::size_t> every(in.size() > 0 ? in.size() - 1 : 0);
        std::iota(every.begin(), every.end(), std::size_t{1});
        EXPECT_EQ(run_connection(in, every, row.limits), whole) << "byte by byte";
    }
}

INSTANTIATE_TEST_SUITE_P(paths,
                         rejections,
                         ::testing::Values(scan_path::avx2, scan_path::sse2, scan_path::scalar),
                         [](const auto& info) { return std::string{to_string(info.param)}; });

}  // namespace
}  // namespace weft::http::test
