// bench_server: weft's echo server for the galay-net suite (seed 003's bench_server).
//   bench_server [-h HOST] [-p PORT] [-t THREADS] [-b io_uring|epoll] [--tpc]
//                [-m echo|echo_epoll|echo_tpc|idle] [--one-ring] [--gather|--no-gather]
// (weft-bench: the scenario picks the mode)
// Prints "listening on HOST:PORT" once bound; SIGINT/SIGTERM stop it (exit 0), after a last
// line with how often its workers went to park and slept (`parks N sleeps M`, all workers).
// --tpc: thread-per-core (no stealing; one SO_REUSEPORT listener per worker, each accepting
// and serving on its own worker).
// --gather / --no-gather: runtime_options::consolidate_io on (the default) / off (receives gather
// on one worker's ring while the load fits one); the last lines say how often the IO home
// changed (`io_home_changes N`).

#include <signal.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

#include "args.hpp"
#include "weft/core/scope.hpp"
#include "weft/io/reactor.hpp"
#include "weft/io/tcp_listener.hpp"
#include "weft/sched/detail/io_home.hpp"
#include "weft/sched/runtime.hpp"

namespace {

struct options {
    std::string host = "127.0.0.1";
    std::uint16_t port = 8080;
    unsigned threads = 0;
    weft::io_backend backend = weft::io_backend::automatic;
    bool tpc = false;
    bool one_ring = false;       // --one-ring: see serve()
    std::optional<bool> gather;  // --gather / --no-gather: runtime_options::consolidate_io
};

[[noreturn]] void usage(const std::string& msg) {
    std::fprintf(stderr,
                 "bench_server: %s\nusage: bench_server [-h HOST] [-p PORT] [-t THREADS] "
                 "[-b io_uring|epoll] [--tpc]\n",
                 msg.c_str());
    std::exit(2);
}

auto parse(int argc, char** argv) -> options {
    options o;
    weft::bench::each_flag(
        argc, argv,
        [&](const std::string& a, auto& next) {
            if (a == "-h") {
                o.host = next();
            } else if (a == "-p") {
                o.port = static_cast<std::uint16_t>(std::stoi(next()));
            } else if (a == "-t") {
                o.threads = static_cast<unsigned>(std::stoi(next()));
            } else if (a == "-b") {
                const std::string b = next();
                if (b == "io_uring") {
                    o.backend = weft::io_backend::io_uring;
                } else if (b == "epoll") {
                    o.backend = weft::io_backend::epoll;
                } else {
                    usage("-b takes io_uring or epoll");
                }
            } else if (a == "--tpc") {
                o.tpc = true;
            } else if (a == "--gather") {
                o.gather = true;
            } else if (a == "--no-gather") {
                o.gather = false;
            } else if (a == "--one-ring") {
                o.one_ring = true;
            } else if (a == "-m") {
                const std::string m = next();
                if (m == "echo_epoll") {
                    o.backend = weft::io_backend::epoll;
                } else if (m == "echo_tpc") {
                    o.tpc = true;
                } else if (m != "echo" && m != "idle") {
                    usage("-m takes echo, echo_epoll, echo_tpc or idle");
                }
            } else {
                usage("unknown option " + a);
            }
        },
        usage);
    return o;
}

// receive(): on io_uring the data lands in a buffer the kernel picks from the worker's
// provided-buffer ring when it arrives, so an idle connection holds no buffer.
// --one-ring (a diagnostic): every connection starts on worker 0, so its receive is armed on
// worker 0's ring (or epoll) and its completions wake that worker, wherever thieves run it.
auto serve(weft::tcp_stream c, bool one_ring) -> weft::task<void> {
    if (one_ring) {
        co_await weft::switch_to_worker(0);
    }
    for (;;) {
        auto data = co_await c.receive();
        if (!data) {
            co_return;  // peer closed, reset or cancelled
        }
        if (!co_await c.write_all(data->span())) {
            co_return;
        }
    }
}

auto accept_loop(weft::tcp_listener& l, bool one_ring) -> weft::task<void> {
    co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
        for (;;) {
            auto c = co_await l.accept();
            if (!c) {
                if (c.error() == std::errc::operation_canceled) {
                    co_return;
                }
                std::fprintf(stderr, "accept: %s\n", c.error().message().c_str());
                continue;
            }
            s.spawn(serve(std::move(*c), one_ring));
        }
    });
}

}  // namespace

auto main(int argc, char** argv) -> int {
    const options o = parse(argc, argv);
    // Signals go to a thread of their own, which cancels everything: the accept loops end,
    // block_on returns, the runtime shuts down.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);

    weft::runtime_options ro = weft::io_runtime_options(o.threads, o.backend);
    ro.stealing = !o.tpc;
    if (o.gather) {
        ro.consolidate_io = *o.gather;
    }
    weft::runtime rt{ro};
    const auto addr = weft::socket_address::parse(o.host, o.port);
    if (!addr) {
        usage("bad host");
    }
    const unsigned listeners = o.tpc ? rt.worker_count() : 1;
    // The descriptor table sized for up to 65,536 connections at once, as http::server::serve
    // does (weft::reserve_descriptors).
    (void)weft::reserve_descriptors(65536);
    std::vector<weft::tcp_listener> ls;
    for (unsigned i = 0; i < listeners; ++i) {
        auto l = weft::tcp_listener::bind(*addr, {.backlog = 4096, .reuse_port = o.tpc});
        if (!l) {
            std::fprintf(stderr, "bench_server: bind %s: %s\n", addr->to_string().c_str(),
                         l.error().message().c_str());
            return 1;
        }
        ls.push_back(std::move(*l));
    }
    std::printf("listening on %s (%s, %u workers%s)\n", addr->to_string().c_str(),
                std::string(weft::to_string(weft::resolve_io_backend(o.backend))).c_str(),
                rt.worker_count(), o.tpc ? ", thread-per-core" : "");
    std::fflush(stdout);
    std::thread sig([&rt, set] {
        int s = 0;
        sigwait(&set, &s);
        rt.stop().request_stop();
    });
    rt.block_on([&]() -> weft::task<void> {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            for (unsigned i = 0; i < listeners; ++i) {
                if (o.tpc) {
                    co_await weft::switch_to_worker(i);  // s.spawn now queues on worker i
                }
                s.spawn(accept_loop(ls[i], o.one_ring));
            }
            co_return;
        });
    }());
    sig.join();
    const std::uint64_t home_changes = rt.block_on(
        []() -> weft::task<std::uint64_t> { co_return weft::detail::io_home_changes(); }());
    std::uint64_t parks = 0;
    std::uint64_t sleeps = 0;
    for (unsigned i = 0; i < rt.worker_count(); ++i) {
        const weft::worker_metrics m = rt.worker_metrics(i);
        parks += m.park_attempts;
        sleeps += m.sleeps;
    }
    std::printf("parks %llu sleeps %llu\n", static_cast<unsigned long long>(parks),
                static_cast<unsigned long long>(sleeps));
    std::printf("io_home_changes %llu\n", static_cast<unsigned long long>(home_changes));
    for (unsigned i = 0; i < rt.worker_count(); ++i) {
        const weft::worker_metrics m = rt.worker_metrics(i);
        std::printf("worker %u parks %llu sleeps %llu\n", i,
                    static_cast<unsigned long long>(m.park_attempts),
                    static_cast<unsigned long long>(m.sleeps));
    }
    return 0;
}
