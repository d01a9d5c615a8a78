// http::client_pool against servers that are not weft's: Debian's nginx and a Go net/http
// server (interop_go/), which the CTest fixtures start on private ports (interop_servers.sh)
// with a test CA of their own. Per server: keep-alive reuse counted by the server, bodies byte
// for byte, a POST, a chunked body, redirects, a retry after the server closed an idle
// connection, HTTPS trusted and refused, and HTTP/2 over TLS (many requests as streams of one
// connection, bodies larger than the windows).

#include <gtest/gtest.h>
#include <openssl/x509_vfy.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "weft/core/scope.hpp"
#include "weft/http/client_pool.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"
#include "weft/tls/error.hpp"

namespace {

using namespace std::chrono_literals;
using weft::task;
namespace http = weft::http;

/// One fixture's server: its plain and TLS base URLs and the CA that issued its certificate.
struct peer {
    std::string name;
    int http_port;
    int https_port;

    [[nodiscard]] auto url(std::string_view path) const -> std::string {
        return "http://127.0.0.1:" + std::to_string(http_port) + std::string(path);
    }
    [[nodiscard]] auto secure_url(std::string_view path) const -> std::string {
        return "https://127.0.0.1:" + std::to_string(https_port) + std::string(path);
    }
    [[nodiscard]] auto ca_pem() const -> std::string {
        std::ifstream in(std::string(WEFT_INTEROP_DIR) + "/" + name + "/tls/ca.pem");
        std::ostringstream s;
        s << in.rdbuf();
        return s.str();
    }
};

const peer nginx{"nginx", WEFT_INTEROP_NGINX_PORT, WEFT_INTEROP_NGINX_PORT + 1};
const peer go{"go", WEFT_INTEROP_GO_PORT, WEFT_INTEROP_GO_PORT + 1};

auto describe(const weft::result<http::client_response>& r) -> std::string {
    return r ? "status " + std::to_string(r->status) : r.error().message();
}

/// nginx's stub_status "accepts" count (worker_processes 1: every connection it took).
auto nginx_accepts(http::client_pool& pool) -> task<long> {
    auto r = co_await pool.get(nginx.url("/status"));
    if (!r || r->status != 200) {
        ADD_FAILURE() << "/status: " << describe(r);
        co_return -1;
    }
    std::istringstream in(r->body);
    std::string line;
    std::getline(in, line);  // Active connections: N
    std::getline(in, line);  // server accepts handled requests
    long accepts = -1;
    in >> accepts;
    co_return accepts;
}

/// nginx's stub_status "Active connections" (the one asking included).
auto nginx_active(http::client_pool& pool) -> task<long> {
    auto r = co_await pool.get(nginx.url("/status"));
    if (!r || r->status != 200) {
        ADD_FAILURE() << "/status: " << describe(r);
        co_return -1;
    }
    const auto colon = r->body.find(':');
    co_return colon == std::string::npos ? -1 : std::stol(r->body.substr(colon + 1));
}

auto go_conns(http::client_pool& pool) -> task<long> {
    auto r = co_await pool.get(go.url("/conns"));
    if (!r || r->status != 200) {
        ADD_FAILURE() << "/conns: " << describe(r);
        co_return -1;
    }
    co_return std::stol(r->body);
}

auto expected_sub_body() -> std::string {
    std::string out;
    for (int i = 1; i <= 2000; ++i) {
        out += "line " + std::to_string(i) + ": hello nginx\n";
    }
    return out;
}

auto expected_go_chunks() -> std::string {
    std::string out;
    for (int i = 0; i < 10; ++i) {
        out += "part " + std::to_string(i) + " of a streamed body\n";
    }
    return out;
}

/// Every printable byte, spaces inside: nginx's echo carries the body in a header, whose
/// value may hold no CR or LF and loses whitespace at its ends.
auto printable_body() -> std::string {
    std::string out;
    for (int i = 0; i < 3; ++i) {
        for (int c = 0x21; c < 0x7f; ++c) {
            out += static_cast<char>(c);
        }
        out += ' ';
    }
    out += "end";
    return out;
}

/// `n` bytes of every value in an order no shifted, repeated or dropped piece passes for.
auto patterned(std::size_t n) -> std::string {
    std::string out(n, '\0');
    std::uint32_t x = 2463534242U;  // xorshift32
    for (char& c : out) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        c = static_cast<char>(x);
    }
    return out;
}

auto file_bytes(const std::string& path) -> std::string {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// ---- nginx ----------------------------------------------------------------------------------

TEST(client_interop_nginx, keep_alive_reuses_one_connection_counted_by_nginx) {
    weft::runtime rt;
    http::client_pool pool;
    rt.block_on([&]() -> task<void> {
        const long before = co_await nginx_accepts(pool);
        for (int i = 0; i < 5; ++i) {
            auto r = co_await pool.get(nginx.url("/static/hello.txt"));
            EXPECT_TRUE(r && r->status == 200) << describe(r);
        }
        const long after = co_await nginx_accepts(pool);
        EXPECT_EQ(after, before);  // no connection accepted past the first
    }());
    EXPECT_EQ(pool.stats().connections_opened, 1U);
    EXPECT_EQ(pool.stats().requests, 7U);
}

TEST(client_interop_nginx, static_file_byte_for_byte_and_post_body_received) {
    weft::runtime rt;
    http::client_pool pool;
    rt.block_on([&]() -> task<void> {
        auto r = co_await pool.get(nginx.url("/static/hello.txt"));
        EXPECT_TRUE(r && r->status == 200) << describe(r);
        if (!(r && r->status == 200)) {
            co_return;
        }
        EXPECT_EQ(r->body, "hello from nginx\n");
        EXPECT_FALSE(r->chunked);
        EXPECT_EQ(r->header("Content-Length"), "17");
        const std::string body = printable_body();
        auto e = co_await pool.post(nginx.url("/echo"), body, "application/octet-stream");
        EXPECT_TRUE(e && e->status == 200) << describe(e);
        if (!(e && e->status == 200)) {
            co_return;
        }
        EXPECT_EQ(e->body, body);
    }());
}

TEST(client_interop_nginx, chunked_body_from_sub_filter_is_decoded) {
    weft::runtime rt;
    http::client_pool pool;
    rt.block_on([&]() -> task<void> {
        for (int i = 0; i < 2; ++i) {  // the second on the same connection: the framing ended
            auto r = co_await pool.get(nginx.url("/sub/big.txt"));
            EXPECT_TRUE(r && r->status == 200) << describe(r);
            if (!(r && r->status == 200)) {
                co_return;
            }
            EXPECT_TRUE(r->chunked);
            EXPECT_EQ(r->body, expected_sub_body());
        }
    }());
    EXPECT_EQ(pool.stats().connections_opened, 1U);
}

TEST(client_interop_nginx, redirects_followed_when_enabled_and_bounded) {
    weft::runtime rt;
    http::client_pool off;
    http::client_pool on{{.max_redirects = 3}};
    rt.block_on([&]() -> task<void> {
        auto r = co_await off.get(nginx.url("/moved"));
        EXPECT_TRUE(r && r->status == 301) << describe(r);
        auto followed = co_await on.get(nginx.url("/moved"));
        EXPECT_TRUE(followed && followed->status == 200 && followed->body == "hello from nginx\n")
            << describe(followed);
        auto loop = co_await on.get(nginx.url("/loop"));
        EXPECT_FALSE(loop);
        if (loop) {
            co_return;
        }
        EXPECT_EQ(loop.error(), http::client_errc::too_many_redirects);
    }());
}

TEST(client_interop_nginx, keepalive_requests_close_is_honoured) {
    weft::runtime rt;
    http::client_pool pool;
    rt.block_on([&]() -> task<void> {
        for (int i = 0; i < 6; ++i) {
            auto r = co_await pool.get(nginx.url("/limited/hello.txt"));
            EXPECT_TRUE(r && r->status == 200 && r->body == "hello from nginx\n") << describe(r);
            if (!(r && r->status == 200 && r->body == "hello from nginx\n")) {
                co_return;
            }
            EXPECT_EQ(r->keep_alive, i % 2 == 0) << i;  // every second answer says close
        }
    }());
    EXPECT_EQ(pool.stats().connections_opened, 3U);  // two requests per connection
    EXPECT_EQ(pool.stats().retries, 0U);             // announced closes need no retry
}

TEST(client_interop_nginx, idle_connection_closed_by_nginx_is_retried) {
    weft::runtime rt;
    http::client_pool pool;
    rt.block_on([&]() -> task<void> {
        auto first = co_await pool.get(nginx.url("/short-idle/hello.txt"));
        EXPECT_TRUE(first && first->status == 200 && first->keep_alive) << describe(first);
        if (!(first && first->status == 200 && first->keep_alive)) {
            co_return;
        }
        // Until nginx closed it (its 300 ms keepalive_timeout there): the connections nginx
        // holds open are then the observer's alone.
        http::client_pool observer;
        while (co_await nginx_active(observer) != 1) {
            (void)co_await weft::sleep_for(50ms);
        }
        auto again = co_await pool.get(nginx.url("/short-idle/hello.txt"));
        EXPECT_TRUE(again && again->status == 200 && again->body == "hello from nginx\n")
            << describe(again);
    }());
    EXPECT_EQ(pool.stats().connections_opened, 2U);
    EXPECT_EQ(pool.stats().retries, 1U);
}

TEST(client_interop_nginx, https_with_the_test_ca_and_refused_without) {
    weft::runtime rt;
    http::client_pool trusted{{.tls = {.ca_pem = nginx.ca_pem(), .alpn = {"http/1.1"}}}};
    http::client_pool system_roots;
    rt.block_on([&]() -> task<void> {
        for (int i = 0; i < 3; ++i) {
            auto r = co_await trusted.get(nginx.secure_url("/static/hello.txt"));
            EXPECT_TRUE(r && r->status == 200 && r->body == "hello from nginx\n") << describe(r);
        }
        auto refused = co_await system_roots.get(nginx.secure_url("/static/hello.txt"));
        EXPECT_FALSE(refused);
        if (refused) {
            co_return;
        }
        EXPECT_EQ(refused.error().category(), weft::x509_verify_category())
            << refused.error().message();
        EXPECT_EQ(refused.error().value(), X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY)
            << refused.error().message();
    }());
    EXPECT_EQ(trusted.stats().connections_opened, 1U);
}

TEST(client_interop_nginx, h2_fifty_concurrent_requests_and_large_bodies_on_one_connection) {
    weft::runtime rt;
    http::client_pool pool{{.tls = {.ca_pem = nginx.ca_pem()}}};  // offers h2 and http/1.1
    const std::string file =
        file_bytes(std::string(WEFT_INTEROP_DIR) + "/nginx/root/static/large.bin");
    const std::string up = patterned(std::size_t{4} << 20);
    int ok = 0;
    std::string downloaded;
    std::string stored;
    rt.block_on([&]() -> task<void> {
        const long before = co_await nginx_accepts(pool);  // plain http: its own connection
        co_await weft::with_scope([&](weft::scope& s) -> task<void> {
            for (int i = 0; i < 50; ++i) {
                s.spawn([&]() -> task<void> {
                    auto r = co_await pool.get(nginx.secure_url("/static/hello.txt"));
                    if (r && r->status == 200 && r->http2 && r->body == "hello from nginx\n") {
                        ++ok;
                    }
                });
            }
            co_return;
        });
        // Larger than the windows: read as it arrives, each read opening the window again.
        http::client_request s_req{.url = nginx.secure_url("/static/large.bin")};
        auto s = co_await pool.open(std::move(s_req));
        EXPECT_TRUE(s && s->response().http2) << (s ? "" : s.error().message());
        if (s) {
            auto body = co_await s->read_all();
            downloaded = body ? std::move(*body) : std::string{};
        }
        // Two uploads larger than nginx's windows in turn, each stored by nginx and read back.
        const std::array<std::string, 2> names{"/put/one.bin", "/put/two.bin"};
        for (const std::string& name : names) {
            http::client_request put_req{
                .method = "PUT", .url = nginx.secure_url(name), .body = up};
            auto put = co_await pool.request(std::move(put_req));
            EXPECT_TRUE(put && put->http2 && (put->status == 201 || put->status == 204))
                << describe(put);
            auto back = co_await pool.get(nginx.secure_url(name));
            EXPECT_TRUE(back && back->status == 200) << describe(back);
            stored += back ? back->body : std::string{};
        }
        const long after = co_await nginx_accepts(pool);
        EXPECT_EQ(after, before + 1);  // one TLS connection for the 55 requests
    }());
    EXPECT_EQ(ok, 50);
    EXPECT_EQ(file.size(), std::size_t{4} << 20);
    EXPECT_TRUE(downloaded == file) << downloaded.size() << " bytes, not the file's";
    EXPECT_TRUE(stored == up + up) << stored.size() << " bytes, not the two uploads";
    EXPECT_EQ(pool.stats().http2_connections, 1U);
}

// ---- Go net/http ----------------------------------------------------------------------------

TEST(client_interop_go, keep_alive_reuses_one_connection_counted_by_go) {
    weft::runtime rt;
    http::client_pool pool;
    rt.block_on([&]() -> task<void> {
        const long before = co_await go_conns(pool);
        for (int i = 0; i < 5; ++i) {
            auto r = co_await pool.get(go.url("/hello"));
            EXPECT_TRUE(r && r->status == 200) << describe(r);
        }
        const long after = co_await go_conns(pool);
        EXPECT_EQ(after, before);
    }());
    EXPECT_EQ(pool.stats().connections_opened, 1U);
    EXPECT_EQ(pool.stats().requests, 7U);
}

TEST(client_interop_go, hello_byte_for_byte_and_post_echoed) {
    weft::runtime rt;
    http::client_pool pool;
    rt.block_on([&]() -> task<void> {
        auto r = co_await pool.get(go.url("/hello"));
        EXPECT_TRUE(r && r->status == 200) << describe(r);
        if (!(r && r->status == 200)) {
            co_return;
        }
        EXPECT_EQ(r->body, "hello from go\n");
        EXPECT_EQ(r->header("Content-Length"), "14");
        std::string body;
        for (int i = 0; i < 200000; ++i) {  // every byte value, CR and LF and NUL too
            body += static_cast<char>(i * 7 % 256);
        }
        auto e = co_await pool.post(go.url("/echo"), body, "application/octet-stream");
        EXPECT_TRUE(e && e->status == 200) << describe(e);
        if (!(e && e->status == 200)) {
            co_return;
        }
        EXPECT_EQ(e->body.size(), body.size());
        EXPECT_TRUE(e->body == body);
    }());
    EXPECT_EQ(pool.stats().connections_opened, 1U);
}

TEST(client_interop_go, flushed_stream_is_decoded_as_chunks) {
    weft::runtime rt;
    http::client_pool pool;
    rt.block_on([&]() -> task<void> {
        for (int i = 0; i < 2; ++i) {
            auto r = co_await pool.get(go.url("/chunked"));
            EXPECT_TRUE(r && r->status == 200) << describe(r);
            if (!(r && r->status == 200)) {
                co_return;
            }
            EXPECT_TRUE(r->chunked);
            EXPECT_EQ(r->body, expected_go_chunks());
        }
    }());
    EXPECT_EQ(pool.stats().connections_opened, 1U);
}

TEST(client_interop_go, redirect_chain_followed_within_the_bound) {
    weft::runtime rt;
    http::client_pool off;
    http::client_pool on{{.max_redirects = 4}};
    rt.block_on([&]() -> task<void> {
        auto r = co_await off.get(go.url("/redirect/2"));
        EXPECT_TRUE(r && r->status == 302 && r->header("Location") == "/redirect/1") << describe(r);
        auto followed = co_await on.get(go.url("/redirect/3"));  // 4 redirects: the bound
        EXPECT_TRUE(followed && followed->status == 200 && followed->body == "hello from go\n")
            << describe(followed);
        auto too_long = co_await on.get(go.url("/redirect/4"));  // 5 redirects
        EXPECT_FALSE(too_long);
        if (too_long) {
            co_return;
        }
        EXPECT_EQ(too_long.error(), http::client_errc::too_many_redirects);
        auto loop = co_await on.get(go.url("/loop"));
        EXPECT_FALSE(loop);
        if (loop) {
            co_return;
        }
        EXPECT_EQ(loop.error(), http::client_errc::too_many_redirects);
    }());
}

TEST(client_interop_go, connection_close_opens_a_new_connection_without_retry) {
    weft::runtime rt;
    http::client_pool pool;
    rt.block_on([&]() -> task<void> {
        for (int i = 0; i < 3; ++i) {
            auto r = co_await pool.get(go.url("/close"));
            EXPECT_TRUE(r && r->status == 200 && r->body == "closing") << describe(r);
            if (!(r && r->status == 200 && r->body == "closing")) {
                co_return;
            }
            EXPECT_FALSE(r->keep_alive);
        }
    }());
    EXPECT_EQ(pool.stats().connections_opened, 3U);
    EXPECT_EQ(pool.stats().retries, 0U);
}

TEST(client_interop_go, unannounced_close_of_an_idle_connection_is_retried_for_get) {
    weft::runtime rt;
    http::client_pool pool;
    rt.block_on([&]() -> task<void> {
        auto dropped = co_await pool.get(go.url("/drop"));
        EXPECT_TRUE(dropped && dropped->status == 200 && dropped->body == "dropped")
            << describe(dropped);
        if (!(dropped && dropped->status == 200 && dropped->body == "dropped")) {
            co_return;
        }
        EXPECT_TRUE(dropped->keep_alive);  // said nothing of the close that follows
        auto r = co_await pool.get(go.url("/hello"));
        EXPECT_TRUE(r && r->status == 200 && r->body == "hello from go\n") << describe(r);
        auto dropped_again = co_await pool.get(go.url("/drop"));
        EXPECT_TRUE(dropped_again) << describe(dropped_again);
        if (!(dropped_again)) {
            co_return;
        }
        auto post = co_await pool.post(go.url("/echo"), "not idempotent", "text/plain");
        EXPECT_FALSE(post);  // a POST is not sent twice: the caller gets the error
    }());
    EXPECT_EQ(pool.stats().retries, 1U);
    EXPECT_EQ(pool.stats().connections_opened, 2U);  // the dropped one and the retry's
}

TEST(client_interop_go, https_with_the_test_ca_and_refused_without) {
    weft::runtime rt;
    http::client_pool trusted{{.tls = {.ca_pem = go.ca_pem(), .alpn = {"http/1.1"}}}};
    http::client_pool system_roots;
    rt.block_on([&]() -> task<void> {
        const long before = co_await go_conns(trusted);  // plain http: its own connection
        for (int i = 0; i < 3; ++i) {
            auto r = co_await trusted.get(go.secure_url("/hello"));
            EXPECT_TRUE(r && r->status == 200 && r->body == "hello from go\n") << describe(r);
        }
        const long after = co_await go_conns(trusted);
        EXPECT_EQ(after, before + 1);  // one TLS connection for the three requests
        auto refused = co_await system_roots.get(go.secure_url("/hello"));
        EXPECT_FALSE(refused);
        if (refused) {
            co_return;
        }
        EXPECT_EQ(refused.error().category(), weft::x509_verify_category())
            << refused.error().message();
        EXPECT_EQ(refused.error().value(), X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY)
            << refused.error().message();
    }());
    EXPECT_EQ(trusted.stats().connections_opened, 2U);  // the http origin and the https one
}

TEST(client_interop_go, h2_fifty_concurrent_requests_and_large_bodies_on_one_connection) {
    weft::runtime rt;
    http::client_pool pool{{.tls = {.ca_pem = go.ca_pem()}}};  // offers h2 and http/1.1
    int ok = 0;
    const std::string up = patterned(std::size_t{4} << 20);  // many of Go's windows
    constexpr std::size_t piece = 64 * 1024;
    std::string streamed;
    std::string whole;
    rt.block_on([&]() -> task<void> {
        const long before = co_await go_conns(pool);  // plain http: its own connection
        co_await weft::with_scope([&](weft::scope& s) -> task<void> {
            for (int i = 0; i < 50; ++i) {
                s.spawn([&]() -> task<void> {
                    auto r = co_await pool.get(go.secure_url("/hello"));
                    if (r && r->status == 200 && r->http2 && r->body == "hello from go\n") {
                        ++ok;
                    }
                });
            }
            co_return;
        });
        // The same bytes uploaded twice in turn, produced piece by piece then given whole; Go
        // echoes each (a download as large).
        http::client_request r_req{
            .method = "POST",
            .url = go.secure_url("/echo"),
            .body_stream = [&,
                            at = std::size_t{0}]() mutable -> task<weft::result<std::string_view>> {
                const std::string_view next = std::string_view{up}.substr(at, piece);
                at += next.size();
                co_return next;
            }};
        auto r = co_await pool.request(std::move(r_req));
        EXPECT_TRUE(r && r->status == 200 && r->http2) << describe(r);
        streamed = r ? std::move(r->body) : std::string{};
        auto w = co_await pool.post(go.secure_url("/echo"), up, "application/octet-stream");
        EXPECT_TRUE(w && w->status == 200 && w->http2) << describe(w);
        whole = w ? std::move(w->body) : std::string{};
        const long after = co_await go_conns(pool);
        EXPECT_EQ(after, before + 1);  // one TLS connection for the 52 requests
    }());
    EXPECT_EQ(ok, 50);
    EXPECT_TRUE(streamed == up) << streamed.size() << " bytes echoed, not the upload";
    EXPECT_TRUE(whole == up) << whole.size() << " bytes echoed, not the upload";
    EXPECT_EQ(pool.stats().http2_connections, 1U);
}

}  // namespace
