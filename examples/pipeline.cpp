// A three-stage pipeline over bounded channels, the shape of many services: a source produces
// work, a worker_pool stage does the expensive part on every runtime worker, a sink collects.
//
//     source --lines: channel{64}--> parse (8 tasks) --scores: channel{64}--> sink
//                                        | pool.map ^
//                                        v          |
//                                   worker_pool (2 handler tasks)
//
// What to copy from it:
// - Bounded channels give back-pressure: when the sink is slow, `send` waits instead of memory
//   growing without bound.
// - Close propagates downstream: each stage closes its output once its input is closed and
//   drained (`recv` returns the `closed` error), so the end of the input ends the whole pipeline
//   without any sentinel value.
// - The middle stage is kInFlight tasks calling `pool.map` concurrently: the pool runs the work
//   on its handler tasks (spread over the runtime's workers) and many callers do not serialise
//   on it. Items may overtake each other there; carry a sequence number if order matters.
//
// Build: part of the default build (examples/); run: ./build/.../examples/pipeline

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <weft/weft.hpp>

namespace {

constexpr int kLines = 100'000;
constexpr std::size_t kInFlight = 8;  // concurrent pool.map callers in stage 2

struct scored {
    int line;
    std::uint64_t score;
};

// Stage 1: produce the input. Closing `out` is how downstream learns that the input ended.
auto source(weft::channel<std::string>& out) -> weft::task<void> {
    for (int i = 0; i < kLines; ++i) {
        if (!co_await out.send("record " + std::to_string(i))) {
            break;  // closed by someone downstream: stop producing
        }
    }
    out.close();
}

// The expensive per-item work, a plain function: the pool runs it on the runtime's workers.
auto score(std::string line) -> scored {
    std::uint64_t h = 1469598103934665603ULL;  // FNV-1a, standing in for real work
    for (const char c : line) {
        h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
    }
    const int n = std::stoi(line.substr(line.find(' ') + 1));
    return scored{n, h % 1000};
}

// Stage 2, one of kInFlight identical tasks: take a line, have the pool score it, pass it on.
// Several of these call pool.map concurrently; that is fine, the pool does not serialise them.
auto parse(weft::channel<std::string>& in,
           weft::worker_pool<std::string, scored>& pool,
           weft::channel<scored>& out) -> weft::task<void> {
    for (;;) {
        auto line = co_await in.recv();
        if (!line) {
            co_return;  // `closed`: the source is done and everything buffered was taken
        }
        if (!co_await out.send(co_await pool.map(std::move(*line)))) {
            co_return;
        }
    }
}

// Stage 3: consume until the channel is closed and drained.
struct summary {
    int items = 0;
    std::uint64_t total = 0;
    int last_line_seen = -1;
};

auto sink(weft::channel<scored>& in) -> weft::task<summary> {
    summary s;
    for (;;) {
        auto r = co_await in.recv();
        if (!r) {
            break;
        }
        ++s.items;
        s.total += r->score;
        s.last_line_seen = r->line > s.last_line_seen ? r->line : s.last_line_seen;
    }
    co_return s;
}

auto run_pipeline() -> weft::task<summary> {
    weft::channel<std::string> lines{64};
    weft::channel<scored> scores{64};
    // Two handler tasks; the pool's intake is bounded too (2 x handlers by default).
    weft::worker_pool<std::string, scored> pool{2, score};
    weft::wait_group parsers;  // declared out here: it must outlive every task that uses it

    summary result;
    // The scope owns every stage: it returns when all of them have finished, and if one throws,
    // the others are cancelled and the exception comes out here.
    co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
        s.spawn(source(lines));

        // Stage 2 is kInFlight tasks; once all have seen `lines` closed, `scores` is closed,
        // which ends the sink. A wait_group counts them down.
        parsers.add(static_cast<std::ptrdiff_t>(kInFlight));
        for (std::size_t i = 0; i < kInFlight; ++i) {
            s.spawn([&]() -> weft::task<void> {
                co_await parse(lines, pool, scores);
                parsers.done();
            });
        }
        s.spawn([&]() -> weft::task<void> {
            (void)co_await parsers.wait();
            scores.close();  // propagate the end of input to stage 3
        });

        result = co_await sink(scores);
    });
    co_await pool.close();  // drains queued work and ends the handler tasks
    co_return result;
}

}  // namespace

auto main() -> int {
    weft::runtime rt{{.workers = 2}};
    const summary s = rt.block_on(run_pipeline());
    std::printf("pipeline: %d items through 3 stages, score total %llu, highest line %d\n", s.items,
                static_cast<unsigned long long>(s.total), s.last_line_seen);
    return s.items == kLines ? 0 : 1;
}
