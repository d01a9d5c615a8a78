// WebSocket (RFC 6455) against hostile peers: frames crafted byte by byte by a raw client, so
// every refusal is seen on the wire as the close code the server sends. Each case runs on both
// backends. The send, idle and close timeouts run on weft::testing's simulated network and test
// clock, so they take no wall time; the tests assert what was closed and with which code, never
// when.

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <zlib.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "backend_test.hpp"
#include "tls/cert_factory.hpp"
#include "weft/core/scope.hpp"
#include "weft/http/server.hpp"
#include "weft/http/websocket.hpp"
#include "weft/io/tcp_listener.hpp"
#include "weft/io/tcp_stream.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"
#include "weft/sync/event.hpp"
#include "weft/testing/sim_network.hpp"
#include "weft/testing/test_clock.hpp"

namespace weft::http::test {
namespace {

using namespace std::chrono_literals;
using namespace std::string_view_literals;

constexpr std::uint64_t frame_limit = 1024;
constexpr std::uint64_t message_limit = 4096;

// Short timeouts over TCP; on the test clock (`test_clock`) seconds, which take no wall time
// there (all below the 20 s raw_peer::ended waits).
auto ws_options(bool test_clock = false) -> websocket_options {
    websocket_options o;
    o.max_frame = frame_limit;
    o.max_message = message_limit;
    o.ping_interval = test_clock ? std::chrono::milliseconds{2s} : 50ms;
    o.idle_timeout = test_clock ? std::chrono::milliseconds{10s} : 300ms;
    o.send_timeout = test_clock ? std::chrono::milliseconds{5s} : 200ms;
    o.close_timeout = test_clock ? std::chrono::milliseconds{5s} : 200ms;
    o.subprotocols = {"chat.v2", "chat.v1"};
    return o;
}

// permessage-deflate accepted; `takeover`: context takeover both ways.
auto deflate_options(bool takeover) -> websocket_options {
    websocket_options o = ws_options();
    o.deflate.enabled = true;
    o.deflate.send_context_takeover = takeover;
    o.deflate.receive_context_takeover = takeover;
    return o;
}

// A peer that never reads is also silent: only the send timeout may end it here.
auto flood_options(bool test_clock = false) -> websocket_options {
    websocket_options o = ws_options(test_clock);
    o.ping_interval = 0ms;
    o.idle_timeout = 1h;
    return o;
}

auto as_bytes(std::string_view s) -> std::span<const std::byte> {
    return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

/// A frame as a client sends it (masked unless told otherwise), built here independently of
/// the server's code.
auto frame(std::uint8_t opcode,
           std::string_view payload,
           bool fin = true,
           bool masked = true,
           std::uint8_t rsv = 0) -> std::string {
    std::string f;
    f.push_back(static_cast<char>((fin ? 0x80 : 0) | (rsv << 4) | opcode));
    const char m = masked ? static_cast<char>(0x80) : 0;
    if (payload.size() < 126) {
        f.push_back(static_cast<char>(m | static_cast<char>(payload.size())));
    } else if (payload.size() <= 0xFFFF) {
        f.push_back(static_cast<char>(m | 126));
        f.push_back(static_cast<char>(payload.size() >> 8));
        f.push_back(static_cast<char>(payload.size() & 0xFF));
    } else {
        f.push_back(static_cast<char>(m | 127));
        for (int i = 7; i >= 0; --i) {
            f.push_back(static_cast<char>((payload.size() >> (8 * i)) & 0xFF));
        }
    }
    const std::uint8_t key[4] = {0x12, 0x34, 0x56, 0x78};
    if (masked) {
        f.append(reinterpret_cast<const char*>(key), 4);
    }
    for (std::size_t i = 0; i < payload.size(); ++i) {
        f.push_back(masked ? static_cast<char>(payload[i] ^ static_cast<char>(key[i % 4]))
                           : payload[i]);
    }
    return f;
}

/// A permessage-deflate payload (RFC 7692 7.2.1) made by zlib here, independently of the
/// server's code: the raw deflate stream of `s` flushed with Z_SYNC_FLUSH, its 0x00 0x00 0xff
/// 0xff tail removed. `stream`: a deflate stream kept between messages (context takeover).
auto deflate_payload(std::string_view s, z_stream* stream = nullptr) -> std::string {
    z_stream own{};
    z_stream* z = stream;
    if (z == nullptr) {
        z = &own;
        EXPECT_EQ(deflateInit2(z, 9, Z_DEFLATED, -15, 9, Z_DEFAULT_STRATEGY), Z_OK);
    }
    std::string out(s.size() + 64, '\0');
    z->next_in = reinterpret_cast<Bytef*>(const_cast<char*>(s.data()));
    z->avail_in = static_cast<uInt>(s.size());
    z->next_out = reinterpret_cast<Bytef*>(out.data());
    z->avail_out = static_cast<uInt>(out.size());
    EXPECT_EQ(deflate(z, Z_SYNC_FLUSH), Z_OK);
    out.resize(out.size() - z->avail_out);
    EXPECT_TRUE(out.ends_with(std::string_view{"\x00\x00\xff\xff", 4}));
    out.resize(out.size() - 4);
    if (z == &own) {
        (void)deflateEnd(z);
    }
    return out;
}

/// The message of a permessage-deflate payload: the tail appended, raw inflate. `stream`: an
/// inflate stream kept between messages (the peer's context takeover).
auto inflate_payload(std::string_view p, z_stream* stream = nullptr) -> std::string {
    z_stream own{};
    z_stream* z = stream;
    if (z == nullptr) {
        z = &own;
        EXPECT_EQ(inflateInit2(z, -15), Z_OK);
    }
    std::string in{p};
    in.append("\x00\x00\xff\xff", 4);
    std::string out(1 << 20, '\0');
    z->next_in = reinterpret_cast<Bytef*>(in.data());
    z->avail_in = static_cast<uInt>(in.size());
    z->next_out = reinterpret_cast<Bytef*>(out.data());
    z->avail_out = static_cast<uInt>(out.size());
    const int rc = inflate(z, Z_SYNC_FLUSH);
    EXPECT_TRUE(rc == Z_OK || rc == Z_BUF_ERROR) << rc;
    out.resize(out.size() - z->avail_out);
    if (z == &own) {
        (void)inflateEnd(z);
    }
    return out;
}

/// A frame as the raw client read it.
struct read_frame {
    std::uint8_t opcode = 0;
    std::uint8_t rsv = 0;
    bool fin = false;
    std::string payload;
    [[nodiscard]] auto code() const -> std::uint16_t {
        return payload.size() >= 2
                   ? static_cast<std::uint16_t>((static_cast<std::uint8_t>(payload[0]) << 8) |
                                                static_cast<std::uint8_t>(payload[1]))
                   : 0;
    }
};

/// A client that speaks WebSocket by hand: the handshake, then whatever bytes the test sends.
class raw_peer {
public:
    /// `fields`: more header lines, each ending in CRLF.
    static auto open(socket_address addr,
                     std::string_view path = "/echo",
                     std::string_view fields = {}) -> task<raw_peer> {
        co_return co_await handshake(raw_peer{(co_await tcp_stream::connect(addr)).value()}, path,
                                     fields);
    }
    /// Over `net` (weft::testing), from host "client" to the server on host "server", port 80.
    static auto open(testing::sim_network& net,
                     std::string_view path = "/echo",
                     std::string_view fields = {}) -> task<raw_peer> {
        co_return co_await handshake(
            raw_peer{(co_await net.connect("client", "server", 80)).value()}, path, fields);
    }

    [[nodiscard]] auto head() const -> const std::string& { return head_; }

    auto send(std::string bytes) -> task<bool> {
        auto r = co_await write_all(as_bytes(bytes));
        co_return r.has_value();
    }
    /// Sends `bytes` one byte per write, each a receive of its own on the server.
    auto send_bytewise(std::string bytes) -> task<bool> {
        for (std::size_t i = 0; i < bytes.size(); ++i) {
            auto r = co_await write_all(as_bytes(std::string_view{bytes}.substr(i, 1)));
            if (!r) {
                co_return false;
            }
            (void)co_await sleep_for(1ms);
        }
        co_return true;
    }

    /// The next frame from the server (its keepalive pings passed over unless `pings`);
    /// nullopt once the connection ended.
    auto next(bool pings = false) -> task<std::optional<read_frame>> {
        for (;;) {
            if (buf_.size() >= 2) {
                const auto b1 = static_cast<std::uint8_t>(buf_[1]);
                std::size_t len = b1 & 0x7F;
                std::size_t at = 2;
                if (len == 126 && buf_.size() >= 4) {
                    len = (static_cast<std::uint8_t>(buf_[2]) << 8) |
                          static_cast<std::uint8_t>(buf_[3]);
                    at = 4;
                } else if (len == 127 && buf_.size() >= 10) {
                    len = 0;
                    for (int i = 0; i < 8; ++i) {
                        len = (len << 8) | static_cast<std::uint8_t>(buf_[2 + i]);
                    }
                    at = 10;
                }
                EXPECT_EQ(b1 & 0x80, 0) << "a server frame must not be masked";
                if ((b1 & 0x7F) < 126 || at > 2) {
                    if (buf_.size() >= at + len) {
                        read_frame f;
                        f.opcode = static_cast<std::uint8_t>(buf_[0]) & 0x0F;
                        f.rsv = (static_cast<std::uint8_t>(buf_[0]) >> 4) & 0x7;
                        f.fin = (static_cast<std::uint8_t>(buf_[0]) & 0x80) != 0;
                        f.payload = buf_.substr(at, len);
                        buf_.erase(0, at + len);
                        if (f.opcode == 0x9 && !pings) {
                            continue;
                        }
                        co_return f;
                    }
                }
            }
            if (!co_await fill()) {
                co_return std::nullopt;
            }
        }
    }

    /// Reads frames until a close: its code (0 when the connection ended without one).
    auto close_code() -> task<std::uint16_t> {
        for (;;) {
            auto f = co_await next();
            if (!f) {
                co_return 0;
            }
            if (f->opcode == 0x8) {
                co_return f->code();
            }
        }
    }

    /// True once the server has closed the connection (after any frames still unread).
    auto ended() -> task<bool> {
        for (;;) {
            auto f = co_await with_timeout(20s, next());
            if (!f) {
                co_return false;  // still open after far longer than any timeout here
            }
            if (!*f) {
                co_return true;
            }
        }
    }

    auto stream() -> tcp_stream& { return s_; }

private:
    explicit raw_peer(tcp_stream s) : s_(std::move(s)) {}
    explicit raw_peer(std::unique_ptr<byte_stream> s) : other_(std::move(s)) {}

    static auto handshake(raw_peer p, std::string_view path, std::string_view fields)
        -> task<raw_peer> {
        std::string req = "GET " + std::string{path} +
                          " HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                          "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                          "Sec-WebSocket-Version: 13\r\n" +
                          std::string{fields} + "\r\n";
        (co_await p.write_all(as_bytes(req))).value();
        for (;;) {
            const auto end = p.buf_.find("\r\n\r\n");
            if (end != std::string::npos) {
                p.head_ = p.buf_.substr(0, end);
                p.buf_.erase(0, end + 4);
                break;
            }
            if (!co_await p.fill()) {
                throw std::runtime_error("no handshake answer");
            }
        }
        co_return p;
    }
    auto write_all(std::span<const std::byte> b) -> task<result<void>> {
        return other_ ? other_->write_all(b) : s_.write_all(b);
    }
    auto read_some(std::span<std::byte> b) -> task<result<std::size_t>> {
        return other_ ? other_->read_some(b) : s_.read_some(b);
    }
    auto fill() -> task<bool> {
        char b[4096];
        auto n = co_await read_some(std::as_writable_bytes(std::span{b}));
        if (!n) {
            co_return false;
        }
        buf_.append(b, *n);
        co_return true;
    }

    tcp_stream s_;
    std::unique_ptr<byte_stream> other_;  // on a simulated network
    std::string buf_;
    std::string head_;
};

auto close_payload(std::uint16_t code) -> std::string {
    std::string p;
    p.push_back(static_cast<char>(code >> 8));
    p.push_back(static_cast<char>(code & 0xFF));
    return p;
}

/// What the handlers saw, for the cases that look at the server's side.
struct seen {
    std::atomic<int> ended{0};
    std::atomic<int> send_error{0};  // errc of the flood's failed send
    event handler_done;
};

class websocket_server : public weft::test::backend_test {
protected:
    // The routes every case is served: the echo, its compressed variants, an origin check, a
    // handler that throws, and a flood that never stops sending (the echo's and the flood's
    // timeouts for the test clock when `test_clock`).
    void add_routes(server& srv, bool test_clock) {
        auto echo = [this](websocket& ws) -> task<void> {
            for (;;) {
                auto m = co_await ws.receive();
                if (!m) {
                    break;
                }
                auto w = co_await ws.send(m->data, m->text);
                if (!w) {
                    break;
                }
            }
            seen_.ended.fetch_add(1);
            seen_.handler_done.set();
        };
        srv.websocket("/echo", echo, ws_options(test_clock));
        srv.websocket("/z", echo, deflate_options(false));
        srv.websocket("/zt", echo, deflate_options(true));
        websocket_options strict = ws_options();
        strict.check_origin = [](std::string_view origin) {
            return origin == "https://good.example";
        };
        srv.websocket(
            "/strict", [](websocket&) -> task<void> { co_return; }, std::move(strict));
        srv.websocket(
            "/throw",
            [](websocket& ws) -> task<void> {
                (void)co_await ws.receive();
                throw std::runtime_error("handler failure under test");
            },
            ws_options());
        srv.websocket(
            "/flood",
            [this](websocket& ws) -> task<void> {
                const std::string chunk(1000, 'f');
                for (;;) {
                    auto w = co_await ws.send(chunk);
                    if (!w) {
                        seen_.send_error.store(w.error().value());
                        break;
                    }
                }
                seen_.handler_done.set();
            },
            flood_options(test_clock));
    }

    template <typename Body>
    void run(Body body, server_options so = {}) {
        runtime rt{options()};
        rt.block_on([&]() -> task<void> {
            server srv{std::move(so)};
            add_routes(srv, false);
            auto l = tcp_listener::bind(socket_address::parse("127.0.0.1", 0).value()).value();
            const auto addr = l.local_address().value();
            co_await with_scope([&](scope& s) -> task<void> {
                s.spawn(srv.serve(l));
                co_await body(addr, srv);
                co_await srv.shutdown();
            });
            stats_ = srv.stats();
        }());
    }

    // run(), with the server on a simulated network (host "server", port 80; raw_peer::open(net)
    // reaches it) and the runtime on a test clock: its timeouts take no wall time.
    template <typename Body>
    void run_on_test_clock(Body body, server_options so = {}) {
        runtime_options ro = options(1);
        ro.clock = testing::test_clock_runtime().clock;
        runtime rt{ro};
        rt.block_on([&]() -> task<void> {
            testing::sim_network net{{.latency = 1ms}};
            server srv{std::move(so)};
            add_routes(srv, true);
            auto l = net.listen("server", 80);
            co_await with_scope([&](scope& s) -> task<void> {
                s.spawn(srv.serve(*l));
                co_await body(net, srv);
                co_await srv.shutdown();
            });
            stats_ = srv.stats();
        }());
    }

    // The close code the server answers `bytes` with (sent after the handshake on `path`, whose
    // request carries `fields`).
    auto close_for(std::string bytes, std::string_view path = "/echo", std::string_view fields = {})
        -> std::uint16_t {
        std::uint16_t code = 0;
        run([&](socket_address addr, server&) -> task<void> {
            auto p = co_await raw_peer::open(addr, path, fields);
            (void)co_await p.send(std::move(bytes));
            code = co_await p.close_code();
            const bool ok1 = static_cast<bool>(co_await p.ended());
            EXPECT_TRUE(ok1);
        });
        return code;
    }

    seen seen_;
    server_stats stats_;
};

TEST_P(websocket_server, handshake_answers_101_with_the_accept_key) {
    std::string head;
    run([&](socket_address addr, server&) -> task<void> {
        auto p = co_await raw_peer::open(addr);
        head = p.head();
    });
    EXPECT_TRUE(head.starts_with("HTTP/1.1 101 ")) << head;
    // RFC 6455 1.3's example key and its accept value.
    EXPECT_NE(head.find("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), std::string::npos)
        << head;
}

TEST_P(websocket_server, frames_sent_one_byte_at_a_time_are_joined) {
    std::optional<read_frame> pong;
    std::optional<read_frame> echo;
    std::uint16_t code = 0;
    run([&](socket_address addr, server&) -> task<void> {
        auto p = co_await raw_peer::open(addr);
        // "h€llo" in three fragments, the € split between two of them, a ping in between.
        const std::string word = "h\xE2\x82\xACllo";
        std::string bytes = frame(0x1, word.substr(0, 2), false) +
                            frame(0x9, "are you there", true) +
                            frame(0x0, word.substr(2, 2), false) +
                            frame(0x0, word.substr(4), true) + frame(0x8, close_payload(1000));
        const bool ok2 = static_cast<bool>(co_await p.send_bytewise(bytes));
        EXPECT_TRUE(ok2);
        pong = co_await p.next();
        echo = co_await p.next();
        code = co_await p.close_code();
        const bool ok3 = static_cast<bool>(co_await p.ended());
        EXPECT_TRUE(ok3);
    });
    ASSERT_TRUE(pong && echo);
    EXPECT_EQ(pong->opcode, 0xA);
    EXPECT_EQ(pong->payload, "are you there");
    EXPECT_EQ(echo->opcode, 0x1);
    EXPECT_EQ(echo->payload, "h\xE2\x82\xACllo");
    EXPECT_EQ(code, 1000);
}

TEST_P(websocket_server, unmasked_client_frame_is_closed_1002) {
    EXPECT_EQ(close_for(frame(0x1, "hello", true, false)), 1002);
}

TEST_P(websocket_server, frame_over_the_limit_is_closed_1009_before_its_payload) {
    // Only the head: the payload it announces is never sent, so a 1009 proves it was unread.
    const std::string head = frame(0x2, std::string(frame_limit + 1, 'x')).substr(0, 8);
    EXPECT_EQ(close_for(head), 1009);
}

TEST_P(websocket_server, message_over_the_limit_is_closed_1009) {
    std::string bytes;
    for (std::uint64_t sent = 0; sent <= message_limit; sent += frame_limit) {
        bytes += frame(sent == 0 ? 0x2 : 0x0, std::string(frame_limit, 'x'), false);
    }
    EXPECT_EQ(close_for(bytes), 1009);
}

TEST_P(websocket_server, fragmented_control_frame_is_closed_1002) {
    EXPECT_EQ(close_for(frame(0x9, "ping", false)), 1002);
}

TEST_P(websocket_server, continuation_without_a_start_is_closed_1002) {
    EXPECT_EQ(close_for(frame(0x0, "orphan")), 1002);
}

TEST_P(websocket_server, new_message_inside_a_fragmented_one_is_closed_1002) {
    EXPECT_EQ(close_for(frame(0x1, "a", false) + frame(0x1, "b")), 1002);
}

TEST_P(websocket_server, reserved_bits_are_closed_1002) {
    EXPECT_EQ(close_for(frame(0x1, "x", true, true, 0x4)), 1002);
}

TEST_P(websocket_server, reserved_data_opcode_is_closed_1002) {
    EXPECT_EQ(close_for(frame(0x3, "x")), 1002);
}

TEST_P(websocket_server, reserved_control_opcode_is_closed_1002) {
    EXPECT_EQ(close_for(frame(0xB, "x")), 1002);
}

TEST_P(websocket_server, oversized_control_payload_is_closed_1002) {
    EXPECT_EQ(close_for(frame(0x9, std::string(126, 'p'))), 1002);
}

TEST_P(websocket_server, invalid_utf8_text_is_closed_1007) {
    EXPECT_EQ(close_for(frame(0x1, "ab\xC0\xAF")), 1007);  // an overlong '/'
}

TEST_P(websocket_server, invalid_utf8_is_found_in_its_fragment) {
    // The first fragment already cannot be UTF-8 (a surrogate): refused before the rest.
    EXPECT_EQ(close_for(frame(0x1, "\xED\xA0\x80", false)), 1007);
}

TEST_P(websocket_server, invalid_utf8_is_refused_before_the_rest_of_its_frame) {
    // A 100-byte text frame of which only the first 10 bytes ever come, the first invalid.
    const std::string f = frame(0x1, std::string{"\xC0"} + std::string(99, 'a'));
    EXPECT_EQ(close_for(f.substr(0, 2 + 4 + 10)), 1007);
}

TEST_P(websocket_server, invalid_close_code_is_closed_1002) {
    EXPECT_EQ(close_for(frame(0x8, close_payload(1005))), 1002);
}

TEST_P(websocket_server, peer_close_is_answered_with_its_code) {
    EXPECT_EQ(close_for(frame(0x8, close_payload(4000) + "bye")), 4000);
}

TEST_P(websocket_server, handler_that_throws_closes_1011) {
    std::uint16_t code = 0;
    run([&](socket_address addr, server&) -> task<void> {
        auto p = co_await raw_peer::open(addr, "/throw");
        (void)co_await p.send(frame(0x1, "boom"));
        code = co_await p.close_code();
        (void)co_await p.send(frame(0x8, close_payload(1011)));
        const bool ok4 = static_cast<bool>(co_await p.ended());
        EXPECT_TRUE(ok4);
    });
    EXPECT_EQ(code, 1011);
}

TEST_P(websocket_server, peer_that_never_reads_is_dropped_by_the_send_timeout) {
    run_on_test_clock([&](testing::sim_network& net, server&) -> task<void> {
        auto p = co_await raw_peer::open(net, "/flood");
        (void)co_await seen_.handler_done.wait();  // the peer reads nothing meanwhile
        const bool ok5 = static_cast<bool>(co_await p.ended());
        EXPECT_TRUE(ok5);
    });
    EXPECT_EQ(seen_.send_error.load(), static_cast<int>(std::errc::timed_out));
}

TEST_P(websocket_server, peer_that_stops_answering_pings_is_dropped_by_the_idle_timeout) {
    int pings = 0;
    run_on_test_clock([&](testing::sim_network& net, server&) -> task<void> {
        auto p = co_await raw_peer::open(net);
        for (;;) {  // reads, never answers
            auto f = co_await p.next(true);
            if (!f) {
                break;
            }
            pings += f->opcode == 0x9 ? 1 : 0;
        }
    });
    EXPECT_GE(pings, 1);
    EXPECT_EQ(stats_.timed_out, 1U);
    EXPECT_EQ(seen_.ended.load(), 1);
}

TEST_P(websocket_server, client_that_answers_pings_outlives_the_idle_timeout) {
    std::string echo;
    run_on_test_clock([&](testing::sim_network& net, server&) -> task<void> {
        auto s = (co_await net.connect("client", "server", 80)).value();
        auto ws = (co_await websocket::connect(std::move(s), "server", "/echo")).value();
        co_await with_scope([&](scope& s) -> task<void> {
            s.spawn([&]() -> task<void> {
                auto m = co_await ws.receive();  // answers the pings while it waits
                if (m) {
                    echo = m->data;
                }
            });
            (void)co_await sleep_for(1min);  // several idle timeouts, only pings exchanged
            (void)co_await ws.send("still here");
        });
        (void)co_await ws.close();
    });
    EXPECT_EQ(echo, "still here");
    EXPECT_EQ(stats_.timed_out, 0U);
}

TEST_P(websocket_server, drain_sends_1001_and_waits_for_the_peer_close) {
    std::uint16_t code = 0;
    bool ended = false;
    run([&](socket_address addr, server& srv) -> task<void> {
        auto p = co_await raw_peer::open(addr);
        co_await with_scope([&](scope& s) -> task<void> {
            s.spawn(srv.shutdown());
            code = co_await p.close_code();
            (void)co_await p.send(frame(0x8, close_payload(1001)));
            ended = co_await p.ended();
        });
    });
    EXPECT_EQ(code, 1001);
    EXPECT_TRUE(ended);
    EXPECT_EQ(seen_.ended.load(), 1);  // the handler saw the close and returned
    EXPECT_EQ(stats_.timed_out, 0U);
}

TEST_P(websocket_server, drain_drops_a_peer_that_never_sends_its_close) {
    std::uint16_t code = 0;
    bool ended = false;
    server_options so;
    so.drain_timeout = 1h;  // far past close_timeout: the drop is the session's own bound
    run_on_test_clock(
        [&](testing::sim_network& net, server& srv) -> task<void> {
            auto p = co_await raw_peer::open(net);
            co_await with_scope([&](scope& s) -> task<void> {
                s.spawn(srv.shutdown());
                code = co_await p.close_code();  // then silence
                ended = co_await p.ended();
            });
        },
        std::move(so));
    EXPECT_EQ(code, 1001);
    EXPECT_TRUE(ended);
    EXPECT_EQ(seen_.ended.load(), 1);
}

TEST_P(websocket_server, client_round_trips_text_and_binary) {
    int echoed = 0;
    std::string proto;
    run([&](socket_address addr, server&) -> task<void> {
        std::vector<std::string> offered{"chat.v1", "chat.v2"};
        auto ws = (co_await websocket::connect(addr, "localhost", "/echo", {}, std::move(offered)))
                      .value();
        proto = std::string{ws.subprotocol()};
        for (int i = 0; i < 50; ++i) {
            const std::string msg(static_cast<std::size_t>(i * 20),
                                  static_cast<char>('a' + i % 26));
            const bool ok6 = static_cast<bool>(co_await ws.send(msg, i % 2 == 0));
            EXPECT_TRUE(ok6);
            auto m = co_await ws.receive();
            if (m && m->data == msg && m->text == (i % 2 == 0)) {
                ++echoed;
            }
        }
        const bool ok7 = static_cast<bool>(co_await ws.close(1000, "done"));
        EXPECT_TRUE(ok7);
        auto end = co_await ws.receive();
        EXPECT_EQ(end.error(), websocket_errc::closed);
        EXPECT_EQ(ws.close_code(), 1000);
    });
    EXPECT_EQ(echoed, 50);
    EXPECT_EQ(proto, "chat.v2");  // the server's preference among those offered
}

TEST_P(websocket_server, handshake_refusals) {
    std::string no_upgrade;
    std::string bad_version;
    run([&](socket_address addr, server&) -> task<void> {
        auto s = (co_await tcp_stream::connect(addr)).value();
        const std::string r1 = "GET /echo HTTP/1.1\r\nHost: a\r\n\r\n";
        (void)co_await s.write_all(as_bytes(r1));
        char b[512];
        auto n = co_await s.read_some(std::as_writable_bytes(std::span{b}));
        no_upgrade.assign(b, n ? *n : 0);
        const std::string r2 =
            "GET /echo HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n";
        (void)co_await s.write_all(as_bytes(r2));
        n = co_await s.read_some(std::as_writable_bytes(std::span{b}));
        bad_version.assign(b, n ? *n : 0);
    });
    EXPECT_TRUE(no_upgrade.starts_with("HTTP/1.1 426 ")) << no_upgrade;
    EXPECT_TRUE(bad_version.starts_with("HTTP/1.1 426 ")) << bad_version;
    EXPECT_NE(bad_version.find("Sec-WebSocket-Version: 13"), std::string::npos) << bad_version;
}

TEST_P(websocket_server, origin_hook_refuses_with_403) {
    std::string evil;
    std::string good;
    run([&](socket_address addr, server&) -> task<void> {
        for (auto [origin, out] :
             {std::pair{"https://evil.example", &evil}, std::pair{"https://good.example", &good}}) {
            auto s = (co_await tcp_stream::connect(addr)).value();
            const std::string req =
                "GET /strict HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n"
                "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                "Sec-WebSocket-Version: 13\r\nOrigin: " +
                std::string{origin} + "\r\n\r\n";
            (void)co_await s.write_all(as_bytes(req));
            char b[512];
            auto n = co_await s.read_some(std::as_writable_bytes(std::span{b}));
            out->assign(b, n ? *n : 0);
        }
    });
    EXPECT_TRUE(evil.starts_with("HTTP/1.1 403 ")) << evil;
    EXPECT_TRUE(good.starts_with("HTTP/1.1 101 ")) << good;
}

// ---- permessage-deflate (RFC 7692) -------------------------------------------------------

constexpr std::string_view deflate_offer =
    "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n";

// Text that deflate shrinks but not to nothing: `n` numbered phrases.
auto phrases(int n) -> std::string {
    std::string s;
    for (int i = 0; i < n; ++i) {
        s += "phrase " + std::to_string(i * 7919 % 1000) + " of the message; ";
    }
    return s;
}

// Letters from a fixed linear congruential sequence: little to compress inside one message.
auto noise(std::size_t n) -> std::string {
    std::string s(n, 'a');
    std::uint32_t x = 12345;
    for (char& c : s) {
        x = x * 1103515245U + 12345U;
        c = static_cast<char>('a' + (x >> 16) % 26);
    }
    return s;
}

TEST_P(websocket_server, deflate_offer_is_answered_and_echoes_are_compressed) {
    const std::string text = phrases(30);
    std::string head;
    std::optional<read_frame> echo;
    std::optional<read_frame> plain_echo;
    std::uint16_t code = 0;
    run([&](socket_address addr, server&) -> task<void> {
        auto p = co_await raw_peer::open(addr, "/z", deflate_offer);
        head = p.head() + "\r\n";
        (void)co_await p.send(frame(0x1, deflate_payload(text), true, true, 0x4));
        echo = co_await p.next();
        (void)co_await p.send(frame(0x2, "uncompressed"));  // RSV1 clear: taken as it is
        plain_echo = co_await p.next();
        (void)co_await p.send(frame(0x8, close_payload(1000)));
        code = co_await p.close_code();
    });
    // Without context takeover both ways (the default), and no client_max_window_bits value:
    // the client may compress with 15 bits.
    EXPECT_NE(head.find("\r\nSec-WebSocket-Extensions: permessage-deflate; "
                        "server_no_context_takeover; client_no_context_takeover\r\n"),
              std::string::npos)
        << head;
    ASSERT_TRUE(echo && plain_echo);
    EXPECT_EQ(echo->rsv, 0x4);
    EXPECT_LT(echo->payload.size(), text.size() / 2);
    EXPECT_EQ(inflate_payload(echo->payload), text);
    EXPECT_EQ(plain_echo->opcode, 0x2);
    EXPECT_EQ(plain_echo->rsv, 0x4);
    EXPECT_EQ(inflate_payload(plain_echo->payload), "uncompressed");
    EXPECT_EQ(code, 1000);
}

TEST_P(websocket_server, rsv1_without_agreement_is_closed_1002) {
    // /z accepts permessage-deflate, but this client did not offer it.
    EXPECT_EQ(close_for(frame(0x1, deflate_payload("hello"), true, true, 0x4), "/z"), 1002);
}

TEST_P(websocket_server, rsv1_on_a_continuation_is_closed_1002) {
    const std::string z = deflate_payload(phrases(10));
    EXPECT_EQ(close_for(frame(0x1, z.substr(0, 5), false, true, 0x4) +
                            frame(0x0, z.substr(5), true, true, 0x4),
                        "/z", deflate_offer),
              1002);
}

TEST_P(websocket_server, compressed_control_frame_is_closed_1002) {
    EXPECT_EQ(close_for(frame(0x9, deflate_payload("ping"), true, true, 0x4), "/z", deflate_offer),
              1002);
}

TEST_P(websocket_server, decompression_bomb_is_closed_1009_before_it_is_inflated) {
    // 64 KiB of zeros in a frame of a few dozen bytes, then a byte that breaks the stream (the
    // flush's stored block gets lengths that disagree). Inflated to its end it would be refused
    // as invalid data (1007, as the small case below shows); a 1009 proves inflating stopped at
    // the message limit, before the bad byte.
    const std::string bomb = deflate_payload(std::string(64 * 1024, '\0')) + "\x07";
    ASSERT_LT(bomb.size(), frame_limit);
    EXPECT_EQ(close_for(frame(0x2, bomb, true, true, 0x4), "/z", deflate_offer), 1009);
    const std::string small = deflate_payload(std::string(100, '\0')) + "\x07";
    EXPECT_EQ(close_for(frame(0x2, small, true, true, 0x4), "/z", deflate_offer), 1007);
}

TEST_P(websocket_server, compressed_text_that_is_not_utf8_is_closed_1007) {
    EXPECT_EQ(
        close_for(frame(0x1, deflate_payload("ab\xC0\xAF"), true, true, 0x4), "/z", deflate_offer),
        1007);
}

TEST_P(websocket_server, offers_with_a_bad_parameter_are_declined) {
    const std::vector<std::string> bad = {
        "permessage-deflate; server_max_window_bits=16",
        "permessage-deflate; server_max_window_bits=7",
        "permessage-deflate; client_max_window_bits=09",
        "permessage-deflate; server_max_window_bits",
        "permessage-deflate; server_max_window_bits=8",  // zlib has no raw 8-bit window
        "permessage-deflate; server_no_context_takeover=1",
        "permessage-deflate; client_no_context_takeover; client_no_context_takeover",
        "permessage-deflate; mystery",
        "x-webkit-deflate-frame",
    };
    std::vector<std::string> heads;
    std::vector<std::string> echoes;
    std::string fallback_head;
    run([&](socket_address addr, server&) -> task<void> {
        for (const std::string& offer : bad) {
            auto p =
                co_await raw_peer::open(addr, "/z", "Sec-WebSocket-Extensions: " + offer + "\r\n");
            heads.push_back(p.head());
            (void)co_await p.send(frame(0x1, "still works"));
            auto f = co_await p.next();
            echoes.push_back(f && f->rsv == 0 ? f->payload : "");
        }
        // A bad offer first, an acceptable one after it: the second is answered.
        auto p = co_await raw_peer::open(addr, "/z",
                                         "Sec-WebSocket-Extensions: permessage-deflate; x=1, "
                                         "permessage-deflate; server_max_window_bits=10\r\n");
        fallback_head = p.head() + "\r\n";
    });
    ASSERT_EQ(heads.size(), bad.size());
    for (std::size_t i = 0; i < bad.size(); ++i) {
        EXPECT_TRUE(heads[i].starts_with("HTTP/1.1 101 ")) << bad[i];
        EXPECT_EQ(heads[i].find("Sec-WebSocket-Extensions"), std::string::npos) << bad[i];
        EXPECT_EQ(echoes[i], "still works") << bad[i];
    }
    EXPECT_NE(fallback_head.find("\r\nSec-WebSocket-Extensions: permessage-deflate; "
                                 "server_no_context_takeover; client_no_context_takeover; "
                                 "server_max_window_bits=10\r\n"),
              std::string::npos)
        << fallback_head;
}

TEST_P(websocket_server, fragmented_compressed_message_sent_one_byte_at_a_time_is_joined) {
    const std::string text = phrases(40);
    const std::string z = deflate_payload(text);
    std::optional<read_frame> pong;
    std::optional<read_frame> echo;
    std::uint16_t code = 0;
    run([&](socket_address addr, server&) -> task<void> {
        auto p = co_await raw_peer::open(addr, "/z", deflate_offer);
        // RSV1 on the first fragment only, a ping between the fragments.
        const std::size_t a = z.size() / 3;
        const std::size_t b = 2 * z.size() / 3;
        std::string bytes = frame(0x1, z.substr(0, a), false, true, 0x4) + frame(0x9, "hi") +
                            frame(0x0, z.substr(a, b - a), false) + frame(0x0, z.substr(b)) +
                            frame(0x8, close_payload(1000));
        const bool sent = co_await p.send_bytewise(std::move(bytes));
        EXPECT_TRUE(sent);
        pong = co_await p.next();
        echo = co_await p.next();
        code = co_await p.close_code();
    });
    ASSERT_TRUE(pong && echo);
    EXPECT_EQ(pong->opcode, 0xA);
    EXPECT_EQ(pong->rsv, 0);
    EXPECT_EQ(echo->opcode, 0x1);
    EXPECT_EQ(inflate_payload(echo->payload), text);
    EXPECT_EQ(code, 1000);
}

TEST_P(websocket_server, context_takeover_keeps_both_windows_between_messages) {
    // The same 600 letters twice: the second message is a back-reference to the first, on
    // the way in (the client's window, which the server must keep to inflate it) and out (the
    // server's, which makes its second echo a few bytes).
    const std::string text = noise(600);
    std::string head;
    std::vector<std::string> echoes;
    std::size_t second_size = 0;
    run([&](socket_address addr, server&) -> task<void> {
        auto p = co_await raw_peer::open(addr, "/zt",
                                         "Sec-WebSocket-Extensions: permessage-deflate\r\n");
        head = p.head() + "\r\n";
        z_stream tx{};
        z_stream rx{};
        EXPECT_EQ(deflateInit2(&tx, 9, Z_DEFLATED, -15, 9, Z_DEFAULT_STRATEGY), Z_OK);
        EXPECT_EQ(inflateInit2(&rx, -15), Z_OK);
        for (int i = 0; i < 2; ++i) {
            const std::string z = deflate_payload(text, &tx);
            if (i == 1) {
                second_size = z.size();
            }
            (void)co_await p.send(frame(0x1, z, true, true, 0x4));
            auto f = co_await p.next();
            echoes.push_back(f ? std::to_string(f->payload.size()) + ":" +
                                     inflate_payload(f->payload, &rx)
                               : "");
        }
        (void)deflateEnd(&tx);
        (void)inflateEnd(&rx);
    });
    EXPECT_NE(head.find("\r\nSec-WebSocket-Extensions: permessage-deflate\r\n"), std::string::npos)
        << head;
    EXPECT_LT(second_size, 20U);
    ASSERT_EQ(echoes.size(), 2U);
    const auto size_of = [](const std::string& e) { return std::stoul(e.substr(0, e.find(':'))); };
    EXPECT_EQ(echoes[0].substr(echoes[0].find(':') + 1), text);
    EXPECT_EQ(echoes[1].substr(echoes[1].find(':') + 1), text);
    EXPECT_GT(size_of(echoes[0]), 300U);
    EXPECT_LT(size_of(echoes[1]), 20U);
}

TEST_P(websocket_server, client_round_trips_compressed_messages) {
    // weft's client against weft's server: without takeover, with it, with small windows, and
    // against a route that does not accept the offer.
    struct variant {
        std::string path;
        bool takeover;
        int bits;
        bool agreed;
    };
    const std::vector<variant> variants = {{"/z", false, 15, true},
                                           {"/zt", true, 15, true},
                                           {"/zt", true, 9, true},
                                           {"/zt", false, 10, true},
                                           {"/echo", false, 15, false}};
    int echoed = 0;
    int agreed = 0;
    run([&](socket_address addr, server&) -> task<void> {
        for (const variant& v : variants) {
            websocket_options o;
            o.deflate.enabled = true;
            o.deflate.send_context_takeover = v.takeover;
            o.deflate.receive_context_takeover = v.takeover;
            o.deflate.send_window_bits = v.bits;
            o.deflate.receive_window_bits = v.bits;
            auto ws = (co_await websocket::connect(addr, "localhost", v.path, o)).value();
            agreed += ws.compressed() == v.agreed ? 1 : 0;
            // Each under the server's frame limit also when sent uncompressed (/echo).
            for (const std::string& msg :
                 {std::string{}, std::string{"a"}, phrases(25), noise(900), noise(900)}) {
                const bool text = msg.size() % 2 == 0;
                const bool ok = static_cast<bool>(co_await ws.send(msg, text));
                EXPECT_TRUE(ok);
                auto m = co_await ws.receive();
                echoed += m && m->data == msg && m->text == text ? 1 : 0;
            }
            (void)co_await ws.close();
            (void)co_await ws.receive();
        }
    });
    EXPECT_EQ(agreed, 5);
    EXPECT_EQ(echoed, 25);
}

WEFT_TEST_ON_BOTH_BACKENDS(websocket_server);

// The client's side of the negotiation, against a scripted server that answers each upgrade
// with a 101 carrying a chosen Sec-WebSocket-Extensions.
class websocket_client : public weft::test::backend_test {};

// Sec-WebSocket-Accept for the key of `request`, computed here with OpenSSL.
auto accept_for(std::string_view request) -> std::string {
    const std::string_view field = "Sec-WebSocket-Key: ";
    const auto at = request.find(field) + field.size();
    std::string s{request.substr(at, request.find("\r\n", at) - at)};
    s += "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EXPECT_EQ(EVP_Digest(s.data(), s.size(), md, &len, EVP_sha1(), nullptr), 1);
    std::string out(4 * ((len + 2) / 3), '\0');
    const int n =
        EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), md, static_cast<int>(len));
    out.resize(static_cast<std::size_t>(n));
    return out;
}

TEST_P(websocket_client, refuses_an_extension_answer_it_cannot_take) {
    struct answer_case {
        bool offered;
        std::string answer;
        bool accepted;
    };
    const std::vector<answer_case> cases = {
        {false, "permessage-deflate", false},  // nothing was offered
        {true, "permessage-deflate; server_no_context_takeover; client_no_context_takeover", true},
        {true, "permessage-deflate; server_no_context_takeover; client_max_window_bits=10", true},
        {true, "permessage-deflate", false},  // server_no_context_takeover was asked for
        {true, "permessage-deflate; server_no_context_takeover; server_max_window_bits=16", false},
        {true, "permessage-deflate; server_no_context_takeover; client_max_window_bits", false},
        {true, "permessage-deflate; server_no_context_takeover; client_max_window_bits=8", false},
        {true, "permessage-deflate; server_no_context_takeover; mystery", false},
        {true, "x-webkit-deflate-frame", false},
        {true, "permessage-deflate; server_no_context_takeover, permessage-deflate", false},
    };
    std::vector<std::string> requests;
    int right = 0;
    runtime rt{options()};
    rt.block_on([&]() -> task<void> {
        auto l = tcp_listener::bind(socket_address::parse("127.0.0.1", 0).value()).value();
        const auto addr = l.local_address().value();
        for (const answer_case& c : cases) {
            co_await with_scope([&](scope& s) -> task<void> {
                s.spawn([&]() -> task<void> {
                    auto conn = (co_await l.accept()).value();
                    std::string req;
                    char b[2048];
                    while (req.find("\r\n\r\n") == std::string::npos) {
                        auto n = co_await conn.read_some(std::as_writable_bytes(std::span{b}));
                        if (!n) {
                            co_return;
                        }
                        req.append(b, *n);
                    }
                    requests.push_back(req);
                    const std::string answer =
                        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                        "Connection: Upgrade\r\nSec-WebSocket-Accept: " +
                        accept_for(req) + "\r\nSec-WebSocket-Extensions: " + c.answer + "\r\n\r\n";
                    (void)co_await conn.write_all(as_bytes(answer));
                    for (;;) {  // until the client drops the connection
                        auto n = co_await conn.read_some(std::as_writable_bytes(std::span{b}));
                        if (!n || *n == 0) {
                            co_return;
                        }
                    }
                });
                websocket_options o;
                o.deflate.enabled = c.offered;
                {  // the connection is dropped at the end of this block: the script ends
                    auto ws = co_await websocket::connect(addr, "localhost", "/", o);
                    const bool accepted = ws.has_value() && ws->compressed();
                    const bool refused =
                        !ws.has_value() && ws.error() == websocket_errc::handshake_failed;
                    right += (c.accepted ? accepted : refused) ? 1 : 0;
                    EXPECT_TRUE(c.accepted ? accepted : refused) << c.answer;
                }
            });
        }
    }());
    EXPECT_EQ(right, static_cast<int>(cases.size()));
    ASSERT_EQ(requests.size(), cases.size());
    EXPECT_EQ(requests[0].find("Sec-WebSocket-Extensions"), std::string::npos);
    EXPECT_NE(requests[1].find("\r\nSec-WebSocket-Extensions: permessage-deflate; "
                               "client_no_context_takeover; server_no_context_takeover; "
                               "client_max_window_bits\r\n"),
              std::string::npos)
        << requests[1];
}

WEFT_TEST_ON_BOTH_BACKENDS(websocket_client);

// The same server over TLS: the upgrade and the frames go through the record layer.
class websocket_tls : public weft::test::backend_test {};

TEST_P(websocket_tls, wss_client_round_trips_over_tls) {
    const auto ca = weft::test::make_ca("weft ws CA");
    const auto leaf = weft::test::make_leaf("localhost", &ca);
    tls_server_options to;
    to.certificate = leaf.as_certificate();
    server_options so;
    so.tls = tls_context::server(to);
    std::string echo;
    std::uint16_t drained_with = 0;
    runtime rt{options()};
    rt.block_on([&]() -> task<void> {
        server srv{std::move(so)};
        srv.websocket("/echo", [](websocket& ws) -> task<void> {
            for (;;) {
                auto m = co_await ws.receive();
                if (!m) {
                    co_return;
                }
                (void)co_await ws.send(m->data, m->text);
            }
        });
        auto l = tcp_listener::bind(socket_address::parse("127.0.0.1", 0).value()).value();
        const auto addr = l.local_address().value();
        co_await with_scope([&](scope& s) -> task<void> {
            s.spawn(srv.serve(l));
            tls_client_options co;
            co.ca_pem = ca.cert_pem();
            websocket_options wo;
            wo.tls = tls_context::client(co);
            auto ws = (co_await websocket::connect(addr, "localhost", "/echo", wo)).value();
            (void)co_await ws.send("over tls");
            auto m = co_await ws.receive();
            echo = m ? m->data : "";
            s.spawn(srv.shutdown());
            auto end = co_await ws.receive();  // the drain's close, answered
            EXPECT_FALSE(end);
            drained_with = ws.close_code();
        });
    }());
    EXPECT_EQ(echo, "over tls");
    EXPECT_EQ(drained_with, 1001);
}

WEFT_TEST_ON_BOTH_BACKENDS(websocket_tls);

}  // namespace
}  // namespace weft::http::test
