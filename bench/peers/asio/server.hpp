// What the Asio peers share (see ../README.md): flags, the listener(s) and the threads.
//
//   PROG [-h HOST] [-p PORT] [-t THREADS] [--per-core] [--cert CHAIN.pem --key KEY.pem]
//
// Standalone Asio with C++20 coroutines (asio::awaitable / co_spawn / use_awaitable). Default:
// one io_context run by THREADS threads (0 or absent: number of CPUs) — the usual multi-threaded
// Asio setup. --per-core: an io_context per thread, each with its own acceptor on the same port
// (SO_REUSEPORT: the kernel spreads connections over them), the configuration Asio's examples
// recommend for throughput (io_context_pool) and what weft's thread-per-core mode does. The
// accept loop is a coroutine; every accepted connection gets its own coroutine (the program's
// `serve_connection`). A connection's coroutine never has two operations in flight, so no
// strand is needed even with several threads.
//
// `defer_accept` (seconds; 0: off) sets TCP_DEFER_ACCEPT on the listener(s): asio-http sets it
// as every HTTP server of weft-bench's comparison does (weft's default, nginx's `deferred`), so
// a connection is accepted once its request's first bytes have arrived; asio-echo does not, as
// no echo server of the comparison does.
//
// --cert and --key are read by the programs that serve TLS (asio-http); the others refuse them.
//
// Prints "listening on HOST:PORT" on stdout once the listener is bound; exits 0 on
// SIGTERM/SIGINT. Exit code 2 on bad arguments, 1 if the listener cannot be set up.
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <algorithm>
#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/redirect_error.hpp>
#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace peer {

using asio::ip::tcp;
using connection_fn = asio::awaitable<void> (*)(tcp::socket);

constexpr int kBacklog = 4096;

struct Args {
    std::string host = "127.0.0.1";
    unsigned short port = 8080;
    unsigned threads = 0;
    bool per_core = false;
    std::string cert;  // certificate chain (PEM): serve TLS
    std::string key;   // its private key (PEM)
};

[[noreturn]] inline void usage(const char* prog, const std::string& msg) {
    std::fprintf(stderr,
                 "%s: %s\nusage: %s [-h HOST] [-p PORT] [-t THREADS] [--per-core] "
                 "[--cert F --key F]\n",
                 prog, msg.c_str(), prog);
    std::exit(2);
}

template <class Int>
Int parse_int(const char* prog, std::string_view flag, std::string_view s) {
    Int v{};
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || end != s.data() + s.size()) {
        usage(prog, std::string(flag) + ": bad number \"" + std::string(s) + "\"");
    }
    return v;
}

inline Args parse_args(const char* prog, int argc, char** argv) {
    Args a;
    for (int i = 1; i < argc; i += 2) {
        std::string_view flag = argv[i];
        if (flag == "--per-core") {
            a.per_core = true;
            --i;  // takes no value
            continue;
        }
        if (i + 1 >= argc) {
            usage(prog, std::string(flag) + ": missing value");
        }
        std::string_view value = argv[i + 1];
        if (flag == "-h") {
            a.host = value;
        } else if (flag == "-p") {
            a.port = parse_int<unsigned short>(prog, flag, value);
        } else if (flag == "-t") {
            a.threads = parse_int<unsigned>(prog, flag, value);
        } else if (flag == "--cert") {
            a.cert = value;
        } else if (flag == "--key") {
            a.key = value;
        } else {
            usage(prog, "unknown option \"" + std::string(flag) + "\"");
        }
    }
    if (a.cert.empty() != a.key.empty()) {
        usage(prog, "--cert and --key go together");
    }
    return a;
}

// Accepts forever. On EMFILE/ENFILE (and other accept errors) backs off 5 ms, doubling up to
// 1 s, and retries; the backoff resets after the next successful accept.
inline asio::awaitable<void> accept_loop(tcp::acceptor acceptor,
                                         connection_fn serve_connection,
                                         const char* prog) {
    auto ex = co_await asio::this_coro::executor;
    asio::steady_timer timer(ex);
    std::chrono::milliseconds backoff{0};
    for (;;) {
        std::error_code ec;
        tcp::socket sock =
            co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
        if (!ec) {
            backoff = std::chrono::milliseconds{0};
            asio::co_spawn(ex, serve_connection(std::move(sock)), asio::detached);
            continue;
        }
        if (ec == asio::error::operation_aborted) {
            co_return;  // acceptor closed
        }
        backoff = backoff.count() == 0 ? std::chrono::milliseconds{5}
                                       : std::min(backoff * 2, std::chrono::milliseconds{1000});
        // asio's system_category is its own, so compare against asio's codes, not std::errc.
        if (ec == asio::error::no_descriptors ||
            ec == asio::error_code(ENFILE, asio::error::get_system_category())) {
            std::fprintf(stderr, "%s: accept: %s; retrying in %lld ms\n", prog,
                         ec.message().c_str(), static_cast<long long>(backoff.count()));
        }
        timer.expires_after(backoff);
        co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
}

// Opens, binds and listens; SO_REUSEPORT when several acceptors share the port;
// TCP_DEFER_ACCEPT when defer_accept (seconds) is not 0.
inline tcp::acceptor make_acceptor(asio::io_context& ctx,
                                   const tcp::endpoint& ep,
                                   bool reuse_port,
                                   int defer_accept) {
    tcp::acceptor acceptor(ctx);
    acceptor.open(ep.protocol());
    acceptor.set_option(tcp::acceptor::reuse_address(true));
    if (reuse_port) {
        using reuse_port_option = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;
        acceptor.set_option(reuse_port_option(true));
    }
    if (defer_accept != 0) {
        using defer_accept_option =
            asio::detail::socket_option::integer<IPPROTO_TCP, TCP_DEFER_ACCEPT>;
        acceptor.set_option(defer_accept_option(defer_accept));
    }
    acceptor.bind(ep);
    acceptor.listen(kBacklog);
    return acceptor;
}

// Listens as `args` says (TCP_DEFER_ACCEPT for `defer_accept` seconds, 0: off), serves every
// connection with `serve_connection` until SIGTERM or SIGINT, and returns main's exit status.
inline int run(const char* prog,
               const Args& args,
               connection_fn serve_connection,
               int defer_accept = 0) {
    unsigned threads = args.threads;
    if (threads == 0) {
        threads = std::thread::hardware_concurrency();
    }
    if (threads == 0) {
        threads = 1;
    }

    // One io_context shared by every thread, or (--per-core) one per thread.
    const unsigned contexts = args.per_core ? threads : 1;
    std::vector<std::unique_ptr<asio::io_context>> ctxs;
    for (unsigned i = 0; i < contexts; ++i) {
        ctxs.push_back(
            std::make_unique<asio::io_context>(args.per_core ? 1 : static_cast<int>(threads)));
    }

    // Signals first, so a SIGTERM sent right after the "listening" line is already ours.
    asio::signal_set signals(*ctxs[0], SIGINT, SIGTERM);
    signals.async_wait([&ctxs](std::error_code, int) {
        for (auto& c : ctxs) {
            c->stop();
        }
    });

    unsigned short port = args.port;
    try {
        tcp::resolver resolver(*ctxs[0]);
        auto results = resolver.resolve(args.host, std::to_string(args.port));
        if (results.empty()) {
            throw std::runtime_error("host resolves to no address");
        }
        tcp::endpoint ep = results.begin()->endpoint();
        for (unsigned i = 0; i < contexts; ++i) {
            tcp::acceptor acceptor = make_acceptor(*ctxs[i], ep, args.per_core, defer_accept);
            port = acceptor.local_endpoint().port();
            ep.port(port);  // port 0: the others join the port the first one got
            asio::co_spawn(*ctxs[i], accept_loop(std::move(acceptor), serve_connection, prog),
                           asio::detached);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: listening on %s:%u: %s\n", prog, args.host.c_str(),
                     static_cast<unsigned>(args.port), e.what());
        return 1;
    }
    std::printf("listening on %s:%u\n", args.host.c_str(), static_cast<unsigned>(port));
    std::fflush(stdout);

    std::vector<std::thread> pool;
    pool.reserve(threads - 1);
    for (unsigned i = 1; i < threads; ++i) {
        asio::io_context& c = *ctxs[args.per_core ? i : 0];
        pool.emplace_back([&c] { c.run(); });
    }
    ctxs[0]->run();  // the main thread is one of the THREADS
    for (auto& t : pool) {
        t.join();
    }
    // ~io_context destroys the remaining coroutine frames, closing their sockets.
    return 0;
}

}  // namespace peer
