// One log record (a message and four fields: a string needing no escape, an integer, a double,
// a string needing escapes) made into a JSON line: weft's formatter against {fmt} laying out
// the same line (strings escaped by hand: {fmt} has no JSON escaping). The choice between them
// is docs/design/decisions.md's row on the log formatter.
//
//   bench/bm_log_format --benchmark_repetitions=5 --benchmark_report_aggregates_only=true

#include <benchmark/benchmark.h>

#include <chrono>
#include <ctime>
#include <iterator>
#include <string>
#include <string_view>

#include "weft/log/logger.hpp"

#if defined(WEFT_BENCH_HAVE_FMT)
#include <fmt/chrono.h>
#include <fmt/format.h>
#endif

namespace {

void BM_log_line_weft(benchmark::State& state) {
    std::string line;
    for (auto _ : state) {
        line.clear();
        const weft::log::field fs[] = {
            {"route", "/items/{id}"}, {"status", 200}, {"ms", 1.25}, {"agent", "curl/8.0 \"x\""}};
        weft::log::format_record(line, weft::log::log_format::json, weft::log::level::info,
                                 "request served", fs, 4, {});
        benchmark::DoNotOptimize(line.data());
    }
}
BENCHMARK(BM_log_line_weft);

#if defined(WEFT_BENCH_HAVE_FMT)
void escape_into(std::string& out, std::string_view s) {
    for (char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
        }
        out += c;
    }
}

void BM_log_line_fmt(benchmark::State& state) {
    std::string line;
    std::string agent;
    for (auto _ : state) {
        line.clear();
        agent.clear();
        escape_into(agent, "curl/8.0 \"x\"");
        // The time as weft writes it (UTC to the microsecond), by {fmt}'s chrono formatting.
        const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
        fmt::format_to(std::back_inserter(line),
                       "{{\"ts\":\"{:%FT%T}.{:06}Z\",\"level\":\"{}\",\"msg\":\"{}\","
                       "\"route\":\"{}\",\"status\":{},\"ms\":{},\"agent\":\"{}\"}}\n",
                       fmt::gmtime(static_cast<std::time_t>(us / 1'000'000)), us % 1'000'000,
                       "info", "request served", "/items/{id}", 200, 1.25, agent);
        benchmark::DoNotOptimize(line.data());
    }
}
BENCHMARK(BM_log_line_fmt);
#endif

void BM_log_level_off(benchmark::State& state) {
    weft::log::logger lg{{.min_level = weft::log::level::warn}};
    for (auto _ : state) {
        lg.info("request served", {{"route", "/items/{id}"}, {"status", 200}});
    }
}
BENCHMARK(BM_log_level_off);

}  // namespace

BENCHMARK_MAIN();
