// bench_client: the echo load generator of the galay-net suite (seed 003's bench_client).
//   bench_client [-h HOST] [-p PORT] [-c CONNECTIONS] [-s SIZE] [-d SECONDS] [-b io_uring|epoll]
// Each connection sends SIZE bytes, reads the SIZE-byte echo back (checking every byte) and
// repeats until the time is up. One worker thread (a single-threaded client, as the anchors
// were measured), epoll unless -b says otherwise. Prints a QPS and MB/s line per second, then
// totals, errors and latency percentiles.
// weft-bench mode: `bench_client echo c=100 s=256 d=5 port=N` prints the same, and the figures
// as JSON lines on stdout (the weft-bench protocol; human lines go to stderr).

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "args.hpp"
#include "weft/core/scope.hpp"
#include "weft/io/reactor.hpp"
#include "weft/io/tcp_stream.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

struct options {
    std::string host = "127.0.0.1";
    std::uint16_t port = 8080;
    int connections = 100;
    std::size_t size = 256;
    int seconds = 5;
    weft::io_backend backend = weft::io_backend::epoll;
    bool json = false;
    bool idle = false;  // open the connections and hold them, silent, for the duration
};

[[noreturn]] void usage(const std::string& msg) {
    std::fprintf(stderr,
                 "bench_client: %s\nusage: bench_client [-h HOST] [-p PORT] [-c CONNECTIONS] "
                 "[-s SIZE] [-d SECONDS] [-b io_uring|epoll]\n"
                 "       bench_client echo [c=N] [s=BYTES] [d=SECONDS] [port=N] [host=H]\n",
                 msg.c_str());
    std::exit(2);
}

auto parse(int argc, char** argv) -> options {
    options o;
    if (argc >= 2 && argv[1][0] != '-') {  // weft-bench protocol
        const std::string scenario = argv[1];
        // The scenario names the server's mode (weft's backend or thread-per-core); the client
        // does the same in each.
        if (scenario != "echo" && scenario != "echo_epoll" && scenario != "echo_tpc" &&
            scenario != "idle") {
            usage(std::string("unknown scenario ") + argv[1]);
        }
        o.idle = scenario == "idle";
        o.json = true;
        weft::bench::each_key_value(
            argc, argv,
            [&](const std::string& k, const std::string& v) {
                if (k == "c") {
                    o.connections = std::stoi(v);
                } else if (k == "s") {
                    o.size = std::stoul(v);
                } else if (k == "d") {
                    o.seconds = std::stoi(v);
                } else if (k == "port") {
                    o.port = static_cast<std::uint16_t>(std::stoi(v));
                } else if (k == "host") {
                    o.host = v;
                }  // other params (the server's backend, ...) are not the client's business
            },
            usage);
        return o;
    }
    weft::bench::each_flag(
        argc, argv,
        [&](const std::string& a, auto& next) {
            if (a == "-h") {
                o.host = next();
            } else if (a == "-p") {
                o.port = static_cast<std::uint16_t>(std::stoi(next()));
            } else if (a == "-c") {
                o.connections = std::stoi(next());
            } else if (a == "-s") {
                o.size = std::stoul(next());
            } else if (a == "-d") {
                o.seconds = std::stoi(next());
            } else if (a == "-b") {
                const std::string b = next();
                o.backend = b == "io_uring" ? weft::io_backend::io_uring : weft::io_backend::epoll;
            } else {
                usage("unknown option " + a);
            }
        },
        usage);
    if (o.connections < 1 || o.size < 1 || o.seconds < 1) {
        usage("-c, -s and -d must be positive");
    }
    return o;
}

// Latency histogram: log-linear buckets (16 per power of two) over nanoseconds; ~6% resolution.
class histogram {
public:
    void add(std::uint64_t ns) noexcept {
        ++counts_[bucket(ns)];
        ++total_;
    }
    [[nodiscard]] auto percentile(double p) const noexcept -> double {
        const auto want = static_cast<std::uint64_t>(p * static_cast<double>(total_));
        std::uint64_t seen = 0;
        for (std::size_t b = 0; b < counts_.size(); ++b) {
            seen += counts_[b];
            if (seen > want) {
                return static_cast<double>(upper(b));
            }
        }
        return 0;
    }

private:
    static constexpr unsigned sub = 4;  // 2^4 buckets per octave
    static auto bucket(std::uint64_t v) noexcept -> std::size_t {
        if (v < (1U << sub)) {
            return static_cast<std::size_t>(v);
        }
        const unsigned msb = 63U - static_cast<unsigned>(std::countl_zero(v));
        const auto frac = static_cast<unsigned>((v >> (msb - sub)) & ((1U << sub) - 1));
        return static_cast<std::size_t>(((msb - sub + 1) << sub) + frac);
    }
    static auto upper(std::size_t b) noexcept -> std::uint64_t {
        if (b < (1U << sub)) {
            return b;
        }
        const std::size_t octave = (b >> sub) + sub - 1;
        const std::size_t frac = b & ((1U << sub) - 1);
        return (std::uint64_t{1} << octave) + ((frac + 1) << (octave - sub));
    }
    std::array<std::uint64_t, 64 * 16> counts_{};
    std::uint64_t total_ = 0;
};

struct totals {
    std::uint64_t requests = 0;
    std::uint64_t errors = 0;
    histogram latency;
};

auto connection(weft::socket_address addr, const options& o, clock_type::time_point end, totals& t)
    -> weft::task<void> {
    auto s = co_await weft::tcp_stream::connect(addr);
    if (!s) {
        ++t.errors;
        co_return;
    }
    std::vector<std::byte> out(o.size);
    std::vector<std::byte> in(o.size);
    for (std::size_t i = 0; i < o.size; ++i) {
        out[i] = static_cast<std::byte>('a' + i % 26);
    }
    while (clock_type::now() < end) {
        const auto t0 = clock_type::now();
        if (!co_await s->write_all(out) || !co_await s->read_exact(in)) {
            ++t.errors;
            co_return;
        }
        t.latency.add(static_cast<std::uint64_t>((clock_type::now() - t0).count()));
        if (in != out) {
            ++t.errors;
            co_return;
        }
        ++t.requests;
    }
}

}  // namespace

auto main(int argc, char** argv) -> int {
    const options o = parse(argc, argv);
    FILE* human = o.json ? stderr : stdout;
    const auto addr = weft::socket_address::parse(o.host, o.port);
    if (!addr) {
        usage("bad host " + o.host);
    }
    weft::runtime rt{weft::io_runtime_options(1, o.backend)};
    totals t;
    if (o.idle) {
        // Idle connections: what a server keeps per connection that says nothing (weft-bench
        // reads the server's peak RSS meanwhile).
        std::uint64_t open = 0;
        rt.block_on([&]() -> weft::task<void> {
            std::vector<weft::tcp_stream> conns;
            conns.reserve(static_cast<std::size_t>(o.connections));
            for (int i = 0; i < o.connections; ++i) {
                auto c = co_await weft::tcp_stream::connect(*addr);
                if (!c) {
                    ++t.errors;
                    continue;
                }
                conns.push_back(std::move(*c));
            }
            open = conns.size();
            (void)co_await weft::sleep_for(std::chrono::seconds(o.seconds));
        }());
        std::fprintf(human, "idle: held %llu connections for %d s, errors: %llu\n",
                     static_cast<unsigned long long>(open), o.seconds,
                     static_cast<unsigned long long>(t.errors));
        if (o.json) {
            std::printf("{\"metric\": \"ops\", \"unit\": \"connections\", \"value\": %llu}\n",
                        static_cast<unsigned long long>(open));
            std::printf("{\"metric\": \"errors\", \"unit\": \"count\", \"value\": %llu}\n",
                        static_cast<unsigned long long>(t.errors));
        }
        return t.errors == 0 ? 0 : 1;
    }
    const auto start = clock_type::now();
    const auto end = start + std::chrono::seconds(o.seconds);
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            for (int i = 0; i < o.connections; ++i) {
                s.spawn(connection(*addr, o, end, t));
            }
            // One line per second (single worker: plain reads of the counters are exact).
            std::uint64_t last = 0;
            for (int sec = 1; sec <= o.seconds; ++sec) {
                (void)co_await weft::sleep_until(start + std::chrono::seconds(sec));
                const std::uint64_t now = t.requests;
                const double qps = static_cast<double>(now - last);
                std::fprintf(human, "[%ds] QPS: %.0f, MB/s: %.2f, errors: %llu\n", sec, qps,
                             qps * 2.0 * static_cast<double>(o.size) / 1e6,
                             static_cast<unsigned long long>(t.errors));
                last = now;
            }
            co_return;
        });
    }());
    const double secs = std::chrono::duration<double>(clock_type::now() - start).count();
    const double qps = static_cast<double>(t.requests) / secs;
    const double mbps = qps * 2.0 * static_cast<double>(o.size) / 1e6;
    const double p50 = t.latency.percentile(0.50) / 1000.0;
    const double p99 = t.latency.percentile(0.99) / 1000.0;
    std::fprintf(human,
                 "total: %llu requests in %.2f s, QPS: %.0f, MB/s: %.2f, errors: %llu, "
                 "latency p50 %.1f us, p99 %.1f us\n",
                 static_cast<unsigned long long>(t.requests), secs, qps, mbps,
                 static_cast<unsigned long long>(t.errors), p50, p99);
    if (o.json) {
        auto emit = [](const char* m, const char* u, double v) {
            std::printf("{\"metric\": \"%s\", \"unit\": \"%s\", \"value\": %.6g}\n", m, u, v);
        };
        emit("ops", "requests", static_cast<double>(t.requests));
        emit("qps", "req/s", qps);
        emit("mb_per_s", "MB/s", mbps);
        emit("p50_us", "us", p50);
        emit("p99_us", "us", p99);
        emit("errors", "count", static_cast<double>(t.errors));
    }
    return t.errors == 0 ? 0 : 1;
}
