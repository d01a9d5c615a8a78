// bench_file_io: the file IO benchmark of the galay-file suite (seed 003's bench_file_io).
//   bench_file_io [-w WORKERS] [-n OPS] [-b BLOCK] [-batch N] [-d DIR] [-B io_uring|epoll]
//                 [-t THREADS] [-direct]
// Seed mode: WORKERS tasks, each with a file of its own in DIR, each writing OPS blocks of
// BLOCK bytes and reading them back (OPS writes + OPS reads per worker); with -batch N a worker
// submits N writes, then N reads, at once (weft::file_batch) instead of one at a time. Prints
// the seed's figures: duration, reads, writes, IOPS and MB/s each way, errors (a short or
// failed transfer, or a block that reads back wrong).
//
// weft-bench mode: `bench_file_io SCENARIO key=value...` prints JSON metric lines on stdout
// (human lines on stderr):
//   mixed     w n b batch threads backend direct dir       the seed's scenario above
//   randread  qd bs size_mb direct ms backend dir          random BLOCK reads at queue depth qd
//   randwrite (same)                                       random BLOCK writes
// The random scenarios run QD tasks on one worker thread (fio's one job with iodepth=QD) for
// `ms` milliseconds against DIR/galay-file-<size_mb>m.dat, made once (the fio peer uses the
// same file; see prepare_data_file for the state each run starts from). IOPS = completed
// operations / elapsed.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "args.hpp"
#include "weft/core/scope.hpp"
#include "weft/io/aligned_buffer.hpp"
#include "weft/io/file.hpp"
#include "weft/io/reactor.hpp"
#include "weft/sched/runtime.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
using weft::open_mode;

struct options {
    std::string scenario = "mixed";
    int workers = 4;
    int ops = 1000;
    std::size_t block = 4096;
    int batch = 1;
    std::string dir = "/tmp";
    weft::io_backend backend = weft::io_backend::automatic;
    unsigned threads = 0;
    bool direct = false;
    int qd = 1;
    std::size_t size_mb = 256;
    int ms = 2000;
    bool json = false;
};

[[noreturn]] void usage(const std::string& msg, int status = 1) {
    std::fprintf(stderr,
                 "bench_file_io: %s\nusage: bench_file_io [-w WORKERS] [-n OPS] [-b BLOCK] "
                 "[-batch N] [-d DIR] [-B io_uring|epoll] [-t THREADS] [-direct]\n"
                 "       bench_file_io mixed|randread|randwrite key=value...\n",
                 msg.c_str());
    std::exit(status);
}

auto parse_backend(const std::string& v) -> weft::io_backend {
    if (v == "io_uring") {
        return weft::io_backend::io_uring;
    }
    if (v == "epoll") {
        return weft::io_backend::epoll;
    }
    if (v == "auto" || v == "automatic") {
        return weft::io_backend::automatic;
    }
    usage("unknown backend " + v);
}

auto parse(int argc, char** argv) -> options {
    options o;
    if (argc >= 2 && argv[1][0] != '-') {  // weft-bench protocol
        o.scenario = argv[1];
        if (o.scenario != "mixed" && o.scenario != "randread" && o.scenario != "randwrite") {
            usage("unknown scenario " + o.scenario, 2);
        }
        o.json = true;
        weft::bench::each_key_value(
            argc, argv,
            [&](const std::string& k, const std::string& v) {
                if (k == "w") {
                    o.workers = std::stoi(v);
                } else if (k == "n") {
                    o.ops = std::stoi(v);
                } else if (k == "b" || k == "bs") {
                    o.block = std::stoul(v);
                } else if (k == "batch") {
                    o.batch = std::stoi(v);
                } else if (k == "dir" || k == "d") {
                    o.dir = v;
                } else if (k == "backend") {
                    o.backend = parse_backend(v);
                } else if (k == "threads") {
                    o.threads = static_cast<unsigned>(std::stoul(v));
                } else if (k == "direct") {
                    o.direct = v == "1" || v == "true";
                } else if (k == "qd") {
                    o.qd = std::stoi(v);
                } else if (k == "size_mb") {
                    o.size_mb = std::stoul(v);
                } else if (k == "ms") {
                    o.ms = std::stoi(v);
                }  // other keys (the peer's engine, ...) are not ours
            },
            [](const std::string& m) { usage(m, 2); });
        return o;
    }
    weft::bench::each_flag(
        argc, argv,
        [&](const std::string& a, auto& next) {
            if (a == "-w") {
                o.workers = std::stoi(next());
            } else if (a == "-n") {
                o.ops = std::stoi(next());
            } else if (a == "-b") {
                o.block = std::stoul(next());
            } else if (a == "-batch") {
                o.batch = std::stoi(next());
            } else if (a == "-d") {
                o.dir = next();
            } else if (a == "-B") {
                o.backend = parse_backend(next());
            } else if (a == "-t") {
                o.threads = static_cast<unsigned>(std::stoul(next()));
            } else if (a == "-direct") {
                o.direct = true;
            } else {
                usage("unknown option " + a);
            }
        },
        [](const std::string& m) { usage(m); });
    return o;
}

auto flags(const options& o) -> open_mode {
    auto m = open_mode::read_write | open_mode::create;
    return o.direct ? m | open_mode::direct : m;
}

void fill(std::byte* p, std::size_t n, std::uint64_t tag) {
    for (std::size_t i = 0; i < n; i += 8) {
        const std::uint64_t v = tag * 0x9E3779B97F4A7C15ULL + i;
        std::memcpy(p + i, &v, std::min<std::size_t>(8, n - i));
    }
}

struct counts {
    std::atomic<std::uint64_t> reads{0};
    std::atomic<std::uint64_t> writes{0};
    std::atomic<std::uint64_t> errors{0};
};

// One seed worker: OPS writes and OPS reads of its own file, BATCH at a time.
auto mixed_worker(const options& o, int id, counts& c) -> weft::task<void> {
    const std::string path =
        o.dir + "/weft_bench_file_" + std::to_string(::getpid()) + "_" + std::to_string(id);
    auto f = co_await weft::file::open(path, flags(o) | open_mode::truncate);
    if (!f) {
        std::fprintf(stderr, "bench_file_io: %s\n", f.error().message().c_str());
        c.errors += static_cast<std::uint64_t>(o.ops) * 2;
        co_return;
    }
    const std::size_t batch = static_cast<std::size_t>(std::max(1, o.batch));
    weft::aligned_buffer out(o.block * batch, 4096);
    weft::aligned_buffer in(o.block * batch, 4096);
    weft::file_batch wb;
    weft::file_batch rb;
    for (int i = 0; i < o.ops; i += static_cast<int>(batch)) {
        const std::size_t k = std::min<std::size_t>(batch, static_cast<std::size_t>(o.ops - i));
        for (std::size_t j = 0; j < k; ++j) {
            fill(out.data() + j * o.block, o.block, static_cast<std::uint64_t>(i) + j);
        }
        if (k == 1 && o.batch <= 1) {
            const std::uint64_t off = static_cast<std::uint64_t>(i) * o.block;
            auto w = co_await f->write_at(out.span().first(o.block), off);
            (w && *w == o.block ? c.writes : c.errors) += 1;
            auto r = co_await f->read_at(in.span().first(o.block), off);
            const bool ok = r && *r == o.block && std::memcmp(in.data(), out.data(), o.block) == 0;
            (ok ? c.reads : c.errors) += 1;
            continue;
        }
        wb.clear();
        rb.clear();
        for (std::size_t j = 0; j < k; ++j) {
            const std::uint64_t off = (static_cast<std::uint64_t>(i) + j) * o.block;
            wb.write_at(*f, out.span().subspan(j * o.block, o.block), off);
            rb.read_at(*f, in.span().subspan(j * o.block, o.block), off);
        }
        (void)co_await wb.submit();
        for (std::size_t j = 0; j < k; ++j) {
            auto w = wb.result_of(j);
            (w && *w == o.block ? c.writes : c.errors) += 1;
        }
        (void)co_await rb.submit();
        for (std::size_t j = 0; j < k; ++j) {
            auto r = rb.result_of(j);
            const bool ok =
                r && *r == o.block &&
                std::memcmp(in.data() + j * o.block, out.data() + j * o.block, o.block) == 0;
            (ok ? c.reads : c.errors) += 1;
        }
    }
    (void)f->close();
    ::unlink(path.c_str());
}

// Makes DIR/galay-file-<size>m.dat exactly size_mb MiB (random-ish content), once.
auto ensure_data_file(const options& o) -> std::string {
    const std::string path = o.dir + "/galay-file-" + std::to_string(o.size_mb) + "m.dat";
    const std::uint64_t size = static_cast<std::uint64_t>(o.size_mb) << 20;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && static_cast<std::uint64_t>(st.st_size) == size) {
        return path;
    }
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        usage("cannot create " + path + ": " + std::strerror(errno));
    }
    std::vector<std::byte> chunk(1 << 20);
    for (std::uint64_t off = 0; off < size; off += chunk.size()) {
        fill(chunk.data(), chunk.size(), off);
        if (::pwrite(fd, chunk.data(), chunk.size(), static_cast<off_t>(off)) !=
            static_cast<ssize_t>(chunk.size())) {
            usage("cannot write " + path + ": " + std::strerror(errno));
        }
    }
    ::fsync(fd);
    ::close(fd);
    return path;
}

// Random runs start from the same state of the data file, whoever ran before them; weft-bench
// runs weft first in every round, so without this weft inherits the state its peers' earlier
// runs left and they find the file as weft left it.
// - O_DIRECT: no dirty pages (an O_DIRECT read or write of a dirty range first waits for its
//   writeback, and a buffered randwrite QD32 dirties the whole file).
// - Buffered: the whole file in the page cache (O_DIRECT writes evict every page they touch, so
//   the next buffered reader would miss), the suite's premise as fio's invalidate=0. Dirty pages
//   are left as they are. On ext4 every buffered write goes through io-wq, dirty page or clean
//   (no FOP_BUFFER_WASYNC; the iou-wrk thread switches once per write in both states), so
//   those rows measure io-wq hand-offs, whose cost swings with where the scheduler puts the
//   worker thread (10k-550k IOPS run to run, fio's io_uring engine alike).
void prepare_data_file(const std::string& path, bool direct) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return;
    }
    if (direct) {
        (void)::fdatasync(fd);  // waits for the writeback of what earlier runs dirtied
    } else {
        (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
        std::vector<std::byte> chunk(1 << 20);
        while (::read(fd, chunk.data(), chunk.size()) > 0) {
        }
    }
    ::close(fd);
}

// One queue slot of a random scenario: operations back to back until the deadline.
auto random_worker(const options& o,
                   weft::file& f,
                   bool write,
                   unsigned seed,
                   clock_type::time_point deadline,
                   counts& c) -> weft::task<void> {
    weft::aligned_buffer buf(o.block, 4096);
    fill(buf.data(), buf.size(), seed);
    std::mt19937_64 rng(seed);
    const std::uint64_t blocks = (static_cast<std::uint64_t>(o.size_mb) << 20) / o.block;
    while (clock_type::now() < deadline) {
        const std::uint64_t off = (rng() % blocks) * o.block;
        // if / else, not ?: around the co_awaits (g++ 12 miscompiles co_await in ?:).
        weft::result<std::size_t> r = std::size_t{0};
        if (write) {
            r = co_await f.write_at(buf.span(), off);
        } else {
            r = co_await f.read_at(buf.span(), off);
        }
        if (r && *r == o.block) {
            (write ? c.writes : c.reads) += 1;
        } else {
            if (c.errors++ == 0) {
                std::fprintf(stderr, "bench_file_io: %s\n",
                             r ? "short transfer" : r.error().message().c_str());
            }
            if (!r) {
                co_return;
            }
        }
    }
}

void metric(const options& o, const char* name, const char* unit, double v) {
    if (o.json) {
        std::printf("{\"metric\": \"%s\", \"unit\": \"%s\", \"value\": %.6g}\n", name, unit, v);
    }
}

}  // namespace

auto main(int argc, char** argv) -> int {
    const options o = parse(argc, argv);
    FILE* human = o.json ? stderr : stdout;
    if (o.block == 0 || o.workers <= 0 || o.ops <= 0 || o.qd <= 0) {
        usage("block, workers, ops and qd must be positive");
    }
    counts c;
    double secs = 0;
    const bool random = o.scenario != "mixed";
    weft::io_backend backend = weft::io_backend::automatic;
    try {
        backend = weft::resolve_io_backend(o.backend);
        std::string data_path;
        if (random) {
            data_path = ensure_data_file(o);
            prepare_data_file(data_path, o.direct);
        }
        weft::runtime rt{weft::io_runtime_options(random ? 1 : o.threads, backend)};
        rt.block_on([&]() -> weft::task<void> {
            if (!random) {
                const auto t0 = clock_type::now();
                co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
                    for (int w = 0; w < o.workers; ++w) {
                        s.spawn(mixed_worker(o, w, c));
                    }
                    co_return;
                });
                secs = std::chrono::duration<double>(clock_type::now() - t0).count();
                co_return;
            }
            auto f = co_await weft::file::open(
                data_path,
                o.direct ? open_mode::read_write | open_mode::direct : open_mode::read_write);
            if (!f) {
                std::fprintf(stderr, "bench_file_io: %s\n", f.error().message().c_str());
                c.errors += 1;
                co_return;
            }
            const bool write = o.scenario == "randwrite";
            const auto t0 = clock_type::now();
            const auto deadline = t0 + std::chrono::milliseconds(o.ms);
            co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
                for (int q = 0; q < o.qd; ++q) {
                    s.spawn(random_worker(o, *f, write, static_cast<unsigned>(q + 1), deadline, c));
                }
                co_return;
            });
            secs = std::chrono::duration<double>(clock_type::now() - t0).count();
        }());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_file_io: %s\n", e.what());
        return 1;
    }
    const double reads = static_cast<double>(c.reads.load());
    const double writes = static_cast<double>(c.writes.load());
    const double mib = static_cast<double>(o.block) / (1024.0 * 1024.0);
    const double errors = static_cast<double>(c.errors.load());
    secs = std::max(secs, 1e-9);
    if (!random) {
        std::fprintf(human,
                     "=== bench_file_io (weft, %s) ===\n"
                     "Workers: %d  Operations per worker: %d  Block size: %zu  Batch size: %d%s\n"
                     "Duration: %.3f s\n"
                     "Reads: %.0f  Writes: %.0f\n"
                     "Read data: %.3f MB  Write data: %.3f MB\n"
                     "Read IOPS: %.0f  Write IOPS: %.0f\n"
                     "Read throughput: %.2f MB/s  Write throughput: %.2f MB/s\n"
                     "Errors: %.0f\n",
                     std::string(weft::to_string(backend)).c_str(), o.workers, o.ops, o.block,
                     o.batch, o.direct ? "  O_DIRECT" : "", secs, reads, writes, reads * mib,
                     writes * mib, reads / secs, writes / secs, reads * mib / secs,
                     writes * mib / secs, errors);
        metric(o, "read_iops", "op/s", reads / secs);
        metric(o, "write_iops", "op/s", writes / secs);
        metric(o, "iops", "op/s", (reads + writes) / secs);
        metric(o, "mb_per_s", "MB/s", (reads + writes) * mib / secs);
        metric(o, "duration_s", "s", secs);
        metric(o, "errors", "count", errors);
    } else {
        const double ops = reads + writes;
        std::fprintf(human,
                     "=== bench_file_io %s (weft, %s) qd=%d bs=%zu size=%zu MiB%s ===\n"
                     "Duration: %.3f s  Operations: %.0f  IOPS: %.0f  Throughput: %.2f MB/s  "
                     "Errors: %.0f\n",
                     o.scenario.c_str(), std::string(weft::to_string(backend)).c_str(), o.qd,
                     o.block, o.size_mb, o.direct ? " O_DIRECT" : "", secs, ops, ops / secs,
                     ops * mib / secs, errors);
        metric(o, "iops", "op/s", ops / secs);
        metric(o, "mb_per_s", "MB/s", ops * mib / secs);
        metric(o, "duration_s", "s", secs);
        metric(o, "errors", "count", errors);
    }
    return errors == 0 ? 0 : 1;
}
