// Asio peer for weft-bench's TCP echo benchmark (see ../README.md).
//
//   asio-echo [-h HOST] [-p PORT] [-t THREADS]
//
// Standalone Asio with C++20 coroutines (asio::awaitable / co_spawn / use_awaitable). One
// io_context run by THREADS threads (0 or absent: number of CPUs) — the usual multi-threaded Asio
// setup. The accept loop is a coroutine; every accepted connection gets its own coroutine that
// reads up to 4096 bytes and writes back exactly what it read until the peer closes. A coroutine
// never has two operations in flight, so no strand is needed even with several threads.
//
// Prints "listening on HOST:PORT" on stdout once the listener is bound; exits 0 on
// SIGTERM/SIGINT. Exit code 2 on bad arguments, 1 if the listener cannot be set up.
#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

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
#include <asio/write.hpp>

namespace {

using asio::ip::tcp;

constexpr std::size_t kBufSize = 4096;
constexpr int kBacklog = 4096;

struct Args {
    std::string host = "127.0.0.1";
    unsigned short port = 8080;
    unsigned threads = 0;
};

[[noreturn]] void usage(const std::string& msg) {
    std::fprintf(stderr, "asio-echo: %s\nusage: asio-echo [-h HOST] [-p PORT] [-t THREADS]\n",
                 msg.c_str());
    std::exit(2);
}

template <class Int>
Int parse_int(std::string_view flag, std::string_view s) {
    Int v{};
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || end != s.data() + s.size())
        usage(std::string(flag) + ": bad number \"" + std::string(s) + "\"");
    return v;
}

Args parse_args(int argc, char** argv) {
    Args a;
    for (int i = 1; i < argc; i += 2) {
        std::string_view flag = argv[i];
        if (i + 1 >= argc) usage(std::string(flag) + ": missing value");
        std::string_view value = argv[i + 1];
        if (flag == "-h")
            a.host = value;
        else if (flag == "-p")
            a.port = parse_int<unsigned short>(flag, value);
        else if (flag == "-t")
            a.threads = parse_int<unsigned>(flag, value);
        else
            usage("unknown option \"" + std::string(flag) + "\"");
    }
    return a;
}

// Echoes until EOF or any error (reset etc.); the socket is closed when the frame goes away.
// async_write loops over partial writes. Errors come back through redirect_error, not as
// exceptions, so ending a connection costs no throw.
asio::awaitable<void> echo(tcp::socket sock) {
    std::error_code ec;
    sock.set_option(tcp::no_delay(true), ec);
    std::array<char, kBufSize> buf;  // lives in the coroutine frame
    for (;;) {
        std::size_t n = co_await sock.async_read_some(
            asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
        if (ec) co_return;
        co_await asio::async_write(sock, asio::buffer(buf.data(), n),
                                   asio::redirect_error(asio::use_awaitable, ec));
        if (ec) co_return;
    }
}

// Accepts forever. On EMFILE/ENFILE (and other accept errors) backs off 5 ms, doubling up to
// 1 s, and retries; the backoff resets after the next successful accept.
asio::awaitable<void> accept_loop(tcp::acceptor acceptor) {
    auto ex = co_await asio::this_coro::executor;
    asio::steady_timer timer(ex);
    std::chrono::milliseconds backoff{0};
    for (;;) {
        std::error_code ec;
        tcp::socket sock =
            co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
        if (!ec) {
            backoff = std::chrono::milliseconds{0};
            asio::co_spawn(ex, echo(std::move(sock)), asio::detached);
            continue;
        }
        if (ec == asio::error::operation_aborted) co_return;  // acceptor closed
        backoff = backoff.count() == 0 ? std::chrono::milliseconds{5}
                                       : std::min(backoff * 2, std::chrono::milliseconds{1000});
        // asio's system_category is its own, so compare against asio's codes, not std::errc.
        if (ec == asio::error::no_descriptors ||
            ec == asio::error_code(ENFILE, asio::error::get_system_category()))
            std::fprintf(stderr, "asio-echo: accept: %s; retrying in %lld ms\n",
                         ec.message().c_str(), static_cast<long long>(backoff.count()));
        timer.expires_after(backoff);
        co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
}

}  // namespace

int main(int argc, char** argv) {
    Args args = parse_args(argc, argv);
    unsigned threads = args.threads;
    if (threads == 0) threads = std::thread::hardware_concurrency();
    if (threads == 0) threads = 1;

    asio::io_context ctx(static_cast<int>(threads));

    // Signals first, so a SIGTERM sent right after the "listening" line is already ours.
    asio::signal_set signals(ctx, SIGINT, SIGTERM);
    signals.async_wait([&ctx](std::error_code, int) { ctx.stop(); });

    tcp::acceptor acceptor(ctx);
    try {
        tcp::resolver resolver(ctx);
        auto results = resolver.resolve(args.host, std::to_string(args.port));
        if (results.empty()) throw std::runtime_error("host resolves to no address");
        tcp::endpoint ep = results.begin()->endpoint();
        acceptor.open(ep.protocol());
        acceptor.set_option(tcp::acceptor::reuse_address(true));
        acceptor.bind(ep);
        acceptor.listen(kBacklog);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "asio-echo: listening on %s:%u: %s\n", args.host.c_str(),
                     static_cast<unsigned>(args.port), e.what());
        return 1;
    }
    std::printf("listening on %s:%u\n", args.host.c_str(),
                static_cast<unsigned>(acceptor.local_endpoint().port()));
    std::fflush(stdout);

    asio::co_spawn(ctx, accept_loop(std::move(acceptor)), asio::detached);

    std::vector<std::thread> pool;
    pool.reserve(threads - 1);
    for (unsigned i = 1; i < threads; ++i) pool.emplace_back([&ctx] { ctx.run(); });
    ctx.run();  // the main thread is one of the THREADS
    for (auto& t : pool) t.join();
    // ~io_context destroys the remaining coroutine frames, closing their sockets.
    return 0;
}
