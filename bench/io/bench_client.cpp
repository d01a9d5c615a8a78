// bench_client: the echo load generator of the galay-net suite (seed 003's bench_client).
//   bench_client [-h HOST] [-p PORT] [-c CONNECTIONS] [-s SIZE] [-d SECONDS] [-b io_uring|epoll]
// Each connection sends SIZE bytes, reads the SIZE-byte echo back (checking every byte) and
// repeats until the time is up. One worker thread (a single-threaded client, as the anchors
// were measured), epoll unless -b says otherwise. Prints a QPS and MB/s line per second, then
// totals, errors and latency percentiles.
// weft-bench mode: `bench_client echo c=100 s=256 d=5 port=N` prints the same, and the figures
// as JSON lines on stdout (the weft-bench protocol; human lines go to stderr). `diag=1` adds
// where the slowest 1% of requests are (diag_* lines, see report_diag): how many connections
// and how many distinct milliseconds of the run hold them, and requests per connection.

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
    bool diag = false;  // diag=1: where the slowest requests are (see report_diag)
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
                } else if (k == "diag") {
                    o.diag = v == "1";
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

// diag=1: one record per request, to tell where the slowest ones are (report_diag).
struct sample {
    std::uint32_t end_us;      // when it ended, from the start of the run
    std::uint32_t latency_ns;  // saturated at 4.29 s
    std::uint32_t conn;        // the connection's index, in the order they were started
};

struct totals {
    std::uint64_t requests = 0;
    std::uint64_t errors = 0;
    histogram latency;
    std::vector<sample> samples;          // diag only
    std::vector<std::uint64_t> per_conn;  // diag only: requests per connection
};

auto connection(weft::socket_address addr,
                const options& o,
                clock_type::time_point start,
                clock_type::time_point end,
                totals& t,
                std::uint32_t index) -> weft::task<void> {
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
        const auto t1 = clock_type::now();
        t.latency.add(static_cast<std::uint64_t>((t1 - t0).count()));
        if (o.diag) {
            const auto us = std::chrono::duration_cast<std::chrono::microseconds>(t1 - start);
            const auto ns = std::min<std::int64_t>((t1 - t0).count(), UINT32_MAX);
            t.samples.push_back(
                {static_cast<std::uint32_t>(us.count()), static_cast<std::uint32_t>(ns), index});
            ++t.per_conn[index];
        }
        if (in != out) {
            ++t.errors;
            co_return;
        }
        ++t.requests;
    }
}

// Where the slowest 1% of requests are: spread over the connections (each waits now and
// then: the whole process or a whole batch stalls) or piled on a few (those connections are
// starved), and packed into a few milliseconds of the run (stalls of everything at once) or
// spread over it. Also the fairness of the run: requests per connection.
template <typename Emit>
void report_diag(const totals& t, const options& o, Emit emit) {
    if (t.samples.empty()) {
        return;
    }
    std::vector<std::uint32_t> lat;
    lat.reserve(t.samples.size());
    for (const sample& x : t.samples) {
        lat.push_back(x.latency_ns);
    }
    const std::size_t k = lat.size() * 99 / 100;
    std::nth_element(lat.begin(), lat.begin() + static_cast<std::ptrdiff_t>(k), lat.end());
    const std::uint32_t p99 = lat[k];
    std::vector<std::uint32_t> slow_per_conn(static_cast<std::size_t>(o.connections), 0);
    std::vector<std::uint32_t> slow_ms;  // the millisecond of the run each slow request ended in
    std::uint64_t slow = 0;
    std::uint64_t slow_older_half = 0;
    std::uint64_t slow_first = 0;  // a connection's first request (its server task just started)
    std::vector<bool> seen(static_cast<std::size_t>(o.connections), false);
    for (const sample& x : t.samples) {
        const bool first = !seen[x.conn];
        seen[x.conn] = true;
        if (x.latency_ns > p99) {
            slow_first += first ? 1 : 0;
            ++slow;
            ++slow_per_conn[x.conn];
            slow_ms.push_back(x.end_us / 1000);
            if (x.conn < static_cast<std::uint32_t>(o.connections / 2)) {
                ++slow_older_half;
            }
        }
    }
    const auto conns_with_slow = static_cast<double>(
        std::count_if(slow_per_conn.begin(), slow_per_conn.end(), [](auto n) { return n != 0; }));
    // The fewest milliseconds of the run that hold half of the slow requests.
    std::sort(slow_ms.begin(), slow_ms.end());
    std::vector<std::uint32_t> per_ms;
    for (std::size_t i = 0; i < slow_ms.size();) {
        std::size_t j = i;
        while (j < slow_ms.size() && slow_ms[j] == slow_ms[i]) {
            ++j;
        }
        per_ms.push_back(static_cast<std::uint32_t>(j - i));
        i = j;
    }
    std::sort(per_ms.rbegin(), per_ms.rend());
    std::uint64_t acc = 0;
    std::size_t half_ms = 0;
    while (half_ms < per_ms.size() && 2 * acc < slow) {
        acc += per_ms[half_ms++];
    }
    const auto busiest =
        std::max_element(t.per_conn.begin(), t.per_conn.end()) - t.per_conn.begin();
    std::vector<std::uint64_t> pc = t.per_conn;
    std::sort(pc.begin(), pc.end());
    const auto at = [&](double q) {
        return static_cast<double>(
            pc[static_cast<std::size_t>(q * static_cast<double>(pc.size() - 1))]);
    };
    emit("diag_slow_requests", "count", static_cast<double>(slow));
    emit("diag_conns_with_slow", "count", conns_with_slow);
    emit("diag_slow_in_older_half", "fraction",
         slow == 0 ? 0.0 : static_cast<double>(slow_older_half) / static_cast<double>(slow));
    emit("diag_slow_first_request", "fraction",
         slow == 0 ? 0.0 : static_cast<double>(slow_first) / static_cast<double>(slow));
    emit("diag_slow_ms_distinct", "count", static_cast<double>(per_ms.size()));
    emit("diag_ms_holding_half_of_slow", "count", static_cast<double>(half_ms));
    emit("diag_run_ms", "count", static_cast<double>(o.seconds) * 1000.0);
    emit("diag_req_per_conn_min", "count", at(0.0));
    emit("diag_req_per_conn_p10", "count", at(0.1));
    emit("diag_req_per_conn_p50", "count", at(0.5));
    emit("diag_req_per_conn_max", "count", at(1.0));
    emit("diag_busiest_conn", "index", static_cast<double>(busiest));
}

}  // namespace

auto main(int argc, char** argv) -> int {
    const options o = parse(argc, argv);
    FILE* human = o.json ? stderr : stdout;
    const auto addr = weft::socket_address::parse(o.host, o.port);
    if (!addr) {
        usage("bad host " + o.host);
    }
    // The descriptor table sized for every connection now, while this process has one thread
    // (a growth then waits for no RCU grace period; later, each would stall the connecting
    // worker for about 12 ms at the start of the run).
    (void)weft::reserve_descriptors(static_cast<std::size_t>(o.connections) + 64);
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
    if (o.diag) {
        t.samples.reserve(1U << 21);
        t.per_conn.assign(static_cast<std::size_t>(o.connections), 0);
    }
    const auto start = clock_type::now();
    const auto end = start + std::chrono::seconds(o.seconds);
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            for (int i = 0; i < o.connections; ++i) {
                s.spawn(connection(*addr, o, start, end, t, static_cast<std::uint32_t>(i)));
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
        if (o.diag) {
            report_diag(t, o, emit);
            // How often the client's worker ran out of work: went to park, and slept in
            // epoll_wait (the rest found a completion first).
            const weft::worker_metrics wm = rt.worker_metrics(0);
            emit("diag_client_park_attempts", "count", static_cast<double>(wm.park_attempts));
            emit("diag_client_sleeps", "count", static_cast<double>(wm.sleeps));
        }
    }
    return t.errors == 0 ? 0 : 1;
}
