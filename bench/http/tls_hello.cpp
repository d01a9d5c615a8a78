// tls_hello: weft's server in weft-bench's https suite. HTTPS on 127.0.0.1:PORT with the
// certificate chain and key of two PEM files: GET / -> 200 "Hello, World!" (text/plain), as
// examples/hello_http; with -r DIR (nginx-hello's flag), GET /NAME -> the regular file NAME of DIR
// instead (one path segment; the file opened and sent per request, as nginx serves it).
//
//   tls_hello --port N --cert CHAIN.pem --key KEY.pem [--workers N] [-r DIR]
//
// The TLS context is weft's defaults (TLS 1.2 minimum, session tickets, ALPN http/1.1), one
// context for every worker. Serves until SIGINT or SIGTERM, then drains. Prints
// "listening on HOST:PORT" once ready. WEFT_IO_BACKEND=io_uring|epoll picks the backend.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <weft/http.hpp>
#include <weft/weft.hpp>

namespace {

namespace http = weft::http;

/// GET /{name}: the file `name` of `root` (no '/' in it, not "." or ".."), or 404.
auto file_handler(std::string root) -> http::handler {
    return [root = std::move(root)](http::request& req) -> weft::task<http::response> {
        const std::string name(req.param("name"));
        if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
            co_return http::response::text("Not Found\n", 404);
        }
        const int fd = ::open((root + "/" + name).c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            co_return http::response::text("Not Found\n", 404);
        }
        struct stat st {};
        if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            ::close(fd);
            co_return http::response::text("Forbidden\n", 403);
        }
        co_return http::response::file(fd, 0, static_cast<std::uint64_t>(st.st_size));
    };
}

auto serve(std::uint16_t port, weft::tls_context tls, const std::optional<std::string>& root)
    -> weft::task<int> {
    http::server srv{{.tls = std::move(tls), .on_listening = [](const weft::socket_address& a) {
                          std::printf("listening on %s\n", a.to_string().c_str());
                          std::fflush(stdout);
                      }}};
    if (root) {
        srv.route(http::method::get, "/{name}", file_handler(*root));
    } else {
        srv.route(http::method::get, "/", [](http::request&) -> weft::task<http::response> {
            co_return http::response::text("Hello, World!");
        });
    }
    int status = 0;
    co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
        s.spawn([&]() -> weft::task<void> {
            auto r = co_await srv.listen(weft::socket_address::parse("127.0.0.1", port).value());
            if (!r) {
                std::fprintf(stderr, "tls_hello: %s\n", r.error().message().c_str());
                status = 1;
                s.request_stop();
            }
        });
        auto sig = co_await weft::wait_for_signal({SIGINT, SIGTERM});
        if (sig) {
            co_await srv.shutdown();
        }
    });
    co_return status;
}

}  // namespace

auto main(int argc, char** argv) -> int {
    std::optional<unsigned> port;
    unsigned workers = 0;
    std::string cert;
    std::string key;
    std::optional<std::string> root;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--port" && i + 1 < argc) {
            port = static_cast<unsigned>(std::strtoul(argv[++i], nullptr, 10));
        } else if (a == "--workers" && i + 1 < argc) {
            workers = static_cast<unsigned>(std::strtoul(argv[++i], nullptr, 10));
        } else if (a == "--cert" && i + 1 < argc) {
            cert = argv[++i];
        } else if (a == "--key" && i + 1 < argc) {
            key = argv[++i];
        } else if (a == "-r" && i + 1 < argc) {
            root = argv[++i];
        } else {
            port.reset();
            break;
        }
    }
    if (!port || *port > 65535 || cert.empty() || key.empty()) {
        std::fprintf(stderr,
                     "usage: tls_hello --port N --cert CHAIN.pem --key KEY.pem [--workers N] "
                     "[-r DIR]\n");
        return 2;
    }
    auto tls =
        weft::tls_context::server({.certificate = weft::tls_certificate::from_files(cert, key)});
    weft::runtime rt{{.workers = workers}};
    return rt.block_on(serve(static_cast<std::uint16_t>(*port), std::move(tls), root));
}
