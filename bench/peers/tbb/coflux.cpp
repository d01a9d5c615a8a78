// oneTBB peer for weft-bench's Coflux scenarios (see ../README.md).
//
//     tbb-coflux SCENARIO key=value ...
//
// runs one measurement and prints one JSON object per line on stdout:
// {"metric": "<name>", "unit": "<unit>", "value": <number>}
// Diagnostics go to stderr. Exit codes: 0 ok, 1 wrong result, 2 usage error or unsupported
// scenario (pipeline, parked_memory, idle_cpu: TBB tasks cannot suspend, so there is no
// TBB-native equivalent).

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

[[noreturn]] void usage(const std::string& msg) {
    std::fprintf(stderr, "tbb-coflux: %s\nusage: tbb-coflux spawn|fib key=value ...\n", msg.c_str());
    std::exit(2);
}

[[noreturn]] void fail(const std::string& msg) {
    std::fprintf(stderr, "tbb-coflux: %s\n", msg.c_str());
    std::exit(1);
}

void emit(const char* metric, const char* unit, double value) {
    // 9 significant digits is plenty for noisy timings; JSON accepts %g's exponent form too.
    std::printf("{\"metric\": \"%s\", \"unit\": \"%s\", \"value\": %.9g}\n", metric, unit, value);
    std::fflush(stdout);
}

auto elapsed_ns(clock_type::time_point start) -> double {
    return std::chrono::duration<double, std::nano>(clock_type::now() - start).count();
}

class params {
public:
    params(int argc, char** argv) {
        for (int i = 2; i < argc; ++i) {
            std::string_view a = argv[i];
            auto eq = a.find('=');
            if (eq == std::string_view::npos || eq == 0)
                usage("bad argument \"" + std::string(a) + "\", want key=value");
            values_[std::string(a.substr(0, eq))] = std::string(a.substr(eq + 1));
        }
    }

    void warn_unknown(std::initializer_list<std::string_view> keys) const {
        for (const auto& [k, v] : values_)
            if (k != "workers" && std::find(keys.begin(), keys.end(), k) == keys.end())
                std::fprintf(stderr, "tbb-coflux: warning: parameter \"%s\" ignored\n", k.c_str());
    }

    [[nodiscard]] auto uint(const std::string& key, std::uint64_t def) const -> std::uint64_t {
        auto it = values_.find(key);
        if (it == values_.end()) return def;
        const std::string& s = it->second;
        char* end = nullptr;
        unsigned long long v = std::strtoull(s.c_str(), &end, 10);
        if (s.empty() || *end != '\0' || s[0] == '-')
            usage(key + "=" + s + " is not a non-negative integer");
        return v;
    }

    [[nodiscard]] auto positive(const std::string& key, std::uint64_t def) const -> std::uint64_t {
        auto v = uint(key, def);
        if (v == 0) usage(key + " must be > 0");
        return v;
    }

private:
    std::map<std::string, std::string, std::less<>> values_;
};

// spawn: from inside the arena, one task_group gets `tasks` trivial tasks (each writes its
// index into its own slot) and waits for them.
void spawn(tbb::task_arena& arena, std::uint64_t tasks) {
    std::vector<std::uint64_t> results(tasks);
    auto run = [&](std::uint64_t n) {
        auto start = clock_type::now();
        arena.execute([&] {
            tbb::task_group tg;
            for (std::uint64_t i = 0; i < n; ++i)
                tg.run([&results, i] { results[i] = i; });
            tg.wait();
        });
        return elapsed_ns(start);
    };
    run(std::max<std::uint64_t>(tasks / 10, 1));  // warm-up: starts the workers, warms TBB's allocator
    double ns = run(tasks);

    // The check keeps the writes observable (and catches a lost task); it is not timed.
    std::uint64_t sum = 0;
    for (auto r : results) sum += r;
    if (sum != tasks * (tasks - 1) / 2) fail("spawn: wrong sum of results");
    emit("ns_per_task", "ns", ns / static_cast<double>(tasks));
}

// fib forks fib(n-1) into the task_group, computes fib(n-2) in the current task, then joins.
// No sequential cutoff: every call with n >= 2 is a fork.
auto fib(int n) -> std::uint64_t {
    if (n < 2) return static_cast<std::uint64_t>(n);
    std::uint64_t a = 0;
    tbb::task_group tg;
    tg.run([&] { a = fib(n - 1); });
    std::uint64_t b = fib(n - 2);
    tg.wait();
    return a + b;
}

auto fib_seq(int n) -> std::uint64_t {
    std::uint64_t a = 0, b = 1;
    for (; n > 0; --n) b = std::exchange(a, b) + b;
    return a;
}

void fib_scenario(tbb::task_arena& arena, std::uint64_t n64) {
    if (n64 > 40) usage("n must be in [0, 40]");
    int n = static_cast<int>(n64);
    std::uint64_t got = 0;
    arena.execute([&] { got = fib(std::max(n - 5, 0)); });  // warm-up
    auto start = clock_type::now();
    arena.execute([&] { got = fib(n); });
    double ns = elapsed_ns(start);
    if (got != fib_seq(n)) fail("fib(" + std::to_string(n) + ") = " + std::to_string(got) + ", wrong");
    double calls = static_cast<double>(2 * fib_seq(n + 1) - 1);  // 2692537 for n=30
    emit("ns_per_task", "ns", ns / calls);
}

}  // namespace

auto main(int argc, char** argv) -> int {
    if (argc < 2) usage("missing scenario");
    std::string_view scenario = argv[1];
    params p(argc, argv);

    if (scenario == "spawn") {
        p.warn_unknown({"tasks"});
    } else if (scenario == "fib") {
        p.warn_unknown({"n"});
    } else if (scenario == "pipeline" || scenario == "parked_memory" || scenario == "idle_cpu") {
        usage("scenario \"" + std::string(scenario) + "\" is not implemented for TBB (tasks cannot suspend)");
    } else {
        usage("unknown scenario \"" + std::string(scenario) + "\"");
    }

    // workers=N: an arena of N threads (the main thread, which joins it in execute(), counts as
    // one of them). global_control lifts TBB's process-wide cap, which otherwise stays at the
    // number of CPUs even if N is larger.
    auto workers = static_cast<int>(p.uint("workers", 0));
    if (workers == 0) workers = tbb::info::default_concurrency();
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism,
                              static_cast<std::size_t>(workers));
    tbb::task_arena arena(workers);

    if (scenario == "spawn")
        spawn(arena, p.positive("tasks", 1'000'000));
    else
        fib_scenario(arena, p.uint("n", 30));
    return 0;
}
