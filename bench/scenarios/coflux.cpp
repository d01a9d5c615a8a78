// weft's side of the `coflux` suite (seed 001). Each scenario mirrors the peers in
// bench/peers/ (same structure, same work per task) and prints its metric as JSON.

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <thread>
#include <vector>

#include "scenario.hpp"
#include "weft/weft.hpp"

// Counts global operator new, so `fork` can report heap allocations per fork honestly
// (frames come from weft's recycling cache, which uses malloc directly: counted separately).
namespace {
std::atomic<std::uint64_t> g_news{0};
}
auto operator new(std::size_t n) -> void* {
    g_news.fetch_add(1, std::memory_order_relaxed);
    if (void* p = std::malloc(n == 0 ? 1 : n)) {
        return p;
    }
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

using weft::bench::emit;
using weft::bench::params;
using weft::bench::time_ns;

auto workers_of(const params& p) -> unsigned { return static_cast<unsigned>(p.get("workers", 0)); }

// ---- fork: create + await + destroy on the inline executor -------------------------------

auto leaf(std::int64_t v) -> weft::task<std::int64_t> { co_return v; }

auto fork_loop(std::int64_t n) -> weft::task<std::int64_t> {
    std::int64_t sum = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        auto h = co_await weft::fork(leaf(i));
        sum += co_await std::move(h);
    }
    co_return sum;
}

void fork_scenario(const params& p) {
    const std::int64_t n = p.get("forks", 100'000);
    (void)weft::sync_wait(fork_loop(n / 10 + 1));  // warm the frame cache
    auto task = fork_loop(n);
    const auto frames0 = weft::this_thread_frame_stats().system_allocs;
    const auto news0 = g_news.load();
    std::int64_t sum = 0;
    const double ns = time_ns([&] { sum = weft::sync_wait(std::move(task)); });
    const auto news = g_news.load() - news0;
    const auto frames = weft::this_thread_frame_stats().system_allocs - frames0;
    if (sum != n * (n - 1) / 2) {
        weft::bench::fail("fork: wrong sum");
    }
    emit("ns_per_fork", "ns", ns / static_cast<double>(n));
    emit("allocs_per_fork", "allocs", static_cast<double>(news + frames) / static_cast<double>(n));
}

// ---- spawn: M:N spawn + complete of trivial tasks, joined through a scope -----------------

void spawn_scenario(const params& p) {
    const std::int64_t n = p.get("tasks", 1'000'000);
    std::vector<std::int64_t> results(static_cast<std::size_t>(n));
    // records=1: runtime_options::task_records on (what a dump costs to keep ready).
    weft::runtime rt{{.workers = workers_of(p), .task_records = p.get("records", 0) != 0}};
    auto run = [&](std::int64_t count) {
        return time_ns([&] {
            rt.block_on(weft::with_scope([&](weft::scope& s) -> weft::task<void> {
                for (std::int64_t i = 0; i < count; ++i) {
                    s.spawn([](std::int64_t* slot, std::int64_t v) -> weft::task<void> {
                        *slot = v;
                        co_return;
                    }(&results[static_cast<std::size_t>(i)], i));
                }
                co_return;
            }));
        });
    };
    (void)run(n / 10 + 1);
    const double ns = run(n);
    std::int64_t sum = 0;
    for (auto v : results) {
        sum += v;
    }
    if (sum != n * (n - 1) / 2) {
        weft::bench::fail("spawn: lost a task");
    }
    emit("ns_per_task", "ns", ns / static_cast<double>(n));
}

// ---- pipeline: C concurrent chains of D stages, each stage a new task ---------------------

auto stage(std::int64_t i, std::int64_t d) -> weft::task<std::int64_t> {
    if (i == d) {
        co_return 1;
    }
    auto next = weft::spawn(stage(i + 1, d));
    co_return co_await std::move(next) + 1;
}

auto pipelines(std::int64_t c, std::int64_t d, std::int64_t iters) -> weft::task<bool> {
    std::vector<weft::join_handle<std::int64_t>> hs;
    hs.reserve(static_cast<std::size_t>(c));
    bool ok = true;
    for (std::int64_t it = 0; it < iters; ++it) {
        for (std::int64_t k = 0; k < c; ++k) {
            hs.push_back(weft::spawn(stage(1, d)));  // the driver spawns stage 1: D tasks each
        }
        for (auto& h : hs) {
            ok = ok && (co_await std::move(h) == d);
        }
        hs.clear();
    }
    co_return ok;
}

void pipeline_scenario(const params& p) {
    const std::int64_t c = p.get("C", 8);
    const std::int64_t d = p.get("D", 5);
    const std::int64_t iters = p.get("iters", 2000);
    weft::runtime rt{{.workers = workers_of(p)}};
    (void)rt.block_on(pipelines(c, d, iters / 10 + 1));
    bool ok = false;
    const double ns = time_ns([&] { ok = rt.block_on(pipelines(c, d, iters)); });
    if (!ok) {
        weft::bench::fail("pipeline: wrong result");
    }
    emit("ns_per_pipeline", "ns", ns / static_cast<double>(iters * c));
}

// ---- fib: fork-join with continuation stealing ---------------------------------------------

auto fib(int n) -> weft::task<std::int64_t> {
    if (n < 2) {
        co_return n;
    }
    auto a = co_await weft::fork(fib(n - 1));
    std::int64_t b = co_await fib(n - 2);
    co_return co_await std::move(a) + b;
}

void fib_scenario(const params& p) {
    const int n = static_cast<int>(p.get("n", 30));
    weft::runtime rt{{.workers = workers_of(p)}};
    (void)rt.block_on(fib(n > 5 ? n - 5 : n));
    std::int64_t v = 0;
    const double ns = time_ns([&] { v = rt.block_on(fib(n)); });
    std::int64_t a = 0;
    std::int64_t b = 1;
    for (int i = 0; i < n; ++i) {
        const std::int64_t t = a + b;
        a = b;
        b = t;
    }
    if (v != a) {
        weft::bench::fail("fib: wrong result");
    }
    // calls = 2 * fib(n + 1) - 1
    emit("ns_per_task", "ns", ns / static_cast<double>(2 * b - 1));
}

// ---- parked_memory: bytes per task suspended on a timer ------------------------------------

void parked_memory_scenario(const params& p) {
    const std::int64_t n = p.get("tasks", 100'000);
    weft::runtime rt{{.workers = workers_of(p)}};
    std::atomic<std::int64_t> parked{0};
    rt.block_on([]() -> weft::task<void> { co_return; }());  // workers started and warm
    const std::int64_t before = weft::bench::rss_bytes();
    rt.block_on([&]() -> weft::task<void> {
        for (std::int64_t i = 0; i < n; ++i) {
            weft::spawn([](std::atomic<std::int64_t>* parked) -> weft::task<void> {
                parked->fetch_add(1, std::memory_order_relaxed);
                auto r = co_await weft::sleep_for(std::chrono::hours(1));
                (void)r;
            }(&parked))
                .detach();
        }
        while (parked.load() != n) {
            co_await weft::yield();
        }
        auto r = co_await weft::sleep_for(std::chrono::milliseconds(20));  // all armed
        (void)r;
    }());
    const std::int64_t after = weft::bench::rss_bytes();
    emit("bytes_per_parked_task", "bytes",
         static_cast<double>(after - before) / static_cast<double>(n));
    std::fflush(stdout);
    std::_Exit(0);  // the measurement is done; skip cancelling 10^5 sleepers
}

// ---- idle_cpu: what an idle runtime burns ------------------------------------------------

void idle_cpu_scenario(const params& p) {
    const std::int64_t seconds = p.get("seconds", 1);
    weft::runtime rt{{.workers = workers_of(p)}};
    rt.block_on([]() -> weft::task<void> {
        auto r = co_await weft::sleep_for(std::chrono::milliseconds(50));  // settle
        (void)r;
    }());
    const double cpu0 = weft::bench::process_cpu_seconds();
    const double wall = time_ns([&] {
        rt.block_on([](std::int64_t s) -> weft::task<void> {
            auto r = co_await weft::sleep_for(std::chrono::seconds(s));
            (void)r;
        }(seconds));
    });
    const double cpu = weft::bench::process_cpu_seconds() - cpu0;
    emit("idle_cpu_percent", "%", 100.0 * cpu / (wall / 1e9));
}

}  // namespace

auto main(int argc, char** argv) -> int {
    return weft::bench::dispatch(argc, argv,
                                 {
                                     {"fork", fork_scenario},
                                     {"spawn", spawn_scenario},
                                     {"pipeline", pipeline_scenario},
                                     {"fib", fib_scenario},
                                     {"parked_memory", parked_memory_scenario},
                                     {"idle_cpu", idle_cpu_scenario},
                                 });
}
