// Micro-benchmarks of weft::channel for developers (Google Benchmark). The figures users see,
// side by side with Go and tokio, come from tools/weft-bench's `sake` suite (chan_* scenarios).
// Wall time throughout (UseRealTime): the measured loops run on runtime workers while the
// benchmark thread waits in block_on, so its CPU time would say nothing.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <utility>

#include "weft/weft.hpp"

namespace {

// send + recv on one task of a runtime worker; the buffer never fills, nothing ever waits.
void BM_channel_uncontended(benchmark::State& state) {
    weft::runtime rt{{.workers = 1}};
    rt.block_on([&]() -> weft::task<void> {
        weft::channel<std::int64_t> ch{1024};
        std::int64_t i = 0;
        for (auto _ : state) {
            (void)co_await ch.send(i);
            ++i;
            benchmark::DoNotOptimize(co_await ch.recv());
        }
    }());
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_channel_uncontended)->UseRealTime();

auto echo(weft::channel<std::int64_t>& in, weft::channel<std::int64_t>& out) -> weft::task<void> {
    while (auto v = co_await in.recv()) {
        if (!co_await out.send(*v)) {
            break;
        }
    }
}

// One round trip per iteration: ping -> echo task -> pong, capacity-1 channels, on N workers.
void BM_channel_ping_pong(benchmark::State& state) {
    weft::runtime rt{{.workers = static_cast<unsigned>(state.range(0))}};
    rt.block_on([&]() -> weft::task<void> {
        weft::channel<std::int64_t> ping{1};
        weft::channel<std::int64_t> pong{1};
        auto other = weft::spawn(echo(ping, pong));
        std::int64_t i = 0;
        for (auto _ : state) {
            (void)co_await ping.send(i);
            ++i;
            benchmark::DoNotOptimize(co_await pong.recv());
        }
        ping.close();
        co_await std::move(other);
    }());
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_channel_ping_pong)->Arg(1)->Arg(2)->UseRealTime();

auto produce(weft::channel<std::int64_t>& ch, std::int64_t n) -> weft::task<void> {
    for (std::int64_t i = 0; i < n; ++i) {
        if (!co_await ch.send(i)) {
            break;
        }
    }
    ch.close();
}

// A producer task and a consumer task over a buffered channel (capacity = the argument);
// 2 workers. Each iteration streams kItems items.
void BM_channel_throughput(benchmark::State& state) {
    constexpr std::int64_t kItems = 100'000;
    const auto cap = static_cast<std::size_t>(state.range(0));
    weft::runtime rt{{.workers = 2}};
    for (auto _ : state) {
        const std::int64_t sum = rt.block_on([&]() -> weft::task<std::int64_t> {
            weft::channel<std::int64_t> ch{cap};
            auto producer = weft::spawn(produce(ch, kItems));
            std::int64_t s = 0;
            while (auto v = co_await ch.recv()) {
                s += *v;
            }
            co_await std::move(producer);
            co_return s;
        }());
        benchmark::DoNotOptimize(sum);
    }
    state.SetItemsProcessed(state.iterations() * kItems);
}
BENCHMARK(BM_channel_throughput)->Arg(1)->Arg(1024)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
