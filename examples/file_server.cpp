// file_server: serves a directory over HTTP/1.1, each file larger than 16 KiB sent with
// sendfile(2) (response::file: from the page cache to the socket, no copy through user space),
// smaller ones read and sent with the head in one write.
//
//   file_server [--root DIR] [--port N] [--workers N] [--per-core]
//
// One route, GET /{*path} (HEAD is answered by it too, without the body). The path is
// percent-decoded, then checked: a `..` segment is refused (403), as is any path that a symlink
// leads out of the root (openat2's RESOLVE_BENEATH: an absolute symlink is refused even when it
// points inside; relative ones inside the root are followed); a missing file is 404; a directory is
// served by its index.html if it has one, else 403 (no listings); a directory named without its
// trailing slash is redirected (301) so that relative links in its index resolve. Content-Type
// comes from the extension. --root defaults to the current directory.
//
// With --port (0: any free port) it prints "listening on HOST:PORT" once ready, serves until SIGINT
// or SIGTERM, then drains and exits 0. Without --port it checks itself: it builds a directory tree
// in a temporary directory (files, a subdirectory, a symlink out of the root), serves it on a free
// port, requests it with weft's client and exits 0 if every answer is right.
// WEFT_IO_BACKEND=io_uring|epoll picks the backend.
//
// NOTE: openat2, open and fstat are blocking calls made on the worker. For files in the page
// cache they take microseconds; a server for a slow or network file system would move them to
// weft::spawn_blocking.

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
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

auto content_type_of(std::string_view name) -> std::string_view {
    struct entry {
        std::string_view ext;
        std::string_view type;
    };
    static constexpr entry table[] = {
        {".html", "text/html; charset=utf-8"},
        {".htm", "text/html; charset=utf-8"},
        {".txt", "text/plain; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},
        {".js", "text/javascript; charset=utf-8"},
        {".json", "application/json"},
        {".xml", "application/xml"},
        {".svg", "image/svg+xml"},
        {".png", "image/png"},
        {".jpg", "image/jpeg"},
        {".jpeg", "image/jpeg"},
        {".gif", "image/gif"},
        {".webp", "image/webp"},
        {".ico", "image/x-icon"},
        {".wasm", "application/wasm"},
        {".pdf", "application/pdf"},
        {".woff2", "font/woff2"},
    };
    const auto slash = name.rfind('/');
    const auto base = slash == std::string_view::npos ? name : name.substr(slash + 1);
    const auto dot = base.rfind('.');
    if (dot != std::string_view::npos && dot != 0) {
        const auto ext = base.substr(dot);
        for (const auto& e : table) {
            if (ext.size() == e.ext.size() &&
                std::equal(ext.begin(), ext.end(), e.ext.begin(), [](char a, char b) {
                    return (a >= 'A' && a <= 'Z' ? a - 'A' + 'a' : a) == b;
                })) {
                return e.type;
            }
        }
    }
    return "application/octet-stream";
}

auto hex_value(char c) -> int {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/// `%XX` decoded; nullopt for a malformed escape or a NUL (which no file name holds).
auto percent_decode(std::string_view s) -> std::optional<std::string> {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        char c = s[i];
        if (c == '%') {
            if (i + 2 >= s.size()) {
                return std::nullopt;
            }
            const int hi = hex_value(s[i + 1]);
            const int lo = hex_value(s[i + 2]);
            if (hi < 0 || lo < 0) {
                return std::nullopt;
            }
            c = static_cast<char>(hi * 16 + lo);
            i += 2;
        }
        if (c == '\0') {
            return std::nullopt;
        }
        out.push_back(c);
    }
    return out;
}

/// What a request path resolves to: an open regular file, or the status to answer with.
struct lookup {
    int status = 200;
    int fd = -1;
    std::uint64_t size = 0;
    std::string type;
    std::string location;  // for 301
};

auto status_of_errno(int e) -> int {
    switch (e) {
        case ENOENT:
        case ENOTDIR:
        case ENAMETOOLONG:
            return 404;
        case EACCES:
        case EPERM:
        case ELOOP:  // O_NOFOLLOW met a symlink (index.html), or a symlink loop
        case EXDEV:  // RESOLVE_BENEATH: the path leads out of the root
            return 403;
        default:
            return 500;
    }
}

/// Opens `name` in `dirfd` with O_NOFOLLOW and checks it is a regular file.
auto open_regular(int dirfd, const char* name, lookup& out) -> bool {
    const int fd = ::openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        out.status = status_of_errno(errno);
        return false;
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        out.status = 403;  // a device, socket or FIFO is never served
        return false;
    }
    out.fd = fd;
    out.size = static_cast<std::uint64_t>(st.st_size);
    return true;
}

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

/// openat2(2) with RESOLVE_BENEATH: the whole resolution of `rel`, symlinks included, must stay
/// beneath `dirfd`; an absolute symlink, or a relative one that climbs out, at any component,
/// fails with EXDEV. RESOLVE_NO_MAGICLINKS refuses /proc-style links. O_NONBLOCK: opening a
/// FIFO does not wait for a writer (it is refused as not regular after the open).
auto open_beneath(int dirfd, const char* rel) -> int {
    open_how how{};
    how.flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    return static_cast<int>(::syscall(SYS_openat2, dirfd, rel, &how, sizeof how));
}

/// Resolves the route's `{*path}` (percent-encoded, without the leading '/') beneath `root`.
///
/// Two checks, because each covers what the other cannot: `..` segments are refused before the
/// file system is touched (a request has no business naming them, and it keeps the answer 403
/// whether or not the target exists); openat2's RESOLVE_BENEATH then refuses any symlink that
/// leads out of the root, whether it is the last component or one in the middle, in the same
/// call that opens the file (no window between a check and the open). One open and one fstat
/// per file served.
auto resolve(const root_dir& root, std::string_view encoded, std::string_view request_path)
    -> lookup {
    lookup out;
    const auto decoded = percent_decode(encoded);
    if (!decoded) {
        out.status = 400;
        return out;
    }
    std::string rel;
    std::string_view rest = *decoded;
    while (!rest.empty()) {
        const auto slash = rest.find('/');
        const auto seg = rest.substr(0, slash);
        rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
        if (seg == ".."sv) {
            out.status = 403;
            return out;
        }
        if (seg.empty() || seg == "."sv) {
            continue;
        }
        if (!rel.empty()) {
            rel.push_back('/');
        }
        rel.append(seg);
    }
    const bool trailing_slash = decoded->empty() || decoded->back() == '/';

    const int fd = open_beneath(root.fd, rel.empty() ? "." : rel.c_str());
    if (fd < 0) {
        out.status = status_of_errno(errno);
        return out;
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        out.status = status_of_errno(errno);
        ::close(fd);
        return out;
    }
    if (S_ISDIR(st.st_mode)) {
        if (!trailing_slash) {
            ::close(fd);
            out.status = 301;
            out.location = std::string(request_path) + "/";
            return out;
        }
        // O_NOFOLLOW: an index.html that is a symlink is not served (it could lead anywhere).
        const bool ok = open_regular(fd, "index.html", out);
        ::close(fd);
        if (!ok) {
            out.status = out.status == 404 ? 403 : out.status;  // no index: no listing either
            return out;
        }
        out.type = std::string(content_type_of("index.html"));
        return out;
    }
    if (!S_ISREG(st.st_mode) || trailing_slash) {
        ::close(fd);
        out.status = trailing_slash ? 404 : 403;  // "/a.txt/": a file is not a directory
        return out;
    }
    out.fd = fd;
    out.size = static_cast<std::uint64_t>(st.st_size);
    out.type = std::string(content_type_of(rel));
    return out;
}

/// Files up to this size are read and sent with their head in one write (one TCP segment
/// here) instead of a write for the head and a sendfile for the body: two segments, and the
/// per-segment cost of loopback TCP is more than copying 16 KiB (server CPU per 4 KiB request:
/// see the http-static suite of tools/weft-bench).
constexpr std::uint64_t small_file_max = 16 * 1024;

/// The first `size` bytes of `fd`; nullopt when it is shorter or cannot be read.
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

auto make_handler(const std::string& root_path) -> http::handler {
    auto root = std::make_shared<const root_dir>(root_path);
    return [root = std::move(root)](http::request& req) -> weft::task<http::response> {
        lookup l = resolve(*root, req.param("path"), req.path());
        if (l.status == 200 && l.size <= small_file_max) {
            auto body = read_whole(l.fd, l.size);
            ::close(l.fd);
            if (body) {
                co_return http::response::text(std::move(*body), 200, l.type);
            }
            co_return http::response::text("Internal Server Error\n", 500);
        }
        if (l.status == 200) {
            co_return http::response::file(l.fd, 0, l.size, l.type);
        }
        http::response r =
            http::response::text(std::string(http::reason_phrase(l.status)) + "\n", l.status);
        if (l.status == 301) {
            r.set_header("Location", l.location);
        }
        co_return r;
    };
}

auto canonical_root(const std::string& dir) -> std::optional<std::string> {
    char real[PATH_MAX];
    if (::realpath(dir.c_str(), real) == nullptr) {
        return std::nullopt;
    }
    struct stat st {};
    if (::stat(real, &st) != 0 || !S_ISDIR(st.st_mode)) {
        return std::nullopt;
    }
    return std::string(real);
}

auto serve_until_signal(std::string root, unsigned port) -> weft::task<int> {
    http::server srv{{.on_listening = [](const weft::socket_address& a) {
        std::printf("listening on %s\n", a.to_string().c_str());
        std::fflush(stdout);
    }}};
    srv.route(http::method::get, "/{*path}", make_handler(std::move(root)));
    const auto addr = weft::socket_address::parse("0.0.0.0", static_cast<std::uint16_t>(port));
    if (!addr) {
        std::fprintf(stderr, "file_server: bad port %u\n", port);
        co_return 2;
    }
    int status = 0;
    co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
        s.spawn([&]() -> weft::task<void> {
            auto r = co_await srv.listen(*addr);
            if (!r) {
                std::fprintf(stderr, "file_server: %s\n", r.error().message().c_str());
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

// ---- self-check ----

auto check(bool ok, const char* what, int& failures) -> void {
    if (!ok) {
        std::fprintf(stderr, "file_server self-check: %s failed\n", what);
        ++failures;
    }
}

void write_file(const std::filesystem::path& p, const std::string& content) {
    std::ofstream f(p, std::ios::binary);
    f.write(content.data(), static_cast<std::streamsize>(content.size()));
}

/// The tree the self-check serves; removed when the check ends.
struct sample_tree {
    std::filesystem::path base;  // base/root is served; base/secret.txt is outside it
    std::filesystem::path root;
    std::string big;

    sample_tree() {
        std::string tmpl = (std::filesystem::temp_directory_path() / "weft-files-XXXXXX").string();
        if (::mkdtemp(tmpl.data()) == nullptr) {
            throw std::system_error(errno, std::system_category(), "mkdtemp");
        }
        base = tmpl;
        root = base / "root";
        namespace fs = std::filesystem;
        fs::create_directories(root / "sub");
        fs::create_directories(root / "site");
        write_file(base / "secret.txt", "outside the root\n");
        write_file(root / "index.html", "<h1>home</h1>\n");
        write_file(root / "a.txt", "alpha\n");
        write_file(root / "space file.txt", "spaced\n");
        write_file(root / "sub" / "style.css", "body{}\n");  // sub/ has no index.html
        write_file(root / "site" / "index.html", "<h1>site</h1>\n");
        big.resize(3 * 1024 * 1024 + 17);
        for (std::size_t i = 0; i < big.size(); ++i) {
            big[i] = static_cast<char>((i * 131 + i / 4096) & 0xff);
        }
        write_file(root / "big.bin", big);
        fs::create_symlink("../secret.txt", root / "leak");           // out of the root: 403
        fs::create_symlink("a.txt", root / "alias.txt");              // inside: served
        fs::create_symlink(base, root / "sub" / "up");                // a directory out of it
        fs::create_symlink("../../secret.txt", root / "site" / "x");  // deeper, same escape
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
    const auto root = canonical_root(tree.root.string());
    if (!root) {
        std::fprintf(stderr, "file_server: cannot resolve %s\n", tree.root.c_str());
        co_return 1;
    }
    http::server srv;
    srv.route(http::method::get, "/{*path}", make_handler(*root));
    auto l = weft::tcp_listener::bind(weft::socket_address::parse("127.0.0.1", 0).value());
    if (!l) {
        std::fprintf(stderr, "file_server: bind: %s\n", l.error().message().c_str());
        co_return 1;
    }
    const auto addr = l->local_address().value();
    int failures = 0;
    co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
        s.spawn(srv.serve(*l));
        auto c = (co_await http::client::connect(addr)).value();

        auto r = (co_await c.get("/")).value();
        check(r.status == 200 && r.body == "<h1>home</h1>\n"sv, "GET / -> index.html", failures);
        check(r.header("Content-Type") == "text/html; charset=utf-8"sv, "index Content-Type",
              failures);
        r = (co_await c.get("/a.txt")).value();
        check(r.status == 200 && r.body == "alpha\n"sv, "GET /a.txt", failures);
        check(r.header("Content-Type") == "text/plain; charset=utf-8"sv, "txt Content-Type",
              failures);
        r = (co_await c.get("/space%20file.txt")).value();
        check(r.status == 200 && r.body == "spaced\n"sv, "percent-decoded name", failures);
        r = (co_await c.get("/sub/style.css")).value();
        check(r.status == 200 && r.header("Content-Type") == "text/css; charset=utf-8"sv,
              "GET /sub/style.css", failures);
        r = (co_await c.get("/big.bin")).value();
        check(r.status == 200 && r.body.size() == tree.big.size() && r.body == tree.big,
              "3 MB file, every byte", failures);
        check(r.header("Content-Type") == "application/octet-stream"sv, "default Content-Type",
              failures);
        r = (co_await c.get("/alias.txt")).value();
        check(r.status == 200 && r.body == "alpha\n"sv, "symlink inside the root", failures);
        r = (co_await c.get("/site/")).value();
        check(r.status == 200 && r.body == "<h1>site</h1>\n"sv, "GET /site/ -> index", failures);
        r = (co_await c.get("/site")).value();
        check(r.status == 301 && r.header("Location") == "/site/"sv, "GET /site -> 301", failures);

        r = (co_await c.get("/missing.txt")).value();
        check(r.status == 404, "missing file -> 404", failures);
        r = (co_await c.get("/sub/missing/deeper")).value();
        check(r.status == 404, "missing directory -> 404", failures);
        r = (co_await c.get("/a.txt/x")).value();
        check(r.status == 404, "file used as a directory -> 404", failures);
        r = (co_await c.get("/a.txt/")).value();
        check(r.status == 404, "file with a trailing slash -> 404", failures);
        r = (co_await c.get("/sub/")).value();
        check(r.status == 403, "directory without index -> 403", failures);
        r = (co_await c.get("/leak")).value();
        check(r.status == 403 && r.body.find("outside") == std::string::npos,
              "symlink out of the root -> 403", failures);
        r = (co_await c.get("/sub/up/secret.txt")).value();
        check(r.status == 403, "directory symlink out of the root -> 403", failures);
        r = (co_await c.get("/site/x")).value();
        check(r.status == 403, "nested symlink out of the root -> 403", failures);
        r = (co_await c.get("/../secret.txt")).value();
        check(r.status == 403, "/../ -> 403", failures);
        r = (co_await c.get("/sub/%2e%2e/%2E%2E/secret.txt")).value();
        check(r.status == 403, "percent-encoded .. -> 403", failures);
        r = (co_await c.get("/sub/..%2f..%2fsecret.txt")).value();
        check(r.status == 403, "encoded slash with .. -> 403", failures);
        r = (co_await c.get("/a%zz.txt")).value();
        check(r.status == 400, "malformed escape -> 400", failures);
        r = (co_await c.get("/a%00.txt")).value();
        check(r.status == 400, "encoded NUL -> 400", failures);

        (co_await c.send("HEAD", "/a.txt")).value();
        r = (co_await c.read_response(true)).value();
        check(r.status == 200 && r.body.empty() && r.header("Content-Length") == "6"sv,
              "HEAD /a.txt", failures);
        r = (co_await c.request("POST", "/a.txt", "x")).value();
        check(r.status == 405, "POST -> 405", failures);
        r = (co_await c.get("/a.txt")).value();  // the connection is still in step
        check(r.status == 200 && r.body == "alpha\n"sv, "keep-alive after errors", failures);
        co_await srv.shutdown();
    });
    std::printf("file_server (%s): self-check %s\n",
                std::string(weft::to_string(weft::current_io_backend())).c_str(),
                failures == 0 ? "passed" : "FAILED");
    co_return failures == 0 ? 0 : 1;
}

}  // namespace

auto main(int argc, char** argv) -> int {
    std::string root_dir = ".";
    std::optional<unsigned> port;  // --port 0: a free port, printed once listening
    unsigned workers = 0;
    bool per_core = false;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--root" && i + 1 < argc) {
            root_dir = argv[++i];
        } else if (a == "--port" && i + 1 < argc) {
            port = static_cast<unsigned>(std::strtoul(argv[++i], nullptr, 10));
            if (*port > 65535) {
                std::fprintf(stderr, "bad port %s\n", argv[i]);
                return 2;
            }
        } else if (a == "--workers" && i + 1 < argc) {
            workers = static_cast<unsigned>(std::strtoul(argv[++i], nullptr, 10));
        } else if (a == "--per-core") {
            per_core = true;
        } else {
            std::fprintf(stderr,
                         "usage: file_server [--root DIR] [--port N] [--workers N] "
                         "[--per-core]\n");
            return 2;
        }
    }
    weft::block_signals({SIGINT, SIGTERM});  // before any thread: wait_for_signal takes them
    auto opts = weft::io_runtime_options(workers);
    opts.stealing = !per_core;
    weft::runtime rt{opts};
    if (!port) {
        return rt.block_on(self_check());
    }
    auto root = canonical_root(root_dir);
    if (!root) {
        std::fprintf(stderr, "file_server: %s is not a directory\n", root_dir.c_str());
        return 2;
    }
    return rt.block_on(serve_until_signal(std::move(*root), *port));
}
