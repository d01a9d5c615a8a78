// weft-soak: a long run of mixed load in one process, sampled every second, to show that what the
// process holds (resident memory, descriptors, live tasks) stays flat once it is warm. Not a
// test: it measures, and weft-bench (suite `soak`) reports the drift and plots the samples.
//
//   weft-soak mixed seconds=600 [warmup=60] [samples=FILE.json] [workers=2]
//             [backend=io_uring|epoll] [seed=1]
//
// The load, all on one runtime, every part checking what it gets back (a wrong byte is an error,
// exit 3):
//   echo     clients over TCP to an in-process echo server: random sizes (1 B .. 64 KiB), a new
//            connection for 1 exchange in 4, the rest on a kept connection;
//   http     a weft::http::server, one keep-alive client (GET / and POST /echo of random bodies)
//            and one that opens a connection per request;
//   channel  producer / consumer pairs over bounded channels (the sum of what arrives is checked);
//   timer    tasks sleeping 0..5 ms and spawning short-lived children;
//   file     random 16 KiB writes into a 4 MiB file, each read back and compared; an fsync now
//            and then;
//   cancel   1 operation in 8 of every kind above runs under a random deadline of 0..3 ms and is
//            cancelled when it passes (the connection it used is dropped and made anew).
// Every second the sampler records RSS (VmRSS), open descriptors (/proc/self/fd), live tasks
// (the soak's own tasks alive: a count each task keeps while it runs, handlers included) and
// the operations so far. At the end everything is cancelled, the runtime destroyed, and the
// coroutine frames still alive in the process (weft::live_frames, 0 expected) reported.
//
// Output (tools/weft-bench protocol): one JSON line per metric on stdout; the samples as JSON in
// FILE: {"interval_s": 1, "warmup_s": W, "samples": [{"t": s, "rss_kib": .., "fds": ..,
// "tasks": .., "ops": ..}, ...]}.

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>
#include <weft/http.hpp>
#include <weft/weft.hpp>

#include "../scenarios/scenario.hpp"

namespace {

using namespace std::chrono_literals;
namespace http = weft::http;

struct options {
    std::int64_t seconds = 60;
    std::int64_t warmup = -1;  // -1: a fifth of the run, at most 60 s
    std::string samples = "/tmp/weft-soak-samples.json";
    unsigned workers = 2;
    std::string backend;
    std::uint64_t seed = 1;
};

struct counters {
    std::atomic<std::uint64_t> ops{0};
    std::atomic<std::uint64_t> cancelled{0};
    std::atomic<std::uint64_t> errors{0};
    std::atomic<std::int64_t> tasks{0};
    // Set when the run ends, before every task is cancelled: from then on a peer may close
    // first (a server task cancelled before its client), which is no error.
    std::atomic<bool> ending{false};
};
counters stats;

/// Held by every task of the soak for as long as it runs: `stats.tasks` is the live count.
struct live_task {
    live_task() noexcept { stats.tasks.fetch_add(1, std::memory_order_relaxed); }
    live_task(const live_task&) = delete;
    auto operator=(const live_task&) -> live_task& = delete;
    ~live_task() { stats.tasks.fetch_sub(1, std::memory_order_relaxed); }
};

const auto started = std::chrono::steady_clock::now();

void error(const std::string& what) {
    const double at =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (stats.ending.load()) {
        std::fprintf(stderr, "weft-soak: at %.3f s, while ending (not counted): %s\n", at,
                     what.c_str());
        return;
    }
    if (stats.errors.fetch_add(1) < 10) {
        std::fprintf(stderr, "weft-soak: at %.3f s: %s\n", at, what.c_str());
    }
}

auto open_fds() -> int {
    int n = 0;
    if (DIR* d = ::opendir("/proc/self/fd")) {
        while (::readdir(d) != nullptr) {
            ++n;
        }
        ::closedir(d);
    }
    return n - 3;  // ".", ".." and the directory's own descriptor
}

/// A random generator per task (tasks move between workers: no thread_local).
auto rng_for(std::uint64_t seed, std::uint64_t stream) -> std::mt19937_64 {
    return std::mt19937_64(seed * 0x9E3779B97F4A7C15ULL + stream);
}

auto fill(std::vector<std::byte>& v, std::mt19937_64& rng) -> void {
    for (auto& b : v) {
        b = static_cast<std::byte>(rng());
    }
}

/// A deadline for 1 operation in 8: 0..3 ms; otherwise none.
auto maybe_deadline(std::mt19937_64& rng) -> std::optional<std::chrono::microseconds> {
    if (rng() % 8 != 0) {
        return std::nullopt;
    }
    return std::chrono::microseconds(rng() % 3000);
}

auto is_cancel(const std::error_code& e) -> bool {
    return e == std::errc::timed_out || e == std::errc::operation_canceled;
}

// --- echo -----------------------------------------------------------------------------------

auto echo_conn(weft::tcp_stream c) -> weft::task<void> {
    const live_task live;
    std::array<std::byte, 16384> buf{};
    for (;;) {
        auto n = co_await c.read_some(buf);
        if (!n) {
            co_return;  // eof, reset by a cancelled client, or the run's end
        }
        auto w = co_await c.write_all(std::span<const std::byte>(buf.data(), *n));
        if (!w) {
            co_return;
        }
    }
}

auto echo_server(weft::tcp_listener& l, weft::scope& s) -> weft::task<void> {
    const live_task live;
    for (;;) {
        auto c = co_await l.accept();
        if (!c) {
            if (!is_cancel(c.error())) {
                error("echo accept: " + c.error().message());
            }
            co_return;
        }
        s.spawn(echo_conn(std::move(*c)));
    }
}

auto echo_exchange(weft::tcp_stream& c, std::vector<std::byte> out)
    -> weft::task<weft::result<void>> {
    auto w = co_await c.write_all(out);
    if (!w) {
        co_return w.error();
    }
    std::vector<std::byte> back(out.size());
    auto r = co_await c.read_exact(back);
    if (!r) {
        co_return r.error();
    }
    if (back != out) {
        error("echo: bytes differ");
    }
    co_return weft::result<void>{};
}

auto echo_client(weft::socket_address addr, std::uint64_t seed) -> weft::task<void> {
    const live_task live;
    auto rng = rng_for(seed, 1);
    std::optional<weft::tcp_stream> c;
    for (;;) {
        if (!c || rng() % 4 == 0) {
            c.reset();
            auto nc = co_await weft::tcp_stream::connect(addr);
            if (!nc) {
                if (is_cancel(nc.error())) {
                    co_return;
                }
                error("echo connect: " + nc.error().message());
                co_return;
            }
            c.emplace(std::move(*nc));
        }
        std::vector<std::byte> out(1 + rng() % 65536);
        fill(out, rng);
        const auto deadline = maybe_deadline(rng);
        weft::result<void> r;
        if (deadline) {
            auto t = co_await weft::with_timeout(*deadline, echo_exchange(*c, std::move(out)));
            r = t ? *t : weft::result<void>(t.error());
        } else {
            r = co_await echo_exchange(*c, std::move(out));
        }
        if (!r) {
            if (r.error() == std::errc::timed_out) {
                stats.cancelled.fetch_add(1, std::memory_order_relaxed);
                c.reset();  // mid-exchange: the stream's state is unknown
                continue;
            }
            if (r.error() == std::errc::operation_canceled) {
                co_return;  // the run's end
            }
            error("echo: " + r.error().message());
            co_return;
        }
        stats.ops.fetch_add(1, std::memory_order_relaxed);
    }
}

// --- http -----------------------------------------------------------------------------------

auto http_round(http::client& c, std::mt19937_64& rng) -> weft::task<weft::result<void>> {
    if (rng() % 2 == 0) {
        auto r = co_await c.get("/");
        if (!r) {
            co_return r.error();
        }
        if (r->status != 200 || r->body != "Hello, World!") {
            error("http GET /: status " + std::to_string(r->status));
        }
        co_return weft::result<void>{};
    }
    std::string body(1 + rng() % 20000, '\0');
    for (auto& ch : body) {
        ch = static_cast<char>('a' + rng() % 26);
    }
    auto r = co_await c.request("POST", "/echo", body);
    if (!r) {
        co_return r.error();
    }
    if (r->status != 200 || r->body != body) {
        error("http POST /echo: status " + std::to_string(r->status) + ", body differs");
    }
    co_return weft::result<void>{};
}

auto http_client(weft::socket_address addr, bool keep_alive, std::uint64_t seed)
    -> weft::task<void> {
    const live_task live;
    auto rng = rng_for(seed, keep_alive ? 2 : 3);
    std::optional<http::client> c;
    for (;;) {
        if (!c || !keep_alive) {
            c.reset();
            auto nc = co_await http::client::connect(addr);
            if (!nc) {
                if (!is_cancel(nc.error())) {
                    error("http connect: " + nc.error().message());
                }
                co_return;
            }
            c.emplace(std::move(*nc));
        }
        const auto deadline = maybe_deadline(rng);
        weft::result<void> r;
        if (deadline) {
            auto t = co_await weft::with_timeout(*deadline, http_round(*c, rng));
            r = t ? *t : weft::result<void>(t.error());
        } else {
            r = co_await http_round(*c, rng);
        }
        if (!r) {
            if (r.error() == std::errc::timed_out) {
                stats.cancelled.fetch_add(1, std::memory_order_relaxed);
                c.reset();
                continue;
            }
            if (r.error() != std::errc::operation_canceled) {
                error("http: " + r.error().message());
            }
            co_return;
        }
        stats.ops.fetch_add(1, std::memory_order_relaxed);
    }
}

// --- channels, timers -----------------------------------------------------------------------

auto producer(std::shared_ptr<weft::channel<std::uint64_t>> ch, std::uint64_t seed)
    -> weft::task<void> {
    const live_task live;
    auto rng = rng_for(seed, 4);
    for (std::uint64_t i = 1;; ++i) {
        auto r = co_await ch->send(i);
        if (!r) {
            co_return;
        }
        if (rng() % 64 == 0) {
            (void)co_await weft::sleep_for(std::chrono::microseconds(rng() % 1000));
        }
    }
}

auto consumer(std::shared_ptr<weft::channel<std::uint64_t>> ch, std::uint64_t seed)
    -> weft::task<void> {
    const live_task live;
    auto rng = rng_for(seed, 5);
    std::uint64_t expect = 1;
    for (;;) {
        const auto deadline = maybe_deadline(rng);
        std::optional<std::uint64_t> got;
        if (deadline) {
            // A receive abandoned at its deadline takes nothing from the channel.
            auto r = co_await ch->recv_for(*deadline);
            if (!r) {
                if (r.error() == std::errc::timed_out) {
                    stats.cancelled.fetch_add(1, std::memory_order_relaxed);
                    continue;
                }
                co_return;
            }
            got = *r;
        } else {
            auto r = co_await ch->recv();
            if (!r) {
                co_return;
            }
            got = *r;
        }
        if (*got != expect) {
            error("channel: got " + std::to_string(*got) + ", expected " + std::to_string(expect));
            expect = *got;
        }
        ++expect;
        stats.ops.fetch_add(1, std::memory_order_relaxed);
    }
}

auto short_child(std::uint64_t n) -> weft::task<std::uint64_t> {
    const live_task live;
    (void)co_await weft::sleep_for(std::chrono::microseconds(n % 500));
    co_return n * 2;
}

auto timers(std::uint64_t seed) -> weft::task<void> {
    const live_task live;
    auto rng = rng_for(seed, 6);
    for (;;) {
        auto r = co_await weft::sleep_for(std::chrono::microseconds(rng() % 5000));
        if (!r) {
            co_return;
        }
        const std::uint64_t n = rng() % 1000;
        auto child = weft::spawn(short_child(n));
        const auto got = co_await std::move(child);
        if (got != n * 2 && got != 0) {
            error("timer child: wrong value");
        }
        stats.ops.fetch_add(1, std::memory_order_relaxed);
    }
}

// --- file -----------------------------------------------------------------------------------

auto file_round(weft::file& f, std::uint64_t offset, std::vector<std::byte> data)
    -> weft::task<weft::result<void>> {
    auto w = co_await f.write_all(data, offset);
    if (!w) {
        co_return w.error();
    }
    std::vector<std::byte> back(data.size());
    auto r = co_await f.read_all(back, offset);
    if (!r) {
        co_return r.error();
    }
    if (*r != data.size() || back != data) {
        error("file: read back differs");
    }
    co_return weft::result<void>{};
}

auto file_io(std::string path, std::uint64_t seed) -> weft::task<void> {
    const live_task live;
    auto rng = rng_for(seed, 7);
    auto f = co_await weft::file::open(
        path, weft::open_mode::read_write | weft::open_mode::create | weft::open_mode::truncate);
    if (!f) {
        error("file open: " + f.error().message());
        co_return;
    }
    constexpr std::uint64_t file_size = 4 << 20;
    constexpr std::size_t block = 16384;
    for (std::uint64_t i = 0;; ++i) {
        std::vector<std::byte> data(block);
        fill(data, rng);
        const std::uint64_t offset = (rng() % (file_size / block)) * block;
        const auto deadline = maybe_deadline(rng);
        weft::result<void> r;
        if (deadline) {
            auto t =
                co_await weft::with_timeout(*deadline, file_round(*f, offset, std::move(data)));
            r = t ? *t : weft::result<void>(t.error());
        } else {
            r = co_await file_round(*f, offset, std::move(data));
        }
        if (!r) {
            if (r.error() == std::errc::timed_out) {
                stats.cancelled.fetch_add(1, std::memory_order_relaxed);
                continue;
            }
            if (r.error() != std::errc::operation_canceled) {
                error("file: " + r.error().message());
            }
            break;
        }
        if (i % 64 == 63) {
            auto s = co_await f->fdatasync();
            if (!s) {
                break;
            }
        }
        stats.ops.fetch_add(1, std::memory_order_relaxed);
    }
    (void)f->close();
    ::unlink(path.c_str());
}

// --- sampling -------------------------------------------------------------------------------

struct sample {
    double t;
    std::int64_t rss_kib;
    int fds;
    std::int64_t tasks;
    std::uint64_t ops;
};

auto sampler(std::vector<sample>& out, std::chrono::seconds length) -> weft::task<void> {
    const auto start = std::chrono::steady_clock::now();
    for (std::int64_t k = 1; k <= length.count(); ++k) {
        auto r = co_await weft::sleep_until(start + std::chrono::seconds(k));
        if (!r) {
            co_return;
        }
        const double t =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        out.push_back({t, weft::bench::rss_bytes() / 1024, open_fds(),
                       stats.tasks.load(std::memory_order_relaxed),
                       stats.ops.load(std::memory_order_relaxed)});
    }
}

auto soak(const options& o, std::vector<sample>& samples) -> weft::task<void> {
    auto echo_l = weft::tcp_listener::bind(weft::socket_address::parse("127.0.0.1", 0).value());
    auto http_l = weft::tcp_listener::bind(weft::socket_address::parse("127.0.0.1", 0).value());
    if (!echo_l || !http_l) {
        weft::bench::fail("bind failed");
    }
    const auto echo_addr = echo_l->local_address().value();
    const auto http_addr = http_l->local_address().value();
    http::server srv;
    srv.route(http::method::get, "/", [](http::request&) -> weft::task<http::response> {
        co_return http::response::text("Hello, World!");
    });
    srv.route(http::method::post, "/echo", [](http::request& req) -> weft::task<http::response> {
        auto body = co_await req.body().read_all();
        if (!body) {
            co_return http::response::text("bad body", 400);
        }
        co_return http::response::text(std::move(*body));
    });
    std::vector<std::shared_ptr<weft::channel<std::uint64_t>>> channels;
    for (int i = 0; i < 2; ++i) {
        channels.push_back(std::make_shared<weft::channel<std::uint64_t>>(16));
    }
    const std::string path = "/tmp/weft-soak-" + std::to_string(::getpid()) + ".dat";
    co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
        s.spawn(echo_server(*echo_l, s));
        s.spawn(srv.serve(*http_l));
        for (std::uint64_t i = 0; i < 4; ++i) {
            s.spawn(echo_client(echo_addr, o.seed * 100 + i));
        }
        s.spawn(http_client(http_addr, true, o.seed * 100 + 10));
        s.spawn(http_client(http_addr, false, o.seed * 100 + 11));
        for (std::uint64_t i = 0; i < channels.size(); ++i) {
            s.spawn(producer(channels[i], o.seed * 100 + 20 + i));
            s.spawn(consumer(channels[i], o.seed * 100 + 30 + i));
        }
        for (std::uint64_t i = 0; i < 4; ++i) {
            s.spawn(timers(o.seed * 100 + 40 + i));
        }
        s.spawn(file_io(path, o.seed * 100 + 50));
        co_await sampler(samples, std::chrono::seconds(o.seconds));
        stats.ending.store(true);
        s.request_stop();  // the end: every task above is cancelled
        co_return;
    });
}

auto mean(const std::vector<sample>& v, std::size_t from, std::size_t to, auto field) -> double {
    double sum = 0;
    for (std::size_t i = from; i < to; ++i) {
        sum += static_cast<double>(field(v[i]));
    }
    return to > from ? sum / static_cast<double>(to - from) : 0.0;
}

void write_samples(const options& o, std::int64_t warmup, const std::vector<sample>& v) {
    FILE* f = std::fopen(o.samples.c_str(), "w");
    if (f == nullptr) {
        std::fprintf(stderr, "weft-soak: cannot write %s\n", o.samples.c_str());
        return;
    }
    std::fprintf(f, "{\"interval_s\": 1, \"warmup_s\": %lld, \"seconds\": %lld, \"samples\": [",
                 static_cast<long long>(warmup), static_cast<long long>(o.seconds));
    for (std::size_t i = 0; i < v.size(); ++i) {
        std::fprintf(f,
                     "%s\n {\"t\": %.3f, \"rss_kib\": %lld, \"fds\": %d, \"tasks\": %lld, "
                     "\"ops\": %llu}",
                     i == 0 ? "" : ",", v[i].t, static_cast<long long>(v[i].rss_kib), v[i].fds,
                     static_cast<long long>(v[i].tasks), static_cast<unsigned long long>(v[i].ops));
    }
    std::fprintf(f, "\n]}\n");
    std::fclose(f);
}

void run_mixed(const options& o) {
    const std::int64_t frames_before = weft::live_frames();
    const int fds_before = open_fds();
    std::vector<sample> samples;
    samples.reserve(static_cast<std::size_t>(o.seconds) + 1);
    {
        weft::runtime_options ro =
            o.backend.empty() ? weft::io_runtime_options(o.workers)
                              : weft::io_runtime_options(
                                    o.workers, o.backend == "epoll" ? weft::io_backend::epoll
                                                                    : weft::io_backend::io_uring);
        weft::runtime rt{ro};
        rt.block_on(soak(o, samples));
    }
    const std::int64_t frames_left = weft::live_frames() - frames_before;
    const int fds_left = open_fds() - fds_before;

    const std::int64_t warmup =
        o.warmup >= 0 ? o.warmup
                      : std::min<std::int64_t>(60, std::max<std::int64_t>(1, o.seconds / 5));
    write_samples(o, warmup, samples);
    // Drift: the mean of the last 5 samples minus the mean of the first 5 after warm-up.
    const std::size_t first = std::min(samples.size(), static_cast<std::size_t>(warmup));
    const std::size_t k = std::min<std::size_t>(5, (samples.size() - first) / 2);
    if (k == 0) {
        weft::bench::fail("run too short for its warm-up: no samples to compare");
    }
    const std::size_t n = samples.size();
    auto rss = [](const sample& s) { return s.rss_kib; };
    auto fds = [](const sample& s) { return s.fds; };
    auto tasks = [](const sample& s) { return s.tasks; };
    const double secs = samples.back().t;
    weft::bench::emit("ops_per_s", "op/s", static_cast<double>(samples.back().ops) / secs);
    weft::bench::emit("rss_kib_after_warmup", "KiB", mean(samples, first, first + k, rss));
    weft::bench::emit("rss_drift_kib", "KiB",
                      mean(samples, n - k, n, rss) - mean(samples, first, first + k, rss));
    weft::bench::emit("fds_drift", "count",
                      mean(samples, n - k, n, fds) - mean(samples, first, first + k, fds));
    weft::bench::emit("tasks_drift", "count",
                      mean(samples, n - k, n, tasks) - mean(samples, first, first + k, tasks));
    weft::bench::emit("cancelled", "count", static_cast<double>(stats.cancelled.load()));
    weft::bench::emit("errors", "count", static_cast<double>(stats.errors.load()));
    weft::bench::emit("frames_left", "count", static_cast<double>(frames_left));
    weft::bench::emit("fds_left", "count", fds_left);
    weft::bench::emit("seconds", "s", secs);
    if (stats.errors.load() != 0 || frames_left != 0 || fds_left != 0) {
        std::exit(3);  // measured, but invalid: wrong data or something left behind
    }
}

auto parse(int argc, char** argv) -> options {
    options o;
    for (int i = 2; i < argc; ++i) {
        const std::string a = argv[i];
        const auto eq = a.find('=');
        if (eq == std::string::npos) {
            weft::bench::fail("bad argument " + a, 2);
        }
        const std::string key = a.substr(0, eq);
        const std::string value = a.substr(eq + 1);
        if (key == "seconds") {
            o.seconds = std::stoll(value);
        } else if (key == "warmup") {
            o.warmup = std::stoll(value);
        } else if (key == "samples") {
            o.samples = value;
        } else if (key == "workers") {
            o.workers = static_cast<unsigned>(std::stoul(value));
        } else if (key == "backend") {
            o.backend = value;
        } else if (key == "seed") {
            o.seed = std::stoull(value);
        } else {
            weft::bench::fail("unknown parameter " + key, 2);
        }
    }
    if (o.seconds < 3) {
        weft::bench::fail("seconds must be at least 3", 2);
    }
    return o;
}

}  // namespace

auto main(int argc, char** argv) -> int {
    if (argc < 2 || std::string(argv[1]) != "mixed") {
        std::fprintf(stderr,
                     "usage: weft-soak mixed seconds=N [warmup=S] [samples=FILE] "
                     "[workers=N] [backend=io_uring|epoll] [seed=N]\n");
        return 2;
    }
    run_mixed(parse(argc, argv));
    return 0;
}
