// Micro-benchmarks of weft::core and weft::sched for developers (Google Benchmark). The suite
// figures users see come from tools/weft-bench; these are for profiling single operations.

#include <benchmark/benchmark.h>

#include "weft/weft.hpp"

namespace {

auto leaf(int v) -> weft::task<int> { co_return v; }

void BM_task_await(benchmark::State& state) {
    auto body = [&]() -> weft::task<void> {
        for (auto _ : state) {
            benchmark::DoNotOptimize(co_await leaf(1));
        }
    };
    weft::sync_wait(body());
}
BENCHMARK(BM_task_await);

void BM_fork_inline(benchmark::State& state) {
    auto body = [&]() -> weft::task<void> {
        for (auto _ : state) {
            auto h = co_await weft::fork(leaf(1));
            benchmark::DoNotOptimize(co_await std::move(h));
        }
    };
    weft::sync_wait(body());
}
BENCHMARK(BM_fork_inline);

void BM_spawn_join_runtime(benchmark::State& state) {
    weft::runtime rt{{.workers = static_cast<unsigned>(state.range(0))}};
    rt.block_on([&]() -> weft::task<void> {
        for (auto _ : state) {
            auto h = weft::spawn(leaf(1));
            benchmark::DoNotOptimize(co_await std::move(h));
        }
    }());
}
BENCHMARK(BM_spawn_join_runtime)->Arg(1)->Arg(2);

auto fib(int n) -> weft::task<long> {
    if (n < 2) {
        co_return n;
    }
    auto a = co_await weft::fork(fib(n - 1));
    long b = co_await fib(n - 2);
    co_return co_await std::move(a) + b;
}

void BM_fib_runtime(benchmark::State& state) {
    weft::runtime rt{{.workers = static_cast<unsigned>(state.range(0))}};
    for (auto _ : state) {
        benchmark::DoNotOptimize(rt.block_on(fib(25)));
    }
    state.SetItemsProcessed(state.iterations() * 242785);  // calls of fib(25)
}
BENCHMARK(BM_fib_runtime)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
