// Faults at the edges of the IO layer, on both backends: the process out of descriptors, a peer
// that resets in the middle of a write, a peer that half-closes, a peer that never reads, a
// connect into a black hole, a write to a full file system. Each fault must reach the caller as
// a value (never a signal, a throw or a hang), and leave nothing behind: after every test the
// process holds the descriptors and coroutine frames it held before, and no IO operation,
// multishot operation, unclaimed connection or blocking file call is left (the fixture checks).
//
// Everything is local: loopback sockets, a listener whose backlog is full for the black hole
// (its SYNs are dropped, as a filtered route's would be), a 1 MiB tmpfs this test mounts for
// ENOSPC (skipped where mounting is refused: not root, or no CAP_SYS_ADMIN).

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "accept_queue.hpp"
#include "io_waits.hpp"
#include "weft/core/frame_allocator.hpp"
#include "weft/core/scope.hpp"
#include "weft/io/file.hpp"
#include "weft/io/tcp_listener.hpp"
#include "weft/io/tcp_stream.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"

namespace {

using namespace std::chrono_literals;
using namespace std::string_view_literals;
using weft::test::io_waits;
using weft::test::until;

auto loopback() -> weft::socket_address {
    return weft::socket_address::parse("127.0.0.1", 0).value();
}

auto open_fds() -> int {
    int n = 0;
    if (DIR* d = ::opendir("/proc/self/fd")) {
        while (::readdir(d) != nullptr) {
            ++n;
        }
        ::closedir(d);
    }
    return n;
}

// Pseudo-random bytes (splitmix64, 8 at a time: cheap enough for 64 MiB in sanitizer builds).
auto random_payload(std::size_t n, std::uint64_t seed) -> std::vector<std::byte> {
    std::vector<std::byte> v(n);
    std::uint64_t x = seed;
    for (std::size_t i = 0; i < n; i += 8) {
        x += 0x9E3779B97F4A7C15ULL;
        std::uint64_t z = x;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        z ^= z >> 31;
        std::memcpy(v.data() + i, &z, std::min<std::size_t>(8, n - i));
    }
    return v;
}

// Reads until eof; any other error ends the read with it.
auto read_to_end(weft::tcp_stream& s) -> weft::task<weft::result<std::vector<std::byte>>> {
    std::vector<std::byte> out;
    std::array<std::byte, 16384> buf{};
    for (;;) {
        auto n = co_await s.read_some(buf);
        if (!n) {
            if (n.error() == weft::io_errc::eof) {
                co_return out;
            }
            co_return n.error();
        }
        out.insert(out.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(*n));
    }
}

// Accepts one connection and echoes it until the peer closes.
auto echo_one(weft::tcp_listener& l, std::atomic<bool>& accepted)
    -> weft::task<weft::result<void>> {
    auto c = co_await l.accept();
    if (!c) {
        co_return c.error();
    }
    accepted.store(true);
    std::array<std::byte, 4096> buf{};
    for (;;) {
        auto n = co_await c->read_some(buf);
        if (!n) {
            co_return weft::result<void>{};
        }
        auto w = co_await c->write_all(std::span<const std::byte>(buf.data(), *n));
        if (!w) {
            co_return w.error();
        }
    }
}

/// The fixture: what the process holds before a test (descriptors, live coroutine frames) it
/// holds again after it, once the test's runtime is gone; io_wait_test adds the IO layer's
/// counts (operations in flight, multishot operations armed, accepted connections no task took,
/// blocking file calls).
class faults : public weft::test::io_wait_test {
protected:
    void SetUp() override {
        io_wait_test::SetUp();
        fds_before_ = open_fds();
        frames_before_ = weft::live_frames();
    }
    void TearDown() override {
        io_wait_test::TearDown();
        // At most as many: a leak is a descriptor more. The count is the whole process's, and
        // one opened around SetUp by something else (an ASan run showed 11 before, 9 after)
        // may be gone by now.
        EXPECT_LE(open_fds(), fds_before_) << "descriptors leaked";
        EXPECT_EQ(weft::live_frames(), frames_before_) << "task frames leaked";
    }

private:
    int fds_before_ = 0;
    std::int64_t frames_before_ = 0;
};

// WEFT_TEST_UBSAN: set by tests/CMakeLists.txt when WEFT_SANITIZE includes `undefined` (and
// with it the vptr check).
auto ubsan_vptr_check_linked() -> bool {
#if defined(WEFT_TEST_UBSAN)
    return true;
#else
    return false;
#endif
}

/// Lowers RLIMIT_NOFILE and takes every descriptor left under it; gives them back (and the
/// limit) on release() or destruction.
class descriptor_hog {
public:
    descriptor_hog() {
        ::getrlimit(RLIMIT_NOFILE, &saved_);
        rlimit low = saved_;
        low.rlim_cur = static_cast<rlim_t>(open_fds() + 64);
        ::setrlimit(RLIMIT_NOFILE, &low);
        top_up();
    }
    /// Takes any descriptor that became free since (another thread closed one).
    void top_up() {
        for (;;) {
            const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
            if (fd < 0) {
                errno_ = errno;
                break;
            }
            held_.push_back(fd);
        }
    }
    descriptor_hog(const descriptor_hog&) = delete;
    auto operator=(const descriptor_hog&) -> descriptor_hog& = delete;
    ~descriptor_hog() { release(); }
    void release() {
        for (const int fd : held_) {
            ::close(fd);
        }
        held_.clear();
        ::setrlimit(RLIMIT_NOFILE, &saved_);
    }
    [[nodiscard]] auto stopped_by() const -> int { return errno_; }
    [[nodiscard]] auto held() const -> std::size_t { return held_.size(); }

private:
    rlimit saved_{};
    std::vector<int> held_;
    int errno_ = 0;
};

TEST_P(faults, descriptor_exhaustion_is_a_value_and_the_server_recovers) {
    if (ubsan_vptr_check_linked()) {
        GTEST_SKIP() << "UBSan's vptr check opens a pipe to inspect each dynamic type it meets "
                        "first; with no descriptor left it reports them all as invalid";
    }
    weft::runtime rt{options()};
    const std::string path = "/proc/self/status";
    rt.block_on([&]() -> weft::task<void> {
        auto l = weft::tcp_listener::bind(loopback()).value();
        const auto addr = l.local_address().value();
        std::atomic<bool> accepted{false};
        // A client socket made while descriptors remain: connecting it takes no new one.
        const int client_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        EXPECT_GE(client_fd, 0);
        descriptor_hog hog;
        EXPECT_EQ(hog.stopped_by(), EMFILE);
        EXPECT_GT(hog.held(), 0U);
        // NOTE: the accept starts after the limit was lowered. io_uring reads RLIMIT_NOFILE when
        // it prepares an accept, so a multishot accept armed before would go on taking
        // descriptors above the new limit (observed), and there would be no exhaustion to see.
        // The accept waits: in IO (io_uring: for a connection), or backing off at once (epoll:
        // accept4 takes the new descriptor before it looks for a connection).
        const int backoffs_at_start = weft::detail::accept_backoffs_for_test.load();
        auto server = weft::spawn(echo_one(l, accepted));
        co_await until([&] {
            return io_waits() >= 1 || server.done() ||
                   weft::detail::accept_backoffs_for_test.load() > backoffs_at_start;
        });
        if (server.done()) {
            auto early = co_await std::move(server);
            ADD_FAILURE() << "accept ended early: " << early.error().message();
            co_return;
        }

        // What needs a descriptor fails as a value. The codes are compared once descriptors
        // are back: comparing calls error_category's virtual functions, and UBSan's vptr check
        // needs a pipe to look at the object (it reports any object invalid without one).
        auto c = co_await weft::tcp_stream::connect(addr);
        EXPECT_FALSE(c.has_value());
        const std::error_code connect_error = c ? std::error_code{} : c.error();
        auto f = co_await weft::file::open(path, weft::open_mode::read);
        EXPECT_FALSE(f.has_value());
        const std::error_code open_error = f ? std::error_code{} : f.error();

        // A connection arrives while the server cannot take it: accept backs off again (no
        // error, no busy loop) and the connection waits in the backlog.
        hog.top_up();
        const int backoffs = weft::detail::accept_backoffs_for_test.load();
        EXPECT_EQ(::connect(client_fd, addr.data(), addr.size()), 0) << std::strerror(errno);
        // (A descriptor freed meanwhile by another thread would let the accept through: then
        // the server holds a connection and waits in IO instead; that fails here, not hangs.)
        co_await until([&] {
            return weft::detail::accept_backoffs_for_test.load() > backoffs || accepted.load();
        });
        EXPECT_GT(weft::detail::accept_backoffs_for_test.load(), backoffs);
        EXPECT_FALSE(accepted.load());

        // Descriptors come back: the server takes the waiting connection and serves it, and
        // what failed before works.
        hog.release();
        EXPECT_EQ(connect_error, std::errc::too_many_files_open) << connect_error.message();
        EXPECT_EQ(open_error, std::errc::too_many_files_open) << open_error.message();
        weft::tcp_stream client(client_fd);
        const auto msg = random_payload(100000, 1);
        auto w = co_await client.write_all(msg);
        EXPECT_TRUE(w.has_value());
        std::vector<std::byte> back(msg.size());
        auto r = co_await client.read_exact(back);
        EXPECT_TRUE(r.has_value());
        EXPECT_TRUE(back == msg);
        client.close();
        auto served = co_await std::move(server);
        EXPECT_TRUE(served.has_value());

        auto c2 = co_await weft::tcp_stream::connect(addr);
        EXPECT_TRUE(c2.has_value());  // the listener's backlog takes it; nobody accepts
        auto f2 = co_await weft::file::open(path, weft::open_mode::read);
        EXPECT_TRUE(f2.has_value());
    }());
}

TEST_P(faults, peer_reset_in_the_middle_of_a_write_is_a_value_not_sigpipe) {
    // SIGPIPE at its default disposition: a send that raised it would kill this process.
    struct sigaction old {};
    ASSERT_EQ(::sigaction(SIGPIPE, nullptr, &old), 0);
    ASSERT_EQ(old.sa_handler, SIG_DFL);

    weft::runtime rt{options()};
    const auto big = random_payload(64 << 20, 2);  // far more than two socket buffers hold
    std::size_t received = 0;
    auto err = rt.block_on([&]() -> weft::task<std::error_code> {
        auto l = weft::tcp_listener::bind(loopback()).value();
        auto server = weft::spawn([&]() -> weft::task<std::error_code> {
            auto c = co_await l.accept();
            if (!c) {
                co_return c.error();
            }
            auto w = co_await c->write_all(big);
            if (w) {
                co_return std::error_code{};
            }
            co_return w.error();
        });
        auto c = (co_await weft::tcp_stream::connect(l.local_address().value())).value();
        std::vector<std::byte> first(4096);
        (co_await c.read_exact(first)).value();  // the write is under way
        received = first.size();
        EXPECT_TRUE(std::equal(first.begin(), first.end(), big.begin()));
        // SO_LINGER 0: close sends RST, dropping what is in flight.
        const linger lg{1, 0};
        EXPECT_EQ(::setsockopt(c.native_handle(), SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
        c.close();
        co_return co_await std::move(server);
    }());
    EXPECT_TRUE(err == std::errc::connection_reset || err == std::errc::broken_pipe)
        << err.message();
    EXPECT_GT(received, 0U);
    sigset_t pending;
    sigemptyset(&pending);
    ::sigpending(&pending);
    EXPECT_EQ(sigismember(&pending, SIGPIPE), 0);
}

TEST_P(faults, half_closing_peer_reads_eof_and_can_still_be_answered) {
    weft::runtime rt{options()};
    const auto request = random_payload(300000, 3);
    const auto reply = random_payload(1 << 20, 4);
    std::vector<std::byte> server_got;
    auto got = rt.block_on([&]() -> weft::task<std::vector<std::byte>> {
        auto l = weft::tcp_listener::bind(loopback()).value();
        auto server = weft::spawn([&]() -> weft::task<void> {
            auto c = (co_await l.accept()).value();
            // receive(): on io_uring the multishot receive and its provided buffers, which must
            // all go back when the stream ends.
            for (;;) {
                auto b = co_await c.receive();
                if (!b) {
                    EXPECT_EQ(b.error(), weft::io_errc::eof) << b.error().message();
                    break;
                }
                server_got.insert(server_got.end(), b->data(), b->data() + b->size());
            }
            auto w = co_await c.write_all(reply);  // the peer's read side is still open
            EXPECT_TRUE(w.has_value());
        });
        auto c = (co_await weft::tcp_stream::connect(l.local_address().value())).value();
        (co_await c.write_all(request)).value();
        EXPECT_EQ(::shutdown(c.native_handle(), SHUT_WR), 0);
        auto back = co_await read_to_end(c);
        co_await std::move(server);
        co_return back.value();
    }());
    EXPECT_TRUE(server_got == request);
    EXPECT_TRUE(got == reply);
}

// The client below never reads: the server's write fills both socket buffers and waits. Ended
// from outside (a deadline, a stop), the write reports it as a value; the client then reads a
// byte-exact prefix of the payload and eof once the server closes.
auto never_read_client_sees(weft::tcp_stream& c, const std::vector<std::byte>& big)
    -> weft::task<void> {
    auto rest = co_await read_to_end(c);
    EXPECT_TRUE(rest.has_value());
    if (rest) {
        EXPECT_GT(rest->size(), 0U);
        EXPECT_LT(rest->size(), big.size());
        EXPECT_TRUE(std::equal(rest->begin(), rest->end(), big.begin()));
    }
}

TEST_P(faults, write_to_a_peer_that_never_reads_ends_at_its_deadline) {
    weft::runtime rt{options()};
    const auto big = random_payload(64 << 20, 5);
    rt.block_on([&]() -> weft::task<void> {
        auto l = weft::tcp_listener::bind(loopback()).value();
        auto c = (co_await weft::tcp_stream::connect(l.local_address().value())).value();
        auto s = (co_await l.accept()).value();
        auto w = co_await weft::with_timeout(100ms, s.write_all(big));
        EXPECT_FALSE(w.has_value());
        if (!w) {
            EXPECT_EQ(w.error(), std::errc::timed_out) << w.error().message();
        }
        s.close();
        co_await never_read_client_sees(c, big);
    }());
}

TEST_P(faults, write_to_a_peer_that_never_reads_ends_when_stopped) {
    weft::runtime rt{options()};
    const auto big = random_payload(64 << 20, 6);
    rt.block_on([&]() -> weft::task<void> {
        auto l = weft::tcp_listener::bind(loopback()).value();
        auto c = (co_await weft::tcp_stream::connect(l.local_address().value())).value();
        auto s = (co_await l.accept()).value();
        std::error_code ended;
        co_await weft::with_scope([&](weft::scope& sc) -> weft::task<void> {
            sc.spawn([&]() -> weft::task<void> {
                auto w = co_await s.write_all(big);
                ended = w ? std::error_code{} : w.error();
            });
            co_await until([] { return io_waits() >= 1; });  // the write waits for room
            sc.request_stop();
            co_return;
        });
        EXPECT_EQ(ended, std::errc::operation_canceled) << ended.message();
        s.close();
        co_await never_read_client_sees(c, big);
    }());
}

TEST_P(faults, connect_into_a_black_hole_times_out) {
    // A listener with backlog 0 holds one connection in its accept queue; while it is full the
    // kernel drops every further SYN, as a filtering firewall would: connect hears nothing.
    const int hole = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(hole, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(hole, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
    ASSERT_EQ(::listen(hole, 0), 0);
    socklen_t len = sizeof sa;
    ASSERT_EQ(::getsockname(hole, reinterpret_cast<sockaddr*>(&sa), &len), 0);
    const auto addr = weft::socket_address::from(reinterpret_cast<sockaddr*>(&sa), len);
    const int filler = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_EQ(::connect(filler, reinterpret_cast<sockaddr*>(&sa), len), 0);
    // For a listening socket, TCP_INFO's tcpi_unacked is the accept queue's length.
    for (;;) {
        tcp_info info{};
        socklen_t il = sizeof info;
        ASSERT_EQ(::getsockopt(hole, IPPROTO_TCP, TCP_INFO, &info, &il), 0);
        if (info.tcpi_unacked >= 1) {
            break;
        }
        ::sched_yield();
    }
    {
        weft::runtime rt{options()};
        rt.block_on([&]() -> weft::task<void> {
            // Several at once, so that cancelling one in flight does not disturb the others.
            auto a = weft::spawn(weft::tcp_stream::connect(addr, 150ms));
            auto b = weft::spawn(weft::tcp_stream::connect(addr, 200ms));
            auto r = co_await weft::tcp_stream::connect(addr, 100ms);
            auto ra = co_await std::move(a);
            auto rb = co_await std::move(b);
            const std::array results{&r, &ra, &rb};
            for (auto* x : results) {
                EXPECT_FALSE(x->has_value());
                if (!x->has_value()) {
                    EXPECT_EQ(x->error(), std::errc::timed_out) << x->error().message();
                }
            }
        }());
    }
    ::close(filler);
    ::close(hole);
}

/// A tmpfs of `size` mounted on a fresh directory, unmounted and removed on destruction.
class small_tmpfs {
public:
    explicit small_tmpfs(const char* size) {
        std::string tmpl = (std::filesystem::temp_directory_path() / "weft-faults-XXXXXX").string();
        if (::mkdtemp(tmpl.data()) == nullptr) {
            error_ = std::string("mkdtemp: ") + std::strerror(errno);
            return;
        }
        dir_ = tmpl;
        const std::string opts = std::string("size=") + size + ",mode=0700";
        if (::mount("tmpfs", dir_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) != 0) {
            error_ = std::string("mount tmpfs: ") + std::strerror(errno);
            return;
        }
        mounted_ = true;
    }
    small_tmpfs(const small_tmpfs&) = delete;
    auto operator=(const small_tmpfs&) -> small_tmpfs& = delete;
    ~small_tmpfs() {
        if (mounted_) {
            ::umount2(dir_.c_str(), MNT_DETACH);
        }
        if (!dir_.empty()) {
            ::rmdir(dir_.c_str());
        }
    }
    [[nodiscard]] auto mounted() const -> bool { return mounted_; }
    [[nodiscard]] auto error() const -> const std::string& { return error_; }
    [[nodiscard]] auto dir() const -> const std::string& { return dir_; }

private:
    std::string dir_;
    std::string error_;
    bool mounted_ = false;
};

TEST_P(faults, write_to_a_full_file_system_is_enospc_and_space_freed_is_usable_again) {
    small_tmpfs fs("1m");
    if (!fs.mounted()) {
        GTEST_SKIP() << fs.error() << " (needs root / CAP_SYS_ADMIN)";
    }
    weft::runtime rt{options()};
    const std::string big_path = fs.dir() + "/big";
    const std::string small_path = fs.dir() + "/small";
    rt.block_on([&]() -> weft::task<void> {
        using weft::open_mode;
        const auto data = random_payload(2 << 20, 7);
        auto f =
            (co_await weft::file::open(big_path, open_mode::write | open_mode::create)).value();
        auto w = co_await f.write_all(data, 0);
        EXPECT_FALSE(w.has_value());
        if (!w) {
            EXPECT_EQ(w.error(), std::errc::no_space_on_device) << w.error().message();
            EXPECT_NE(w.error().message().find(big_path), std::string::npos) << w.error().message();
        }
        auto st = (co_await f.stat()).value();
        EXPECT_GT(st.size, 0U);
        EXPECT_LT(st.size, data.size());

        // Another file on the same (full) file system: creating it works, writing does not.
        auto g =
            (co_await weft::file::open(small_path, open_mode::write | open_mode::create)).value();
        const auto one = random_payload(4096, 8);
        auto wg = co_await g.write_all(one, 0);
        EXPECT_FALSE(wg.has_value());
        if (!wg) {
            EXPECT_EQ(wg.error(), std::errc::no_space_on_device) << wg.error().message();
        }

        // Space freed: the same handle writes again and reads back what it wrote.
        EXPECT_TRUE(f.close().has_value());
        std::filesystem::remove(big_path);
        auto wg2 = co_await g.write_all(one, 0);
        EXPECT_TRUE(wg2.has_value());
        EXPECT_TRUE(g.close().has_value());
        auto r = (co_await weft::file::open(small_path, open_mode::read)).value();
        std::vector<std::byte> back(one.size());
        auto n = co_await r.read_all(back, 0);
        EXPECT_EQ(n.value(), one.size());
        EXPECT_TRUE(back == one);
    }());
}

WEFT_TEST_ON_BOTH_BACKENDS(faults);

}  // namespace
