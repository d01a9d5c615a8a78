// Boost.Beast peer for weft-bench's HTTP suites (see ../README.md): the routes of
// examples/hello_http.cpp written the way Beast's own coroutine examples write a server.
//
//   beast-http [-h HOST] [-p PORT] [-t THREADS]
//
// One io_context run by THREADS threads (0 or absent: number of CPUs), the main thread one of
// them; a C++20 coroutine (boost::asio::awaitable) accepts, and one coroutine per connection
// reads a request with http::async_read into a flat_buffer (request_parser, body limit 1 MiB),
// answers it with http::async_write, and loops while the request keeps the connection alive
// (Beast's keep_alive()). The stream is a beast::tcp_stream with a 30 s timeout on every read
// and write, as Beast's examples set one. Beast answers pipelined requests one write each: it
// has no batching of its own. Routes: GET / -> 200 "Hello, World!" (text/plain), POST /echo ->
// the body; otherwise 404, or 405 with Allow. Responses carry Server, Content-Type and
// Content-Length (Beast adds no Date). Prints "listening on HOST:PORT" once bound; exits 0 on
// SIGTERM/SIGINT. Exit code 2 on bad arguments, 1 if the listener cannot be set up.
// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange without it
// clang-format on
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using string_response = http::response<http::string_body>;

constexpr int kBacklog = 4096;
constexpr std::uint64_t kBodyLimit = 1 << 20;
constexpr auto kTimeout = std::chrono::seconds(30);

[[noreturn]] void usage(const std::string& msg) {
    std::fprintf(stderr, "beast-http: %s\nusage: beast-http [-h HOST] [-p PORT] [-t THREADS]\n",
                 msg.c_str());
    std::exit(2);
}

unsigned parse_number(std::string_view flag, std::string_view s, unsigned max) {
    unsigned v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || end != s.data() + s.size() || v > max) {
        usage(std::string(flag) + ": bad number \"" + std::string(s) + "\"");
    }
    return v;
}

string_response answer(const http::request<http::string_body>& req) {
    string_response res;
    res.version(req.version());
    res.keep_alive(req.keep_alive());
    res.set(http::field::server, "beast");
    res.set(http::field::content_type, "text/plain");
    const auto target = req.target();
    const auto method = req.method();
    if (target == "/" && method == http::verb::get) {
        res.result(http::status::ok);
        res.body() = "Hello, World!";
    } else if (target == "/echo" && method == http::verb::post) {
        res.result(http::status::ok);
        res.body() = req.body();
    } else if (target == "/" || target == "/echo") {
        res.result(http::status::method_not_allowed);
        res.set(http::field::allow, target == "/" ? "GET" : "POST");
        res.body() = "Method Not Allowed";
    } else {
        res.result(http::status::not_found);
        res.body() = "Not Found";
    }
    res.prepare_payload();
    return res;
}

asio::awaitable<void> session(tcp::socket sock) {
    beast::error_code ec;
    sock.set_option(tcp::no_delay(true), ec);
    beast::tcp_stream stream(std::move(sock));
    beast::flat_buffer buffer;
    for (;;) {
        http::request_parser<http::string_body> parser;
        parser.body_limit(kBodyLimit);
        stream.expires_after(kTimeout);
        co_await http::async_read(stream, buffer, parser,
                                  asio::redirect_error(asio::use_awaitable, ec));
        if (ec) {
            break;  // end of stream, timeout, or a malformed request: close
        }
        string_response res = answer(parser.get());
        const bool keep_alive = res.keep_alive();
        stream.expires_after(kTimeout);
        co_await http::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
        if (ec || !keep_alive) {
            break;
        }
    }
    stream.socket().shutdown(tcp::socket::shutdown_send, ec);
}

// Accepts forever; accept errors (EMFILE, ...) back off 5 ms doubling to 1 s, as the other
// peers do.
asio::awaitable<void> accept_loop(tcp::acceptor acceptor) {
    auto ex = co_await asio::this_coro::executor;
    asio::steady_timer timer(ex);
    std::chrono::milliseconds backoff{0};
    for (;;) {
        beast::error_code ec;
        tcp::socket sock =
            co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
        if (!ec) {
            backoff = std::chrono::milliseconds{0};
            asio::co_spawn(ex, session(std::move(sock)), asio::detached);
            continue;
        }
        if (ec == asio::error::operation_aborted) {
            co_return;
        }
        backoff = backoff.count() == 0 ? std::chrono::milliseconds{5}
                                       : std::min(backoff * 2, std::chrono::milliseconds{1000});
        std::fprintf(stderr, "beast-http: accept: %s; retrying in %lld ms\n", ec.message().c_str(),
                     static_cast<long long>(backoff.count()));
        timer.expires_after(backoff);
        co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
}

}  // namespace

int main(int argc, char** argv) {
    std::string host = "127.0.0.1";
    unsigned port = 8080;
    unsigned threads = 0;
    for (int i = 1; i < argc; i += 2) {
        const std::string_view flag = argv[i];
        if (i + 1 >= argc) {
            usage(std::string(flag) + ": missing value");
        }
        const std::string_view value = argv[i + 1];
        if (flag == "-h") {
            host = value;
        } else if (flag == "-p") {
            port = parse_number(flag, value, 65535);
        } else if (flag == "-t") {
            threads = parse_number(flag, value, 1024);
        } else {
            usage("unknown option \"" + std::string(flag) + "\"");
        }
    }
    if (threads == 0) {
        threads = std::max(1U, std::thread::hardware_concurrency());
    }
    asio::io_context ctx(static_cast<int>(threads));
    asio::signal_set signals(ctx, SIGINT, SIGTERM);
    signals.async_wait([&ctx](beast::error_code, int) { ctx.stop(); });
    unsigned bound = port;
    try {
        tcp::resolver resolver(ctx);
        auto results = resolver.resolve(host, std::to_string(port));
        if (results.empty()) {
            throw std::runtime_error("host resolves to no address");
        }
        const tcp::endpoint ep = results.begin()->endpoint();
        tcp::acceptor acceptor(ctx);
        acceptor.open(ep.protocol());
        acceptor.set_option(tcp::acceptor::reuse_address(true));
        // TCP_DEFER_ACCEPT (1 s, weft's default), as every HTTP server of weft-bench's
        // comparison sets it: a connection is accepted once its request's bytes have arrived.
        using defer_accept_option =
            asio::detail::socket_option::integer<IPPROTO_TCP, TCP_DEFER_ACCEPT>;
        acceptor.set_option(defer_accept_option(1));
        acceptor.bind(ep);
        acceptor.listen(kBacklog);
        bound = acceptor.local_endpoint().port();
        asio::co_spawn(ctx, accept_loop(std::move(acceptor)), asio::detached);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "beast-http: listening on %s:%u: %s\n", host.c_str(), port, e.what());
        return 1;
    }
    std::printf("listening on %s:%u\n", host.c_str(), bound);
    std::fflush(stdout);
    std::vector<std::thread> pool;
    for (unsigned i = 1; i < threads; ++i) {
        pool.emplace_back([&ctx] { ctx.run(); });
    }
    ctx.run();
    for (auto& t : pool) {
        t.join();
    }
    return 0;
}
