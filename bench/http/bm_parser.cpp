// The request parser on the three request shapes (tests/http/sample_requests.hpp) and each
// scan path: time per request and bytes per second.
//   build/.../bench/bm_parser --benchmark_filter=wrk

#include <benchmark/benchmark.h>

#include "http/sample_requests.hpp"
#include "weft/http/request_parser.hpp"
#include "weft/http/scan_path.hpp"

namespace {

using namespace weft::http;

void parse_shape(benchmark::State& state, const std::string& request) {
    const auto path = static_cast<scan_path>(state.range(0));
    if (!set_scan_path(path)) {
        state.SkipWithError("scan path not supported on this CPU");
        return;
    }
    state.SetLabel(std::string{to_string(path)});
    request_parser p;
    for (auto _ : state) {
        p.reset();
        const parse_status st = p.parse(request);
        benchmark::DoNotOptimize(st);
        benchmark::DoNotOptimize(p.head().field_count());
    }
    if (p.parse(request) != parse_status::complete) {
        state.SkipWithError("request did not parse");
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                            static_cast<std::int64_t>(request.size()));
}

void BM_parse_wrk_get(benchmark::State& state) { parse_shape(state, test::wrk_request()); }
void BM_parse_browser(benchmark::State& state) { parse_shape(state, test::browser_request()); }
void BM_parse_cookie_4k(benchmark::State& state) { parse_shape(state, test::cookie_request()); }

const auto paths = {static_cast<std::int64_t>(scan_path::avx2),
                    static_cast<std::int64_t>(scan_path::sse2),
                    static_cast<std::int64_t>(scan_path::scalar)};

BENCHMARK(BM_parse_wrk_get)->ArgsProduct({paths});
BENCHMARK(BM_parse_browser)->ArgsProduct({paths});
BENCHMARK(BM_parse_cookie_4k)->ArgsProduct({paths});

}  // namespace

BENCHMARK_MAIN();
