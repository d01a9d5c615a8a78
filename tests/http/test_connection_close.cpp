// The last response of a connection, as it leaves on the wire. When the client asked for the
// close (HTTP/1.0 without keep-alive, or Connection: close) and sent nothing past the request,
// the response and the server's FIN leave as one TCP segment; when the server closes with more
// of the client's bytes behind the request, the response leaves at once and the FIN after it.
// The segments are seen by a packet socket on the loopback interface (CAP_NET_RAW: the cases
// report skipped without it), filtered to the test server's port. On both backends and in both
// runtime modes; counts of segments and flags only, never times.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "weft/core/scope.hpp"
#include "weft/http.hpp"
#include "weft/io/error.hpp"
#include "weft/io/reactor.hpp"
#include "weft/io/tcp_listener.hpp"
#include "weft/sched/runtime.hpp"

namespace weft::http::test {
namespace {

using namespace std::string_view_literals;

using mode = std::tuple<io_backend, bool>;  // backend, stealing

constexpr std::uint8_t tcp_fin = 0x01;
constexpr std::uint8_t tcp_rst = 0x04;

/// One TCP segment seen on lo.
struct segment {
    std::uint16_t from_port = 0;
    std::uint16_t to_port = 0;
    std::uint8_t flags = 0;
    std::size_t payload = 0;
};

/// The IPv4 TCP segments on the loopback interface with `port` at either end, captured from
/// open() on, each once: a packet socket bound to ETH_P_IP sees a segment as lo receives it (a
/// copy as sent goes only to ETH_P_ALL sockets). Single-threaded.
class loopback_capture {
public:
    /// nullopt when packet sockets are not permitted here (no CAP_NET_RAW).
    static auto open(std::uint16_t port) -> std::optional<loopback_capture> {
        const int fd =
            ::socket(AF_PACKET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_IP));
        if (fd < 0) {
            return std::nullopt;
        }
        loopback_capture c{fd, port};
        // In the kernel, before the segments are queued: IPv4 TCP with `port` at either end
        // (offsets from the IP header, which has no options on lo). Other traffic on lo is
        // dropped there, so a busy machine cannot fill the socket's buffer with it.
        std::array<sock_filter, 8> code{{
            BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 9),  // protocol
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_TCP, 0, 5),
            BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 20),  // source port
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, port, 2, 0),
            BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 22),  // destination port
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, port, 0, 1),
            BPF_STMT(BPF_RET | BPF_K, 0x40000),
            BPF_STMT(BPF_RET | BPF_K, 0),
        }};
        sock_fprog prog{static_cast<unsigned short>(code.size()), code.data()};
        const int rcvbuf = 4 << 20;
        sockaddr_ll at{};
        at.sll_family = AF_PACKET;
        at.sll_protocol = htons(ETH_P_IP);
        at.sll_ifindex = static_cast<int>(::if_nametoindex("lo"));
        if (::setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) != 0 ||
            ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf) != 0 ||
            at.sll_ifindex == 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0) {
            return std::nullopt;
        }
        (void)c.take();  // what came between socket() and the filter
        return c;
    }

    loopback_capture(loopback_capture&& o) noexcept
        : fd_(std::exchange(o.fd_, -1)), port_(o.port_) {}
    loopback_capture(const loopback_capture&) = delete;
    auto operator=(const loopback_capture&) -> loopback_capture& = delete;
    auto operator=(loopback_capture&&) -> loopback_capture& = delete;
    ~loopback_capture() {
        if (fd_ >= 0) {
            ::close(fd_);
        }
    }

    /// The segments captured since the last call.
    auto take() -> std::vector<segment> {
        std::vector<segment> out;
        std::array<std::uint8_t, 256> b{};  // headers only: MSG_TRUNC gives the real length
        for (;;) {
            sockaddr_ll from{};
            socklen_t len = sizeof from;
            const ssize_t n = ::recvfrom(fd_, b.data(), b.size(), MSG_TRUNC,
                                         reinterpret_cast<sockaddr*>(&from), &len);
            if (n < 0) {
                EXPECT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK) << errno;
                return out;
            }
            if (n < 40 || b[9] != IPPROTO_TCP) {
                continue;
            }
            const std::size_t ip_len = (b[0] & 0x0fU) * 4U;
            const std::size_t total = (std::size_t{b[2]} << 8U) | b[3];
            const std::uint8_t* t = b.data() + ip_len;
            const std::size_t tcp_len = (t[12] >> 4U) * 4U;
            segment s;
            s.from_port = static_cast<std::uint16_t>((t[0] << 8U) | t[1]);
            s.to_port = static_cast<std::uint16_t>((t[2] << 8U) | t[3]);
            s.flags = t[13];
            s.payload = total - ip_len - tcp_len;
            if (s.from_port == port_ || s.to_port == port_) {
                out.push_back(s);
            }
        }
    }

private:
    loopback_capture(int fd, std::uint16_t port) : fd_(fd), port_(port) {}
    int fd_;
    std::uint16_t port_;
};

auto hello_routes(server& srv) -> void {
    srv.route(method::get, "/",
              [](request&) -> task<response> { co_return response::text("Hello, World!"); });
}

/// What arrived on the client's connection and what the server sent on it.
struct exchanged {
    std::string bytes;          // what the client read until the server closed
    std::vector<segment> sent;  // the server's segments, in order
    int resets = 0;             // RST segments either way
};

/// The server's segments that carry data, and how many of those carry the FIN too.
auto data_segments(const std::vector<segment>& sent) -> std::pair<int, int> {
    int data = 0;
    int with_fin = 0;
    for (const segment& s : sent) {
        data += s.payload > 0 ? 1 : 0;
        with_fin += s.payload > 0 && (s.flags & tcp_fin) != 0 ? 1 : 0;
    }
    return {data, with_fin};
}

auto fins(const std::vector<segment>& sent) -> int {
    int n = 0;
    for (const segment& s : sent) {
        n += (s.flags & tcp_fin) != 0 ? 1 : 0;
    }
    return n;
}

auto count(std::string_view s, std::string_view what) -> int {
    int n = 0;
    for (std::size_t at = s.find(what); at != std::string_view::npos; at = s.find(what, at + 1)) {
        ++n;
    }
    return n;
}

class connection_close : public ::testing::TestWithParam<mode> {
protected:
    void SetUp() override {
        try {
            (void)resolve_io_backend(std::get<0>(GetParam()));
        } catch (const std::system_error&) {
            GTEST_SKIP() << "io_uring unavailable here";
        }
    }

    // On a new connection: `keep_alive_first` keep-alive GETs, each answered before the next,
    // then `requests` in one write, read until the server closes. nullopt: no packet socket.
    auto exchange(std::string requests, int keep_alive_first = 0) -> std::optional<exchanged> {
        auto ro = io_runtime_options(2, std::get<0>(GetParam()));
        ro.stealing = std::get<1>(GetParam());
        runtime rt{ro};
        std::optional<exchanged> out;
        rt.block_on([&]() -> task<void> {
            server srv;
            hello_routes(srv);
            auto l = tcp_listener::bind(socket_address::parse("127.0.0.1", 0).value()).value();
            const auto addr = l.local_address().value();
            auto cap = loopback_capture::open(addr.port());
            if (!cap) {
                co_return;
            }
            co_await with_scope([&](scope& s) -> task<void> {
                s.spawn(srv.serve(l));
                auto c = (co_await client::connect(addr)).value();
                for (int i = 0; i < keep_alive_first; ++i) {
                    auto r = (co_await c.get("/")).value();
                    EXPECT_EQ(r.status, 200);
                    EXPECT_TRUE(r.keep_alive);
                }
                auto sent = co_await c.send_raw(requests);
                EXPECT_TRUE(sent.has_value());
                auto rest = co_await c.read_until_close();
                EXPECT_TRUE(rest.has_value()) << rest.error().message();
                exchanged e;
                if (rest) {
                    e.bytes = std::move(*rest);
                }
                for (const segment& g : cap->take()) {
                    e.resets += (g.flags & tcp_rst) != 0 ? 1 : 0;
                    if (g.from_port == addr.port()) {
                        e.sent.push_back(g);
                    }
                }
                out = std::move(e);
                co_await srv.shutdown();
            });
        }());
        return out;
    }
};

constexpr std::string_view no_capture = "no packet socket on lo here (needs CAP_NET_RAW)";

// ab's shape: HTTP/1.0, one request, the server closes. One segment carries the response and
// the FIN (without MSG_MORE on the response it leaves alone and a FIN-only segment follows).
TEST_P(connection_close, http10_response_and_fin_leave_in_one_segment) {
    auto e = exchange("GET / HTTP/1.0\r\nHost: a\r\n\r\n");
    if (!e) {
        GTEST_SKIP() << no_capture;
    }
    EXPECT_TRUE(e->bytes.starts_with("HTTP/1.1 200 OK\r\n")) << e->bytes;
    EXPECT_TRUE(e->bytes.ends_with("\r\n\r\nHello, World!")) << e->bytes;
    EXPECT_EQ(count(e->bytes, "HTTP/1.1 "), 1);
    const auto [data, with_fin] = data_segments(e->sent);
    EXPECT_EQ(data, 1);
    EXPECT_EQ(with_fin, 1);
    EXPECT_EQ(fins(e->sent), 1);
    EXPECT_EQ(e->resets, 0);
}

// A keep-alive connection (on io_uring its multishot receive is armed by then, and cancelled
// at the close) whose third request says Connection: close: the first two responses leave
// without a FIN, the third with it.
TEST_P(connection_close, connection_close_after_keep_alive_sends_its_fin_with_the_response) {
    auto e = exchange("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 2);
    if (!e) {
        GTEST_SKIP() << no_capture;
    }
    EXPECT_TRUE(e->bytes.starts_with("HTTP/1.1 200 OK\r\n")) << e->bytes;
    EXPECT_NE(e->bytes.find("\r\nConnection: close\r\n"), std::string::npos) << e->bytes;
    EXPECT_TRUE(e->bytes.ends_with("\r\n\r\nHello, World!")) << e->bytes;
    const auto [data, with_fin] = data_segments(e->sent);
    EXPECT_EQ(data, 3);
    EXPECT_EQ(with_fin, 1);
    ASSERT_FALSE(e->sent.empty());
    EXPECT_NE(e->sent.back().flags & tcp_fin, 0);
    EXPECT_GT(e->sent.back().payload, 0U);
    EXPECT_EQ(fins(e->sent), 1);
    EXPECT_EQ(e->resets, 0);
}

// The client sent another request behind its Connection: close (in the same write, so it is
// in the server's buffer, not left unread in the socket). The server answers the first only
// and does not hold that response for the FIN: bytes behind a close request mean the client
// may still be sending, and a close over unread bytes resets, which would discard a held
// response. So the response leaves at once and the FIN after it, and nothing is reset.
TEST_P(connection_close, bytes_behind_a_close_request_send_the_response_at_once) {
    auto e = exchange(
        "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
        "GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    if (!e) {
        GTEST_SKIP() << no_capture;
    }
    EXPECT_EQ(count(e->bytes, "HTTP/1.1 200 OK\r\n"), 1) << e->bytes;
    EXPECT_TRUE(e->bytes.ends_with("\r\n\r\nHello, World!")) << e->bytes;
    const auto [data, with_fin] = data_segments(e->sent);
    EXPECT_EQ(data, 1);
    EXPECT_EQ(with_fin, 0);
    EXPECT_EQ(fins(e->sent), 1);
    EXPECT_EQ(e->resets, 0);
}

INSTANTIATE_TEST_SUITE_P(modes,
                         connection_close,
                         ::testing::Combine(::testing::Values(io_backend::io_uring,
                                                              io_backend::epoll),
                                            ::testing::Bool()),
                         [](const auto& info) {
                             return std::string(to_string(std::get<0>(info.param))) +
                                    (std::get<1>(info.param) ? "_stealing" : "_per_core");
                         });

}  // namespace
}  // namespace weft::http::test
