#include "weft/sched/cpu_count.hpp"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace weft {

namespace detail {

auto cgroup_v1_quota_cpus(long long quota_us, long long period_us) -> std::optional<unsigned> {
    if (quota_us <= 0 || period_us <= 0) {
        return std::nullopt;
    }
    return static_cast<unsigned>((quota_us + period_us - 1) / period_us);
}

auto parse_cgroup_cpu_max(std::string_view line) -> std::optional<unsigned> {
    while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) {
        line.remove_suffix(1);
    }
    const auto space = line.find(' ');
    if (space == std::string_view::npos) {
        return std::nullopt;
    }
    const std::string_view quota = line.substr(0, space);
    const std::string_view period = line.substr(space + 1);
    long long q = 0;
    long long p = 0;
    const auto rq = std::from_chars(quota.data(), quota.data() + quota.size(), q);
    const auto rp = std::from_chars(period.data(), period.data() + period.size(), p);
    if (rq.ec != std::errc{} || rq.ptr != quota.data() + quota.size() || rp.ec != std::errc{} ||
        rp.ptr != period.data() + period.size()) {
        return std::nullopt;  // "max" (unlimited) or malformed
    }
    return cgroup_v1_quota_cpus(q, p);
}

}  // namespace detail

namespace {

auto read_first_line(const std::string& path) -> std::optional<std::string> {
    std::ifstream f(path);
    std::string line;
    if (!f || !std::getline(f, line)) {
        return std::nullopt;
    }
    return line;
}

auto min_opt(std::optional<unsigned> a, std::optional<unsigned> b) -> std::optional<unsigned> {
    if (!a) {
        return b;
    }
    if (!b) {
        return a;
    }
    return std::min(*a, *b);
}

// The tightest CPU quota on the way from this process's cgroup up to the root.
auto cgroup_quota_cpus() -> std::optional<unsigned> {
    std::optional<unsigned> best;
    std::ifstream self("/proc/self/cgroup");
    std::string line;
    std::string v2_path;
    std::string v1_path;
    while (std::getline(self, line)) {
        if (line.rfind("0::", 0) == 0) {
            v2_path = line.substr(3);
        } else if (const auto c = line.find(":cpu,cpuacct:"); c != std::string::npos) {
            v1_path = line.substr(c + 13);
        } else if (const auto d = line.find(":cpu:"); d != std::string::npos) {
            v1_path = line.substr(d + 5);
        }
    }
    if (!v2_path.empty()) {
        for (std::string p = v2_path;;) {
            if (auto l = read_first_line("/sys/fs/cgroup" + (p == "/" ? std::string() : p) +
                                         "/cpu.max")) {
                best = min_opt(best, detail::parse_cgroup_cpu_max(*l));
            }
            if (p.empty() || p == "/") {
                break;
            }
            p = p.substr(0, p.find_last_of('/'));
        }
    }
    for (const std::string root : {"/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"}) {
        const std::string dir = root + (v1_path == "/" ? std::string() : v1_path);
        auto q = read_first_line(dir + "/cpu.cfs_quota_us");
        auto p = read_first_line(dir + "/cpu.cfs_period_us");
        if (q && p) {
            try {
                best = min_opt(best, detail::cgroup_v1_quota_cpus(std::stoll(*q), std::stoll(*p)));
            } catch (const std::exception&) {
                // unreadable: no quota from v1
            }
            break;
        }
    }
    return best;
}

}  // namespace

auto available_cpus() -> unsigned {
    unsigned n = 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof(set), &set) == 0) {
        n = static_cast<unsigned>(CPU_COUNT(&set));
    }
    if (n == 0) {
        n = std::thread::hardware_concurrency();
    }
    if (auto q = cgroup_quota_cpus()) {
        n = std::min(n, *q);
    }
    return std::max(1U, n);
}

}  // namespace weft
