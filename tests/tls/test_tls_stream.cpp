// tls_stream over both IO backends: handshake and echo, the client's refusals (each naming its
// reason), the server's handshake timeout, garbage, truncation, cancellation of a pending read,
// SNI, ALPN, certificate reload, and real OpenSSL peers (s_client) for the version floor and
// resumption.

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend_test.hpp"
#include "tls/cert_factory.hpp"
#include "tls/child_process.hpp"
#include "weft/core/scope.hpp"
#include "weft/io/tcp_listener.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/spawn_blocking.hpp"
#include "weft/sched/timer.hpp"
#include "weft/sync/event.hpp"
#include "weft/tls/kernel_tls.hpp"
#include "weft/tls/tls_stream.hpp"

namespace {

using namespace std::chrono_literals;
using weft::result;
using weft::task;
using weft::tcp_stream;
using weft::tls_context;
using weft::tls_stream;
namespace wt = weft::test;

auto loopback() -> weft::socket_address {
    return weft::socket_address::parse("127.0.0.1", 0).value();
}
auto as_bytes(std::string_view s) -> std::span<const std::byte> {
    return std::as_bytes(std::span{s});
}

// Options built field by field: g++ 12 warns of every field a designated initializer leaves out.
auto server_options(weft::tls_certificate cert,
                    std::chrono::milliseconds timeout = std::chrono::seconds{10})
    -> weft::tls_server_options {
    weft::tls_server_options o;
    o.certificate = std::move(cert);
    o.handshake_timeout = timeout;
    return o;
}
auto client_options(std::vector<std::string> alpn) -> weft::tls_client_options {
    weft::tls_client_options o;
    o.alpn = std::move(alpn);
    return o;
}

// One CA and a server certificate for "localhost" it issued, shared by the tests.
struct pki {
    wt::issued_cert ca = wt::make_ca("weft test CA");
    wt::issued_cert leaf = wt::make_leaf("localhost", &ca);
    [[nodiscard]] auto server(weft::tls_server_options o = {}) const -> tls_context {
        if (o.certificate.chain_pem.empty()) {
            o.certificate = leaf.as_certificate();
        }
        return tls_context::server(std::move(o));
    }
    [[nodiscard]] auto client(weft::tls_client_options o = {}) const -> tls_context {
        o.ca_pem = ca.cert_pem();
        return tls_context::client(std::move(o));
    }
};
auto the_pki() -> const pki& {
    static const pki p;
    return p;
}

// Reads until eof (or an error), returning what came and how it ended.
auto read_to_end(tls_stream& s) -> task<std::pair<std::string, std::error_code>> {
    std::string out;
    std::array<std::byte, 8192> buf{};
    for (;;) {
        auto n = co_await s.read_some(buf);
        if (!n) {
            co_return std::pair{out, n.error()};
        }
        out.append(reinterpret_cast<const char*>(buf.data()), *n);
    }
}

class tls : public wt::backend_test {
protected:
    // Accepts one connection and runs `server(tcp_stream)` on it while `client(addr)` runs.
    template <typename Server, typename Client>
    void run_pair(Server server, Client client) {
        weft::runtime rt{options()};
        rt.block_on([&]() -> task<void> {
            auto l = weft::tcp_listener::bind(loopback()).value();
            const auto addr = l.local_address().value();
            co_await weft::with_scope([&](weft::scope& s) -> task<void> {
                s.spawn([&]() -> task<void> {
                    auto c = co_await l.accept();
                    EXPECT_TRUE(c.has_value());
                    if (c) {
                        co_await server(std::move(*c));
                    }
                });
                co_await client(addr);
            });
        }());
    }

    // The client's handshake against a server presenting `cert`: its error (none: success).
    auto client_error(const weft::tls_certificate& cert, std::string host = "localhost")
        -> std::error_code {
        std::error_code ec;
        const auto server_ctx = tls_context::server(server_options(cert));
        const auto client_ctx = the_pki().client();
        run_pair(
            [&](tcp_stream s) -> task<void> {
                auto t = co_await tls_stream::accept(std::move(s), server_ctx);
                EXPECT_FALSE(t.has_value()) << "the client accepted it";
            },
            [&](weft::socket_address a) -> task<void> {
                auto tcp = (co_await tcp_stream::connect(a)).value();
                auto t = co_await tls_stream::connect(std::move(tcp), client_ctx, host);
                ec = t ? std::error_code{} : t.error();
            });
        return ec;
    }
};

TEST_P(tls, handshake_and_echo) {
    const auto server_ctx = the_pki().server();
    const auto client_ctx = the_pki().client(client_options({"http/1.1"}));
    std::string big(200 * 1024, 'x');
    for (std::size_t i = 0; i < big.size(); ++i) {
        big[i] = static_cast<char>('a' + i % 26);
    }
    run_pair(
        [&](tcp_stream s) -> task<void> {
            auto t = (co_await tls_stream::accept(std::move(s), server_ctx)).value();
            EXPECT_EQ(t.alpn(), "http/1.1");
            EXPECT_EQ(t.server_name(), "localhost");
            std::array<std::byte, 5000> buf{};  // smaller than a record: reads split records
            for (;;) {
                auto n = co_await t.read_some(buf);
                if (!n) {
                    EXPECT_EQ(n.error(), weft::io_errc::eof) << n.error().message();
                    break;
                }
                EXPECT_TRUE((co_await t.write_all(std::span{buf.data(), *n})).has_value());
            }
            EXPECT_TRUE((co_await t.shutdown()).has_value());
        },
        [&](weft::socket_address a) -> task<void> {
            auto tcp = (co_await tcp_stream::connect(a)).value();
            auto t =
                (co_await tls_stream::connect(std::move(tcp), client_ctx, "localhost")).value();
            EXPECT_EQ(t.version(), "TLSv1.3");
            EXPECT_EQ(t.alpn(), "http/1.1");
            // Small and large writes, one vectored: all echoed in order, byte for byte.
            const std::span<const std::byte> pieces[] = {as_bytes("head "), as_bytes(big),
                                                         as_bytes(" tail")};
            EXPECT_TRUE((co_await t.write_all(as_bytes("hello"))).has_value());
            EXPECT_TRUE((co_await t.write_all(std::span<const std::span<const std::byte>>{pieces}))
                            .has_value());
            const std::string want = "hellohead " + big + " tail";
            std::string got;
            while (got.size() < want.size()) {
                auto b = co_await t.receive();
                if (!b) {
                    ADD_FAILURE() << b.error().message();
                    co_return;
                }
                got.append(reinterpret_cast<const char*>(b->data()), b->size());
            }
            EXPECT_EQ(got, want);
            EXPECT_TRUE((co_await t.shutdown()).has_value());
            auto [rest, end] = co_await read_to_end(t);
            EXPECT_EQ(rest, "");
            EXPECT_EQ(end, weft::io_errc::eof) << end.message();  // the server's close_notify
        });
}

TEST_P(tls, client_refuses_expired_certificate) {
    const auto expired = wt::make_leaf("localhost", &the_pki().ca, -2 * 86400, -86400);
    const auto ec = client_error(expired.as_certificate());
    EXPECT_EQ(ec, std::error_code(X509_V_ERR_CERT_HAS_EXPIRED, weft::x509_verify_category()));
    EXPECT_NE(ec.message().find("certificate has expired"), std::string::npos) << ec.message();
}

TEST_P(tls, client_refuses_wrong_host) {
    const auto other = wt::make_leaf("other.example", &the_pki().ca);
    const auto ec = client_error(other.as_certificate(), "localhost");
    EXPECT_EQ(ec, std::error_code(X509_V_ERR_HOSTNAME_MISMATCH, weft::x509_verify_category()));
    EXPECT_NE(ec.message().find("hostname mismatch"), std::string::npos) << ec.message();
}

TEST_P(tls, client_refuses_self_signed) {
    const auto self = wt::make_leaf("localhost", nullptr);
    const auto ec = client_error(self.as_certificate());
    EXPECT_EQ(
        ec, std::error_code(X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT, weft::x509_verify_category()));
    EXPECT_NE(ec.message().find("self-signed certificate"), std::string::npos) << ec.message();
}

TEST_P(tls, client_refuses_untrusted_chain) {
    const auto other_ca = wt::make_ca("another CA");
    const auto leaf = wt::make_leaf("localhost", &other_ca);
    const auto ec = client_error(leaf.as_certificate());
    EXPECT_EQ(ec, std::error_code(X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY,
                                  weft::x509_verify_category()));
    EXPECT_NE(ec.message().find("unable to get local issuer certificate"), std::string::npos)
        << ec.message();
}

TEST_P(tls, verification_off_accepts_self_signed) {
    const auto self = wt::make_leaf("localhost", nullptr);
    const auto server_ctx = tls_context::server(server_options(self.as_certificate()));
    const auto client_ctx = [] {
        weft::tls_client_options o;
        o.verify_peer = false;
        return tls_context::client(o);
    }();
    run_pair(
        [&](tcp_stream s) -> task<void> {
            auto t = co_await tls_stream::accept(std::move(s), server_ctx);
            EXPECT_TRUE(t.has_value());
        },
        [&](weft::socket_address a) -> task<void> {
            auto tcp = (co_await tcp_stream::connect(a)).value();
            auto t = co_await tls_stream::connect(std::move(tcp), client_ctx, "anything");
            EXPECT_TRUE(t.has_value()) << t.error().message();
        });
}

TEST_P(tls, server_drops_client_stalled_in_handshake) {
    const auto server_ctx = the_pki().server(server_options(the_pki().leaf.as_certificate(), 50ms));
    std::error_code server_end;
    std::error_code client_end;
    run_pair(
        [&](tcp_stream s) -> task<void> {
            auto t = co_await tls_stream::accept(std::move(s), server_ctx);
            server_end = t ? std::error_code{} : t.error();
        },  // the socket is closed here
        [&](weft::socket_address a) -> task<void> {
            auto tcp = (co_await tcp_stream::connect(a)).value();
            // The first bytes of a handshake record, then nothing.
            const unsigned char partial[] = {0x16, 0x03, 0x01, 0x00, 0x80, 0x01};
            EXPECT_TRUE((co_await tcp.write_all(std::as_bytes(std::span{partial}))).has_value());
            std::array<std::byte, 64> buf{};
            auto n = co_await tcp.read_some(buf);
            client_end = n ? std::error_code{} : n.error();
        });
    EXPECT_EQ(server_end, std::errc::timed_out) << server_end.message();
    // Closed by the server: eof or a reset, never data.
    EXPECT_TRUE(client_end == weft::io_errc::eof || client_end == std::errc::connection_reset)
        << client_end.message();
}

TEST_P(tls, garbage_before_handshake_fails_and_closes) {
    const auto server_ctx = the_pki().server();
    std::mt19937 rng(1234);
    for (int round = 0; round < 20; ++round) {
        std::string junk;
        if (round == 0) {
            junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";  // plaintext to a TLS port
        } else {
            junk.resize(1 + rng() % 2000);
            for (char& c : junk) {
                c = static_cast<char>(rng());
            }
            if (round % 2 == 0) {
                junk[0] = 0x16;  // a handshake record type, garbage after it
                junk.insert(1, "\x03\x01\x00\x40", 4);
            }
        }
        std::error_code server_end;
        std::error_code client_end;
        run_pair(
            [&](tcp_stream s) -> task<void> {
                auto t = co_await tls_stream::accept(std::move(s), server_ctx);
                server_end = t ? std::error_code{} : t.error();
            },
            [&](weft::socket_address a) -> task<void> {
                auto tcp = (co_await tcp_stream::connect(a)).value();
                (void)co_await tcp.write_all(as_bytes(junk));
                (void)tcp.shutdown_write();  // so a record cut short ends the handshake too
                std::array<std::byte, 4096> buf{};
                for (;;) {  // an alert at most, then the close
                    auto n = co_await tcp.read_some(buf);
                    if (!n) {
                        client_end = n.error();
                        break;
                    }
                }
            });
        EXPECT_TRUE(server_end) << "round " << round << " completed a handshake";
        EXPECT_TRUE(client_end == weft::io_errc::eof || client_end == std::errc::connection_reset)
            << client_end.message();
    }
}

TEST_P(tls, garbage_record_after_handshake_fails_the_read) {
    const auto server_ctx = the_pki().server();
    const auto client_ctx = the_pki().client();
    std::error_code first;
    std::error_code second;
    run_pair(
        [&](tcp_stream s) -> task<void> {
            auto t = (co_await tls_stream::accept(std::move(s), server_ctx)).value();
            std::array<std::byte, 1024> buf{};
            auto n = co_await t.read_some(buf);
            first = n ? std::error_code{} : n.error();
            auto m = co_await t.read_some(buf);
            second = m ? std::error_code{} : m.error();
        },
        [&](weft::socket_address a) -> task<void> {
            auto tcp = (co_await tcp_stream::connect(a)).value();
            auto t =
                (co_await tls_stream::connect(std::move(tcp), client_ctx, "localhost")).value();
            // An application-data record whose ciphertext is noise: its tag cannot verify.
            std::string rec = std::string("\x17\x03\x03\x00\x40", 5) + std::string(64, '\x5a');
            (void)co_await t.tcp().write_all(as_bytes(rec));
            std::array<std::byte, 256> buf{};
            (void)co_await t.tcp().read_some(buf);  // the alert, or the close
        });
    EXPECT_EQ(first.category(), weft::openssl_category()) << first.message();
    EXPECT_NE(first.message().find("bad record mac"), std::string::npos) << first.message();
    EXPECT_EQ(second, first);  // the stream stays failed
}

TEST_P(tls, close_without_close_notify_is_truncation) {
    const auto server_ctx = the_pki().server();
    const auto client_ctx = the_pki().client();
    std::error_code end;
    std::string got;
    run_pair(
        [&](tcp_stream s) -> task<void> {
            auto t = (co_await tls_stream::accept(std::move(s), server_ctx)).value();
            (void)co_await t.write_all(as_bytes("partial"));
            t.close();  // no close_notify
        },
        [&](weft::socket_address a) -> task<void> {
            auto tcp = (co_await tcp_stream::connect(a)).value();
            auto t =
                (co_await tls_stream::connect(std::move(tcp), client_ctx, "localhost")).value();
            auto [data, e] = co_await read_to_end(t);
            got = data;
            end = e;
        });
    EXPECT_EQ(got, "partial");
    EXPECT_EQ(end, weft::tls_errc::truncated) << end.message();
}

TEST_P(tls, cancelled_read_loses_nothing) {
    const auto server_ctx = the_pki().server();
    const auto client_ctx = the_pki().client();
    weft::event go;
    std::error_code cancelled;
    std::string after;
    run_pair(
        [&](tcp_stream s) -> task<void> {
            auto t = (co_await tls_stream::accept(std::move(s), server_ctx)).value();
            (void)co_await go.wait();  // only once the client's first read has been cancelled
            (void)co_await t.write_all(as_bytes("after the cancel"));
            (void)co_await t.shutdown();
        },
        [&](weft::socket_address a) -> task<void> {
            auto tcp = (co_await tcp_stream::connect(a)).value();
            auto t =
                (co_await tls_stream::connect(std::move(tcp), client_ctx, "localhost")).value();
            std::array<std::byte, 256> buf{};
            // Nothing is sent before `go`: this read is pending in the socket's receive when
            // the deadline cancels it.
            auto r = co_await weft::with_timeout(20ms, t.read_some(buf));
            cancelled = r ? std::error_code{} : r.error();
            go.set();
            auto [data, e] = co_await read_to_end(t);
            after = data;
            EXPECT_EQ(e, weft::io_errc::eof) << e.message();
        });
    EXPECT_EQ(cancelled, std::errc::timed_out);
    EXPECT_EQ(after, "after the cancel");
}

TEST_P(tls, sni_picks_the_named_context) {
    const auto& p = the_pki();
    auto server_ctx = p.server();
    const auto named = wt::make_leaf("api.example.test", &p.ca);
    server_ctx.add_server_name("*.example.test",
                               tls_context::server(server_options(named.as_certificate())));
    const auto client_ctx = p.client();
    for (const std::string host : {"api.example.test", "localhost"}) {
        std::string seen;
        run_pair(
            [&](tcp_stream s) -> task<void> {
                auto t = co_await tls_stream::accept(std::move(s), server_ctx);
                EXPECT_TRUE(t.has_value()) << t.error().message();
                if (t) {
                    seen = std::string(t->server_name());
                }
            },
            [&](weft::socket_address a) -> task<void> {
                auto tcp = (co_await tcp_stream::connect(a)).value();
                // Verified for `host`: only the certificate made for it passes.
                auto t = co_await tls_stream::connect(std::move(tcp), client_ctx, host);
                EXPECT_TRUE(t.has_value()) << host << ": " << t.error().message();
            });
        EXPECT_EQ(seen, host);
    }
}

TEST_P(tls, alpn_refuses_a_client_with_no_common_protocol) {
    const auto server_ctx = the_pki().server();  // http/1.1 only
    const auto client_ctx = the_pki().client(client_options({"h2"}));
    std::error_code ec;
    run_pair(
        [&](tcp_stream s) -> task<void> {
            auto t = co_await tls_stream::accept(std::move(s), server_ctx);
            EXPECT_FALSE(t.has_value());
        },
        [&](weft::socket_address a) -> task<void> {
            auto tcp = (co_await tcp_stream::connect(a)).value();
            auto t = co_await tls_stream::connect(std::move(tcp), client_ctx, "localhost");
            ec = t ? std::error_code{} : t.error();
        });
    EXPECT_EQ(ec.category(), weft::openssl_category());
    EXPECT_NE(ec.message().find("no application protocol"), std::string::npos) << ec.message();
}

// A real OpenSSL peer against an accept loop: `openssl s_client` once per entry of `runs`
// with its arguments, `before_run(i)` called before run i; their outputs.
auto s_client(wt::backend_test& self,
              weft::runtime_options ro,
              const tls_context& server_ctx,
              const std::vector<std::vector<std::string>>& runs,
              const std::function<void(std::size_t)>& before_run = {})
    -> std::vector<wt::child_result> {
    (void)self;
    std::vector<wt::child_result> out;
    weft::runtime rt{ro};
    rt.block_on([&]() -> task<void> {
        auto l = weft::tcp_listener::bind(loopback()).value();
        const auto port = std::to_string(l.local_address().value().port());
        co_await weft::with_scope([&](weft::scope& s) -> task<void> {
            s.spawn([&]() -> task<void> {
                co_await weft::with_scope([&](weft::scope& conns) -> task<void> {
                    for (;;) {
                        auto c = co_await l.accept();
                        if (!c) {
                            co_return;
                        }
                        conns.spawn([](tcp_stream tcp, const tls_context& ctx) -> task<void> {
                            auto t = co_await tls_stream::accept(std::move(tcp), ctx);
                            if (t) {
                                (void)co_await t->write_all(as_bytes("hello from weft\n"));
                                (void)co_await t->shutdown();
                            }
                        }(std::move(*c), server_ctx));
                    }
                });
            });
            for (const auto& args : runs) {
                if (before_run) {
                    before_run(out.size());
                }
                // -ign_eof: read until the server closes (after its greeting, and after the
                // session ticket it sends once the handshake is done), not until stdin ends.
                std::vector<std::string> argv = {"openssl", "s_client", "-ign_eof", "-connect",
                                                 "127.0.0.1:" + port};
                argv.insert(argv.end(), args.begin(), args.end());
                auto r = co_await weft::spawn_blocking([&] { return wt::run_child(argv); });
                out.push_back(std::move(r).value());
            }
            s.request_stop();
        });
    }());
    return out;
}

TEST_P(tls, server_refuses_tls_1_0_and_1_1) {
    if (!wt::have_program("openssl")) {
        GTEST_SKIP() << "no openssl command";
    }
    const auto server_ctx = the_pki().server();
    // SECLEVEL=0: the client would otherwise refuse to offer the old versions itself.
    const auto runs = s_client(*this, options(), server_ctx,
                               {{"-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0"},
                                {"-tls1", "-cipher", "DEFAULT@SECLEVEL=0"},
                                {"-tls1_2"}});
    ASSERT_EQ(runs.size(), 3U);
    for (int i = 0; i < 2; ++i) {
        EXPECT_NE(runs[i].status, 0) << runs[i].output;
        EXPECT_NE(runs[i].output.find("alert protocol version"), std::string::npos)
            << runs[i].output;
        EXPECT_EQ(runs[i].output.find("hello from weft"), std::string::npos);
    }
    // The control: the same peer at TLS 1.2 is served.
    EXPECT_EQ(runs[2].status, 0) << runs[2].output;
    EXPECT_NE(runs[2].output.find("hello from weft"), std::string::npos) << runs[2].output;
}

TEST_P(tls, session_ticket_resumes) {
    if (!wt::have_program("openssl")) {
        GTEST_SKIP() << "no openssl command";
    }
    const auto server_ctx = the_pki().server();
    const auto sess = wt::write_temp_file("session.pem", "");
    const auto runs = s_client(*this, options(), server_ctx,
                               {{"-sess_out", sess.string()}, {"-sess_in", sess.string()}});
    ASSERT_EQ(runs.size(), 2U);
    EXPECT_NE(runs[0].output.find("New, TLSv1.3"), std::string::npos) << runs[0].output;
    EXPECT_NE(runs[1].output.find("Reused, TLSv1.3"), std::string::npos) << runs[1].output;
    std::filesystem::remove_all(sess.parent_path());
}

// An accept loop for `server_ctx` echoing on every connection it accepts, while `client(addr)`
// runs; the loop is stopped when the client is done.
template <typename Client>
void with_echo_server(weft::runtime_options ro, const tls_context& server_ctx, Client client) {
    weft::runtime rt{ro};
    rt.block_on([&]() -> task<void> {
        auto l = weft::tcp_listener::bind(loopback()).value();
        const auto addr = l.local_address().value();
        co_await weft::with_scope([&](weft::scope& s) -> task<void> {
            s.spawn([&]() -> task<void> {
                co_await weft::with_scope([&](weft::scope& conns) -> task<void> {
                    for (;;) {
                        auto c = co_await l.accept();
                        if (!c) {
                            co_return;
                        }
                        conns.spawn([](tcp_stream tcp, const tls_context& ctx) -> task<void> {
                            auto t = co_await tls_stream::accept(std::move(tcp), ctx);
                            std::array<std::byte, 1024> buf{};
                            while (t) {
                                auto n = co_await t->read_some(buf);
                                if (!n || !co_await t->write_all(std::span{buf}.first(*n))) {
                                    break;
                                }
                            }
                        }(std::move(*c), server_ctx));
                    }
                });
            });
            co_await client(addr);
            s.request_stop();
        });
    }());
}

// One round trip on `t`: `msg` written, as many bytes read back.
auto echo(tls_stream& t, std::string msg) -> task<std::string> {
    if (!co_await t.write_all(as_bytes(msg))) {
        co_return "";
    }
    std::string got;
    std::array<std::byte, 1024> buf{};
    while (got.size() < msg.size()) {
        auto n = co_await t.read_some(buf);
        if (!n) {
            break;
        }
        got.append(reinterpret_cast<const char*>(buf.data()), *n);
    }
    co_return got;
}

// The certificate served is told apart by trust: A is issued by the shared CA, B by another
// one, and each client trusts one CA only.
TEST_P(tls, reload_serves_the_new_certificate_to_new_connections_only) {
    const auto& a = the_pki();
    const auto ca_b = wt::make_ca("weft reload CA");
    const auto leaf_b = wt::make_leaf("localhost", &ca_b);
    auto server_ctx = a.server();
    const auto trusts_a = a.client();
    const auto trusts_b = [&] {
        weft::tls_client_options o;
        o.ca_pem = ca_b.cert_pem();
        return tls_context::client(o);
    }();
    std::vector<std::error_code> handshakes;  // in order: a, b, b, a, b, b
    std::vector<std::string> echoes;
    std::error_code mismatched;
    std::error_code garbage;
    with_echo_server(options(), server_ctx, [&](weft::socket_address addr) -> task<void> {
        auto open = [&](const tls_context& c) -> task<result<tls_stream>> {
            auto tcp = (co_await tcp_stream::connect(addr)).value();
            auto t = co_await tls_stream::connect(std::move(tcp), c, "localhost");
            handshakes.push_back(t ? std::error_code{} : t.error());
            co_return t;
        };
        auto before = co_await open(trusts_a);  // opened before the reload, kept open
        (void)co_await open(trusts_b);
        if (!before) {
            co_return;
        }
        echoes.push_back(co_await echo(*before, "one"));
        EXPECT_TRUE(server_ctx.reload(leaf_b.as_certificate()).has_value());
        auto after = co_await open(trusts_b);
        (void)co_await open(trusts_a);
        echoes.push_back(co_await echo(*before, "two"));  // the old connection still works
        // A reload that cannot be used is an error value, and B stays.
        auto r = server_ctx.reload({a.leaf.cert_pem(), leaf_b.key_pem()});
        mismatched = r ? std::error_code{} : r.error();
        r = server_ctx.reload({"not a certificate", "not a key"});
        garbage = r ? std::error_code{} : r.error();
        auto kept = co_await open(trusts_b);
        (void)co_await open(trusts_a);
        if (after && kept) {
            echoes.push_back(co_await echo(*after, "three"));
            echoes.push_back(co_await echo(*kept, "four"));
        }
    });
    const std::error_code unknown_issuer(X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY,
                                         weft::x509_verify_category());
    ASSERT_EQ(handshakes.size(), 6U);
    EXPECT_FALSE(handshakes[0]) << handshakes[0].message();  // A, to a client trusting A
    EXPECT_EQ(handshakes[1], unknown_issuer);                // A, to a client trusting B
    EXPECT_FALSE(handshakes[2]) << handshakes[2].message();  // reloaded: B
    EXPECT_EQ(handshakes[3], unknown_issuer);
    EXPECT_FALSE(handshakes[4]) << handshakes[4].message();  // failed reloads: still B
    EXPECT_EQ(handshakes[5], unknown_issuer);
    EXPECT_EQ(echoes, (std::vector<std::string>{"one", "two", "three", "four"}));
    EXPECT_EQ(mismatched.category(), weft::openssl_category()) << mismatched.message();
    EXPECT_NE(mismatched.message().find("key values mismatch"), std::string::npos)
        << mismatched.message();
    EXPECT_TRUE(garbage) << "a reload with no certificate succeeded";
}

TEST_P(tls, reload_keeps_the_session_ticket_keys) {
    if (!wt::have_program("openssl")) {
        GTEST_SKIP() << "no openssl command";
    }
    auto server_ctx = the_pki().server();
    const auto sess = wt::write_temp_file("session.pem", "");
    bool reloaded = false;
    const auto runs =
        s_client(*this, options(), server_ctx,
                 {{"-sess_out", sess.string()}, {"-sess_in", sess.string()}}, [&](std::size_t run) {
                     if (run == 1) {
                         reloaded = server_ctx.reload(the_pki().leaf.as_certificate()).has_value();
                     }
                 });
    std::filesystem::remove_all(sess.parent_path());
    EXPECT_TRUE(reloaded);
    ASSERT_EQ(runs.size(), 2U);
    EXPECT_NE(runs[0].output.find("New, TLSv1.3"), std::string::npos) << runs[0].output;
    EXPECT_NE(runs[1].output.find("Reused, TLSv1.3"), std::string::npos) << runs[1].output;
}

WEFT_TEST_ON_BOTH_BACKENDS(tls);

TEST(kernel_tls, reads_the_ulp_list) {
    EXPECT_FALSE(weft::detail::ulp_list_has_tls("mptcp\n"));
    EXPECT_TRUE(weft::detail::ulp_list_has_tls("mptcp tls\n"));
    EXPECT_TRUE(weft::detail::ulp_list_has_tls("tls"));
    EXPECT_FALSE(weft::detail::ulp_list_has_tls("tlsx xtls"));
    EXPECT_FALSE(weft::detail::ulp_list_has_tls(""));
    // The answer for this kernel is stable and reported (weft never switches kTLS on).
    EXPECT_EQ(weft::kernel_tls_available(), weft::kernel_tls_available());
}

TEST(tls_context, refuses_a_key_that_does_not_match) {
    const auto a = wt::make_leaf("localhost", nullptr);
    const auto b = wt::make_leaf("localhost", nullptr);
    try {
        (void)tls_context::server(server_options({a.cert_pem(), b.key_pem()}));
        ADD_FAILURE() << "accepted a key of another certificate";
    } catch (const std::system_error& e) {
        EXPECT_EQ(e.code().category(), weft::openssl_category());
        EXPECT_NE(std::string(e.what()).find("does not match"), std::string::npos) << e.what();
        EXPECT_NE(e.code().message().find("key values mismatch"), std::string::npos) << e.what();
    }
}

}  // namespace
