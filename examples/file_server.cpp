// file_server: serves the files beneath a directory over HTTP/1.1 (GET /{*path}; HEAD too).
// A file up to 16 KiB is read and sent with the head in one write; a larger one is sent with
// sendfile(2) (response::file: from the page cache to the socket, no copy through user space).
//
//   file_server [--root DIR] [--port N] [--workers N] [--per-core]
//
// With --port (0: any free port) it prints "listening on HOST:PORT" once ready, serves until
// SIGINT or SIGTERM, then drains and exits 0. Without --port it checks itself: it serves a
// temporary directory on a free port, requests it with weft's client and exits 0 only if every
// answer is right. WEFT_IO_BACKEND=io_uring|epoll picks the backend.
//
// Only regular files are served; no listings, no index pages, no percent-decoding. openat2's
// RESOLVE_BENEATH keeps every lookup beneath the root: a `..` or a symlink that leads out is
// refused (403) in the same call that opens the file.
//
// NOTE: openat2 and fstat are blocking calls made on the worker. For files in the page cache
// they take microseconds; a server for a slow or network file system would move them to
// weft::spawn_blocking.

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <weft/http.hpp>
#include <weft/weft.hpp>

namespace {

namespace http = weft::http;
using namespace std::string_view_literals;

/// Files up to this size are read and sent with their head in one write (one TCP segment)
/// instead of a write for the head and a sendfile for the body: on loopback the second segment
/// costs more than copying 16 KiB (the http-static suite of tools/weft-bench).
constexpr std::uint64_t small_file_max = 16 * 1024;

/// The served directory, held open: every lookup resolves beneath this descriptor.
struct root_dir {
    int fd;
    explicit root_dir(const std::string& path)
        : fd(::open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)) {
        if (fd < 0) {
            throw std::system_error(errno, std::system_category(), "file_server: open " + path);
        }
    }
    root_dir(const root_dir&) = delete;
    auto operator=(const root_dir&) -> root_dir& = delete;
    ~root_dir() { ::close(fd); }
};

auto status_of_errno(int e) -> int {
    switch (e) {
        case ENOENT:
        case ENOTDIR:
        case ENAMETOOLONG:
            return 404;
        case EACCES:
        case EPERM:
        case ELOOP:
        case EXDEV:  // RESOLVE_BENEATH: the path leads out of the root
            return 403;
        default:
            return 500;
    }
}

/// The whole file of `fd`, `size` bytes; nullopt when it is shorter or cannot be read.
auto read_whole(int fd, std::uint64_t size) -> std::optional<std::string> {
    std::string out(size, '\0');
    std::uint64_t got = 0;
    while (got < size) {
        const ssize_t n = ::pread(fd, out.data() + got, size - got, static_cast<off_t>(got));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return std::nullopt;
        }
        got += static_cast<std::uint64_t>(n);
    }
    return out;
}

auto error_response(int status) -> http::response {
    return http::response::text(std::string(http::reason_phrase(status)) + "\n", status);
}

/// GET /{*path}: the file `path` beneath the root, or 403 / 404.
auto file_handler(std::shared_ptr<const root_dir> root) -> http::handler {
    return [root = std::move(root)](http::request& req) -> weft::task<http::response> {
        const std::string rel(req.param("path"));
        open_how how{};
        how.flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC;  // O_NONBLOCK: a FIFO never blocks open
        how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
        const int fd = static_cast<int>(
            ::syscall(SYS_openat2, root->fd, rel.empty() ? "." : rel.c_str(), &how, sizeof how));
        if (fd < 0) {
            co_return error_response(status_of_errno(errno));
        }
        struct stat st {};
        if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            ::close(fd);
            co_return error_response(403);  // directories, devices, sockets: never served
        }
        const auto size = static_cast<std::uint64_t>(st.st_size);
        if (size > small_file_max) {
            co_return http::response::file(fd, 0, size);  // the response closes fd
        }
        auto body = read_whole(fd, size);
        ::close(fd);
        co_return body ? http::response::text(std::move(*body), 200, "application/octet-stream")
                       : error_response(500);
    };
}

auto serve_until_signal(const std::string& root, std::uint16_t port) -> weft::task<int> {
    http::server srv{{.on_listening = [](const weft::socket_address& a) {
        std::printf("listening on %s\n", a.to_string().c_str());
        std::fflush(stdout);
    }}};
    srv.route(http::method::get, "/{*path}", file_handler(std::make_shared<root_dir>(root)));
    int status = 0;
    co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
        s.spawn([&]() -> weft::task<void> {
            auto r = co_await srv.listen(weft::socket_address::parse("0.0.0.0", port).value());
            if (!r) {
                std::fprintf(stderr, "file_server: %s\n", r.error().message().c_str());
                status = 1;
                s.request_stop();
            }
        });
        if (auto sig = co_await weft::wait_for_signal({SIGINT, SIGTERM}); sig) {
            co_await srv.shutdown();
        }
    });
    co_return status;
}

// ---- self-check ----

void write_file(const std::filesystem::path& p, const std::string& content) {
    std::ofstream(p, std::ios::binary)
        .write(content.data(), static_cast<std::streamsize>(content.size()));
}

/// base/root is served; base/secret.txt lies outside it. Removed when the check ends.
struct sample_tree {
    std::filesystem::path base;
    std::string big;

    sample_tree() {
        std::string tmpl = (std::filesystem::temp_directory_path() / "weft-files-XXXXXX").string();
        if (::mkdtemp(tmpl.data()) == nullptr) {
            throw std::system_error(errno, std::system_category(), "mkdtemp");
        }
        base = tmpl;
        const auto root = base / "root";
        std::filesystem::create_directories(root / "sub");
        write_file(base / "secret.txt", "outside the root\n");
        write_file(root / "a.txt", "alpha\n");
        big.resize(3 * 1024 * 1024 + 17);  // sent with sendfile
        for (std::size_t i = 0; i < big.size(); ++i) {
            big[i] = static_cast<char>((i * 131 + i / 4096) & 0xff);
        }
        write_file(root / "sub" / "big.bin", big);
        std::filesystem::create_symlink("../secret.txt", root / "leak");
    }
    sample_tree(const sample_tree&) = delete;
    auto operator=(const sample_tree&) -> sample_tree& = delete;
    ~sample_tree() {
        std::error_code ec;
        std::filesystem::remove_all(base, ec);
    }
};

auto self_check() -> weft::task<int> {
    const sample_tree tree;
    http::server srv;
    srv.route(http::method::get, "/{*path}",
              file_handler(std::make_shared<root_dir>((tree.base / "root").string())));
    auto listener =
        weft::tcp_listener::bind(weft::socket_address::parse("127.0.0.1", 0).value()).value();
    const auto addr = listener.local_address().value();
    int failures = 0;
    auto check = [&](bool ok, const char* what) {
        if (!ok) {
            std::fprintf(stderr, "file_server self-check: %s failed\n", what);
            ++failures;
        }
    };
    co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
        s.spawn(srv.serve(listener));
        auto c = (co_await http::client::connect(addr)).value();
        auto r = (co_await c.get("/a.txt")).value();
        check(r.status == 200 && r.body == "alpha\n"sv, "GET /a.txt (read, one write)");
        r = (co_await c.get("/sub/big.bin")).value();
        check(r.status == 200 && r.body == tree.big, "GET /sub/big.bin (sendfile), every byte");
        r = (co_await c.get("/missing.txt")).value();
        check(r.status == 404, "missing file -> 404");
        r = (co_await c.get("/sub")).value();
        check(r.status == 403, "directory -> 403");
        r = (co_await c.get("/leak")).value();
        check(r.status == 403 && r.body.find("outside") == std::string::npos,
              "symlink out of the root -> 403");
        r = (co_await c.get("/sub/../../secret.txt")).value();
        check(r.status == 403, "/sub/../../ -> 403");
        (co_await c.send("HEAD", "/a.txt")).value();
        r = (co_await c.read_response(true)).value();
        check(r.status == 200 && r.body.empty() && r.header("Content-Length") == "6"sv,
              "HEAD /a.txt");
        r = (co_await c.get("/a.txt")).value();  // the connection is still in step
        check(r.status == 200 && r.body == "alpha\n"sv, "keep-alive after errors");
        co_await srv.shutdown();
    });
    std::printf("file_server (%s): self-check %s\n",
                std::string(weft::to_string(weft::current_io_backend())).c_str(),
                failures == 0 ? "passed" : "FAILED");
    co_return failures == 0 ? 0 : 1;
}

}  // namespace

auto main(int argc, char** argv) -> int {
    std::string root = ".";
    std::optional<std::uint16_t> port;
    unsigned workers = 0;
    bool per_core = false;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--root" && i + 1 < argc) {
            root = argv[++i];
        } else if (a == "--port" && i + 1 < argc &&
                   std::strtoul(argv[i + 1], nullptr, 10) < 65536) {
            port = static_cast<std::uint16_t>(std::strtoul(argv[++i], nullptr, 10));
        } else if (a == "--workers" && i + 1 < argc) {
            workers = static_cast<unsigned>(std::strtoul(argv[++i], nullptr, 10));
        } else if (a == "--per-core") {
            per_core = true;
        } else {
            std::fprintf(stderr,
                         "usage: file_server [--root DIR] [--port N] [--workers N] [--per-core]\n");
            return 2;
        }
    }
    weft::runtime rt{{.workers = workers, .stealing = !per_core}};
    return port ? rt.block_on(serve_until_signal(root, *port)) : rt.block_on(self_check());
}
