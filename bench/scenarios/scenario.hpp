#pragma once

// The command-line protocol every weft-bench scenario program speaks (tools/weft-bench/README):
//   PROG SCENARIO key=value ...
// runs one measurement and prints one JSON object per metric on stdout. Exit 2: unknown
// scenario or bad parameter.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace weft::bench {

class params {
public:
    params(int argc, char** argv);
    [[nodiscard]] auto get(const std::string& key, std::int64_t fallback) const -> std::int64_t;

private:
    std::map<std::string, std::int64_t> values_;
};

void emit(const char* metric, const char* unit, double value);
[[noreturn]] void fail(const std::string& message, int code = 1);

/// Resident set size of this process, in bytes (VmRSS).
[[nodiscard]] auto rss_bytes() -> std::int64_t;
/// CPU time (user + system) this process used so far, in seconds.
[[nodiscard]] auto process_cpu_seconds() -> double;

/// Wall time of `fn()`, in nanoseconds.
template <typename Fn>
auto time_ns(Fn&& fn) -> double {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const auto t1 = std::chrono::steady_clock::now();
    return static_cast<double>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
}

/// Runs the scenario named argv[1] from `table`; returns the process exit code.
auto dispatch(int argc,
              char** argv,
              const std::map<std::string, std::function<void(const params&)>>& table) -> int;

}  // namespace weft::bench
