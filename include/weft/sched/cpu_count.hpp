#pragma once

#include <optional>
#include <string_view>

namespace weft {

/// The number of CPUs this process may actually use: the CPUs in the calling thread's affinity
/// mask (sched_getaffinity), capped by the CPU quota of its cgroup where one is set (cgroup v2
/// `cpu.max` of the process's cgroup and its ancestors, or v1 `cpu.cfs_quota_us` /
/// `cpu.cfs_period_us`), rounded up; at least 1. What `runtime_options{.workers = 0}` uses.
/// std::thread::hardware_concurrency() counts every online CPU, so a container limited to
/// 2 CPUs on a 64-core host would start 64 workers fighting over 2.
[[nodiscard]] auto available_cpus() -> unsigned;

namespace detail {
/// Parses a cgroup v2 `cpu.max` line ("max 100000" or "QUOTA PERIOD"): the quota in CPUs,
/// rounded up, or nullopt when unlimited or malformed.
[[nodiscard]] auto parse_cgroup_cpu_max(std::string_view line) -> std::optional<unsigned>;
/// The same for cgroup v1's two files: quota -1 means unlimited.
[[nodiscard]] auto cgroup_v1_quota_cpus(long long quota_us, long long period_us)
    -> std::optional<unsigned>;
}  // namespace detail

}  // namespace weft
