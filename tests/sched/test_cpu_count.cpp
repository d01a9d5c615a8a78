#include <gtest/gtest.h>
#include <sched.h>

#include <thread>

#include "weft/sched/cpu_count.hpp"
#include "weft/sched/runtime.hpp"

namespace {

TEST(cpu_count, cgroup_v2_cpu_max_is_parsed) {
    using weft::detail::parse_cgroup_cpu_max;
    EXPECT_EQ(parse_cgroup_cpu_max("max 100000"), std::nullopt);
    EXPECT_EQ(parse_cgroup_cpu_max("200000 100000\n"), 2U);
    EXPECT_EQ(parse_cgroup_cpu_max("150000 100000"), 2U);  // 1.5 CPUs: rounded up
    EXPECT_EQ(parse_cgroup_cpu_max("50000 100000"), 1U);
    EXPECT_EQ(parse_cgroup_cpu_max(""), std::nullopt);
    EXPECT_EQ(parse_cgroup_cpu_max("100000"), std::nullopt);
    EXPECT_EQ(parse_cgroup_cpu_max("abc 100000"), std::nullopt);
    EXPECT_EQ(parse_cgroup_cpu_max("100000 0"), std::nullopt);
    EXPECT_EQ(parse_cgroup_cpu_max("-1 100000"), std::nullopt);
}

TEST(cpu_count, cgroup_v1_quota) {
    using weft::detail::cgroup_v1_quota_cpus;
    EXPECT_EQ(cgroup_v1_quota_cpus(-1, 100000), std::nullopt);
    EXPECT_EQ(cgroup_v1_quota_cpus(300000, 100000), 3U);
    EXPECT_EQ(cgroup_v1_quota_cpus(1, 100000), 1U);
}

// A thread restricted to one CPU gets a one-worker runtime by default, whatever the machine
// has (hardware_concurrency() ignored the mask).
TEST(cpu_count, default_workers_follow_the_affinity_mask) {
    unsigned workers = 0;
    unsigned cpus = 0;
    std::thread t([&] {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(0, &one);
        ASSERT_EQ(::sched_setaffinity(0, sizeof(one), &one), 0);
        cpus = weft::available_cpus();
        weft::runtime rt;
        workers = rt.worker_count();
    });
    t.join();
    EXPECT_EQ(cpus, 1U);
    EXPECT_EQ(workers, 1U);
}

}  // namespace
