// client_pool over HTTP/2 (h2 agreed by ALPN over TLS), on both backends: against weft's own
// server (many requests as streams of one connection, the server's stream limit, a stream
// reset, bodies larger than the windows both ways) and against scripted servers written at
// the level of frames (GOAWAY with requests above its last stream, a connection lost with
// requests in flight).

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "backend_test.hpp"
#include "h2_peer.hpp"
#include "tls/cert_factory.hpp"
#include "weft/core/scope.hpp"
#include "weft/http/client_pool.hpp"
#include "weft/http/server.hpp"
#include "weft/io/tcp_listener.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"
#include "weft/sched/yield.hpp"
#include "weft/sync/event.hpp"
#include "weft/testing/sim_network.hpp"
#include "weft/testing/test_clock.hpp"
#include "weft/tls/tls_stream.hpp"

namespace weft::http::test {
namespace {

using namespace std::chrono_literals;
namespace wt = weft::test;

// What a request's result holds until the request has answered (a result's error is never
// empty: an empty code fails result's own assertion).
const std::error_code unanswered = std::make_error_code(std::errc::no_message);
constexpr std::size_t large = 4 * 1024 * 1024;  // many windows (64 KiB to 1 MiB) of either side

template <typename Ready>
auto until(Ready ready) -> task<void> {
    while (!ready()) {
        co_await yield();
    }
}

auto listen_any() -> tcp_listener {
    return tcp_listener::bind(socket_address::parse("127.0.0.1", 0).value()).value();
}

class h2_client : public wt::backend_test {
protected:
    wt::issued_cert ca_ = wt::make_ca("weft h2 client CA");
    wt::issued_cert leaf_ = wt::make_leaf("localhost", &ca_);
    std::atomic<int> waiting_{0};
    event release_;
    server_stats stats_;

    auto pool_options() -> client_options { return {.tls = {.ca_pem = ca_.cert_pem()}}; }

    void routes(server& srv) {
        srv.route(method::get, "/",
                  [](request&) -> task<response> { co_return response::text("hello"); });
        srv.route(method::get, "/wait", [this](request&) -> task<response> {
            waiting_.fetch_add(1);
            (void)co_await release_.wait();
            co_return response::text("released");
        });
        srv.route(method::post, "/upload",
                  [](request& req) -> task<response> {
                      std::size_t n = 0;
                      for (;;) {
                          auto piece = co_await req.body().read();
                          if (!piece) {
                              co_return response::text("read failed", 500);
                          }
                          if (piece->empty()) {
                              break;
                          }
                          n += piece->size();
                      }
                      co_return response::text(std::to_string(n));
                  },
                  {.body_limit = 2 * large});
        srv.route(method::get, "/large", [](request&) -> task<response> {
            co_return response::text(std::string(large, 'z'));
        });
        srv.route(method::get, "/reset", [](request&) -> task<response> {
            // A producer that fails after its first piece: the server resets the stream.
            co_return response::stream([](body_writer& w) -> task<result<void>> {
                (void)co_await w.write(std::string(1024, 'r'));
                throw std::runtime_error("a producer's failure, on purpose");
            });
        });
    }

    /// Runs `body(base_url)` beside weft's server over TLS offering h2 and http/1.1.
    template <typename Body>
    void run(runtime& rt, server_options o, Body body) {
        tls_server_options to;
        to.certificate = leaf_.as_certificate();
        to.alpn = {"h2", "http/1.1"};
        o.tls = tls_context::server(to);
        rt.block_on([&]() -> task<void> {
            server srv{std::move(o)};
            routes(srv);
            auto l = listen_any();
            const std::string base =
                "https://localhost:" + std::to_string(l.local_address().value().port());
            co_await with_scope([&](scope& s) -> task<void> {
                s.spawn(srv.serve(l));
                co_await body(base);
                release_.set();
                co_await srv.shutdown();
            });
            stats_ = srv.stats();
        }());
    }
};

TEST_P(h2_client, fifty_concurrent_requests_are_streams_of_one_connection) {
    runtime rt{options()};
    client_pool pool{pool_options()};
    std::atomic<int> ok{0};  // counted on every worker
    run(rt, {}, [&](std::string base) -> task<void> {
        co_await with_scope([&](scope& s) -> task<void> {
            for (int i = 0; i < 50; ++i) {
                s.spawn([&]() -> task<void> {
                    auto r = co_await pool.get(base + "/wait");
                    if (r && r->status == 200 && r->body == "released") {
                        ++ok;
                    }
                });
            }
            // Every handler runs at once: all 50 are open streams together.
            co_await until([&] { return waiting_.load() == 50; });
            release_.set();
        });
    });
    EXPECT_EQ(ok.load(), 50);
    EXPECT_EQ(stats_.accepted, 1U);
    EXPECT_EQ(pool.stats().connections_opened, 1U);
    EXPECT_EQ(pool.stats().http2_connections, 1U);
}

TEST_P(h2_client, a_stream_reset_fails_its_request_alone) {
    runtime rt{options()};
    client_pool pool{pool_options()};
    std::error_code reset;
    std::atomic<int> ok{0};  // counted on every worker
    run(rt, {}, [&](std::string base) -> task<void> {
        co_await with_scope([&](scope& s) -> task<void> {
            s.spawn([&]() -> task<void> {
                auto r = co_await pool.get(base + "/reset");
                reset = r ? std::error_code{} : r.error();
            });
            for (int i = 0; i < 5; ++i) {
                s.spawn([&]() -> task<void> {
                    if (auto r = co_await pool.get(base + "/"); r && r->body == "hello") {
                        ++ok;
                    }
                });
            }
            co_return;
        });
        auto after = co_await pool.get(base + "/");  // the connection is still in service
        EXPECT_TRUE(after && after->body == "hello");
    });
    EXPECT_EQ(reset, std::errc::connection_reset);
    EXPECT_EQ(ok.load(), 5);
    EXPECT_EQ(stats_.accepted, 1U);
}

TEST_P(h2_client, bodies_larger_than_the_windows_go_both_ways) {
    runtime rt{options()};
    client_pool pool{pool_options()};
    const std::string piece(64 * 1024, 'u');
    std::size_t downloaded = 0;
    int pieces = 0;
    run(rt, {}, [&](std::string base) -> task<void> {
        client_request up_req{
            .method = "POST",
            .url = base + "/upload",
            .body_stream = [&, n = std::size_t{0}]() mutable -> task<result<std::string_view>> {
                co_return n++ < large / piece.size() ? std::string_view{piece} : std::string_view{};
            }};
        auto up = co_await pool.request(std::move(up_req));
        EXPECT_TRUE(up && up->body == std::to_string(large)) << (up ? up->body : "");
        auto whole = co_await pool.post(base + "/upload", std::string(large, 'w'), "text/plain");
        EXPECT_TRUE(whole && whole->body == std::to_string(large));
        client_request down_req{.url = base + "/large"};
        auto down = co_await pool.open(std::move(down_req));
        EXPECT_TRUE(down);
        for (;;) {
            auto p = co_await down->read();
            EXPECT_TRUE(p);
            if (!p || p->empty()) {
                break;
            }
            downloaded += p->size();
            ++pieces;
        }
    });
    EXPECT_EQ(downloaded, large);
    EXPECT_GT(pieces, 1);
    EXPECT_EQ(stats_.accepted, 1U);
}

TEST_P(h2_client, http11_only_offer_stays_on_http11) {
    auto o = pool_options();
    o.http2 = false;
    runtime rt{options()};
    client_pool pool{o};
    run(rt, {}, [&](std::string base) -> task<void> {
        auto r = co_await pool.get(base + "/");
        EXPECT_TRUE(r && !r->http2 && r->body == "hello");
    });
    EXPECT_EQ(pool.stats().http2_connections, 0U);
}

// ---- scripted servers ----------------------------------------------------------------------

/// A TLS server speaking h2 at the level of frames: every accepted connection runs
/// `script(index, peer)` after the prefaces (the client's read, an empty SETTINGS sent).
class frame_server {
public:
    using script = std::function<task<void>(int, tls_stream&, frame_server&)>;

    /// `entries`: the server's SETTINGS, sent first on every connection.
    explicit frame_server(const wt::issued_cert& leaf,
                          std::vector<std::pair<std::uint16_t, std::uint32_t>> entries = {})
        : hello_(settings(std::move(entries))) {
        tls_server_options to;
        to.certificate = leaf.as_certificate();
        to.alpn = {"h2"};
        ctx_.emplace(tls_context::server(to));
    }

    tcp_listener listener = listen_any();
    std::atomic<int> accepted{0};
    std::atomic<int> headers{0};  // request HEADERS received, all connections

    [[nodiscard]] auto url(std::string_view path) const -> std::string {
        return "https://localhost:" + std::to_string(listener.local_address().value().port()) +
               std::string(path);
    }

    auto serve(script sc) -> task<void> { return serve_from(listener, std::move(sc)); }

    /// serve() from another listener: a simulated network's (byte_listener).
    template <typename Listener>
    auto serve_from(Listener& l, script sc) -> task<void> {
        co_await with_scope([&](scope& s) -> task<void> {
            for (;;) {
                auto c = co_await l.accept();
                if (!c) {
                    co_return;
                }
                const int index = accepted.fetch_add(1);
                s.spawn(run_script(*this, sc, index, std::move(*c)));
            }
        });
    }

    /// The next frame from the client (the preface skipped, SETTINGS acknowledged, request
    /// HEADERS counted); nullopt when it closed.
    static auto next(tls_stream& t, std::string& buf, frame_server& self)
        -> task<std::optional<h2_frame>> {
        for (;;) {
            if (buf.starts_with("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")) {
                buf.erase(0, 24);
            }
            if (buf.size() >= 9 && !buf.starts_with("PRI ")) {
                const std::size_t len = (std::size_t{static_cast<std::uint8_t>(buf[0])} << 16) |
                                        (std::size_t{static_cast<std::uint8_t>(buf[1])} << 8) |
                                        static_cast<std::uint8_t>(buf[2]);
                if (buf.size() >= 9 + len) {
                    h2_frame f;
                    f.type = static_cast<std::uint8_t>(buf[3]);
                    f.flags = static_cast<std::uint8_t>(buf[4]);
                    f.stream = static_cast<std::int32_t>(get_u32(buf, 5) & 0x7fffffffU);
                    f.payload = buf.substr(9, len);
                    buf.erase(0, 9 + len);
                    if (f.type == f_settings && (f.flags & ack) == 0) {
                        const std::string acked = frame(f_settings, ack, 0, "");
                        (void)co_await t.write_all(std::as_bytes(std::span{acked}));
                    }
                    if (f.type == f_headers) {
                        self.headers.fetch_add(1);
                    }
                    co_return f;
                }
            }
            auto got = co_await t.receive();
            if (!got) {
                co_return std::nullopt;
            }
            buf.append(reinterpret_cast<const char*>(got->data()), got->size());
        }
    }

    /// A 200 response with `body` on `stream` (":status: 200" is HPACK static entry 8).
    static auto answer(tls_stream& t, std::int32_t stream, std::string_view body) -> task<bool> {
        const std::string out =
            frame(f_headers, end_headers, stream, "\x88") + frame(f_data, end_stream, stream, body);
        co_return static_cast<bool>(co_await t.write_all(std::as_bytes(std::span{out})));
    }

    /// A 200 response's HEADERS and `body` as DATA without END_STREAM: the response is open.
    static auto begin(tls_stream& t, std::int32_t stream, std::string_view body) -> task<bool> {
        const std::string out =
            frame(f_headers, end_headers, stream, "\x88") + frame(f_data, 0, stream, body);
        co_return static_cast<bool>(co_await t.write_all(std::as_bytes(std::span{out})));
    }

    /// The rest of an open response: `body` with END_STREAM.
    static auto end(tls_stream& t, std::int32_t stream, std::string_view body) -> task<bool> {
        const std::string out = frame(f_data, end_stream, stream, body);
        co_return static_cast<bool>(co_await t.write_all(std::as_bytes(std::span{out})));
    }

    /// Sends `bytes` as they are.
    static auto send(tls_stream& t, std::string_view bytes) -> task<bool> {
        co_return static_cast<bool>(co_await t.write_all(std::as_bytes(std::span{bytes})));
    }

private:
    template <typename Stream>
    static auto run_script(frame_server& self, script sc, int i, Stream raw) -> task<void> {
        auto t = co_await tls_stream::accept(std::move(raw), *self.ctx_);
        if (!t) {
            co_return;
        }
        if (!co_await t->write_all(std::as_bytes(std::span{self.hello_}))) {
            co_return;
        }
        co_await sc(i, *t, self);
    }

    std::string hello_;
    std::optional<tls_context> ctx_;
};

template <typename Body>
auto beside(frame_server& server, frame_server::script sc, Body body) -> task<void> {
    co_await with_scope([&](scope& s) -> task<void> {
        s.spawn(server.serve(std::move(sc)));
        co_await body();
        s.request_stop();
    });
}

/// Answers every request HEADERS with 200 `body`, until the client closes.
auto answer_all(std::string body) -> frame_server::script {
    return [body](int, tls_stream& t, frame_server& self) -> task<void> {
        std::string buf;
        while (auto f = co_await frame_server::next(t, buf, self)) {
            if (f->type == f_headers && !co_await frame_server::answer(t, f->stream, body)) {
                co_return;
            }
        }
    };
}

TEST_P(h2_client, goaway_mid_response_retries_idempotent_requests_above_its_last_stream) {
    runtime rt{options()};
    frame_server server{leaf_};
    client_pool pool{pool_options()};
    // The first connection: once three requests came, the first's response begun, GOAWAY
    // naming the first as the last it processes, then the first's response ended; the next
    // connections answer everything.
    auto script = [](int i, tls_stream& t, frame_server& self) -> task<void> {
        if (i > 0) {
            co_await answer_all("two")(i, t, self);
            co_return;
        }
        std::string buf;
        std::vector<std::int32_t> ids;
        while (ids.size() < 3) {
            auto f = co_await frame_server::next(t, buf, self);
            if (!f) {
                co_return;
            }
            if (f->type == f_headers) {
                ids.push_back(f->stream);
            }
        }
        if (!co_await frame_server::begin(t, ids[0], "o") ||
            !co_await frame_server::send(t, frame(f_goaway, 0, 0, u32(ids[0]) + u32(0))) ||
            !co_await frame_server::end(t, ids[0], "ne")) {
            co_return;
        }
        while (co_await frame_server::next(t, buf, self)) {
        }
    };
    result<client_response> first = unanswered;
    result<client_response> post = unanswered;
    result<client_response> get = unanswered;
    rt.block_on(beside(server, script, [&]() -> task<void> {
        co_await with_scope([&](scope& s) -> task<void> {
            s.spawn([&]() -> task<void> { first = co_await pool.get(server.url("/1")); });
            co_await until([&] { return server.headers.load() == 1; });
            s.spawn([&]() -> task<void> {
                post = co_await pool.post(server.url("/2"), "once", "text/plain");
            });
            s.spawn([&]() -> task<void> { get = co_await pool.get(server.url("/3")); });
            co_return;
        });
    }));
    EXPECT_TRUE(first && first->body == "one");
    EXPECT_EQ(post.error(), client_errc::unprocessed);  // never sent twice
    EXPECT_TRUE(get && get->body == "two") << (get ? "" : get.error().message());
    EXPECT_EQ(server.accepted.load(), 2);
    EXPECT_EQ(pool.stats().retries, 1U);
}

TEST_P(h2_client, a_lost_connection_fails_every_request_in_flight) {
    runtime rt{options()};
    frame_server server{leaf_};
    client_pool pool{pool_options()};
    auto script = [](int, tls_stream& t, frame_server& self) -> task<void> {
        std::string buf;
        while (self.headers.load() < 3) {
            if (!co_await frame_server::next(t, buf, self)) {
                co_return;
            }
        }
        // Returns: the connection is closed with the three unanswered.
    };
    std::atomic<int> failed{0};
    rt.block_on(beside(server, script, [&]() -> task<void> {
        co_await with_scope([&](scope& s) -> task<void> {
            for (int i = 0; i < 3; ++i) {
                s.spawn([&]() -> task<void> {
                    if (!co_await pool.get(server.url("/"))) {
                        failed.fetch_add(1);
                    }
                });
            }
            co_return;
        });
    }));
    EXPECT_EQ(failed.load(), 3);
    EXPECT_EQ(server.accepted.load(), 1);  // not retried: they may have been processed
}

TEST_P(h2_client, a_stream_reset_mid_response_leaves_the_others_running) {
    runtime rt{options()};
    frame_server server{leaf_};
    client_pool pool{pool_options()};
    // Three responses begun together; the second reset (CANCEL), then the others ended.
    auto script = [](int, tls_stream& t, frame_server& self) -> task<void> {
        std::string buf;
        std::vector<std::int32_t> ids;
        while (ids.size() < 3) {
            auto f = co_await frame_server::next(t, buf, self);
            if (!f) {
                co_return;
            }
            if (f->type == f_headers) {
                ids.push_back(f->stream);
            }
        }
        for (const std::int32_t id : ids) {
            if (!co_await frame_server::begin(t, id, "part-")) {
                co_return;
            }
        }
        if (!co_await frame_server::send(t, rst_stream(ids[1], 8 /* CANCEL */)) ||
            !co_await frame_server::end(t, ids[0], "whole") ||
            !co_await frame_server::end(t, ids[2], "whole")) {
            co_return;
        }
        while (auto f = co_await frame_server::next(t, buf, self)) {
            if (f->type == f_headers && !co_await frame_server::answer(t, f->stream, "later")) {
                co_return;
            }
        }
    };
    std::vector<result<client_response>> got(3, unanswered);
    result<client_response> later = unanswered;
    rt.block_on(beside(server, script, [&]() -> task<void> {
        co_await with_scope([&](scope& s) -> task<void> {
            for (auto& r : got) {
                s.spawn([&]() -> task<void> { r = co_await pool.get(server.url("/")); });
            }
            co_return;
        });
        later = co_await pool.get(server.url("/later"));
    }));
    int whole = 0;
    int reset = 0;
    for (const auto& r : got) {
        whole += r && r->body == "part-whole" ? 1 : 0;
        reset += !r && r.error() == std::errc::connection_reset ? 1 : 0;
    }
    EXPECT_EQ(whole, 2);
    EXPECT_EQ(reset, 1);
    EXPECT_TRUE(later && later->body == "later");
    EXPECT_EQ(server.accepted.load(), 1);  // the connection stayed in service
}

TEST_P(h2_client, a_connection_closed_mid_response_fails_it_and_the_next_opens_another) {
    runtime rt{options()};
    frame_server server{leaf_};
    client_pool pool{pool_options()};
    // The first connection begins a response and closes; the next answer everything.
    auto script = [](int i, tls_stream& t, frame_server& self) -> task<void> {
        if (i > 0) {
            co_await answer_all("whole")(i, t, self);
            co_return;
        }
        std::string buf;
        while (auto f = co_await frame_server::next(t, buf, self)) {
            if (f->type == f_headers) {
                (void)co_await frame_server::begin(t, f->stream, std::string(1000, 'p'));
                co_return;
            }
        }
    };
    std::size_t received = 0;
    std::error_code ended_with;
    result<client_response> next = unanswered;
    rt.block_on(beside(server, script, [&]() -> task<void> {
        client_request req{.url = server.url("/cut")};
        auto s = co_await pool.open(std::move(req));
        EXPECT_TRUE(s);
        while (s) {
            auto p = co_await s->read();
            if (!p || p->empty()) {
                ended_with = p ? std::error_code{} : p.error();
                break;
            }
            received += p->size();
        }
        next = co_await pool.get(server.url("/next"));
    }));
    // What was read before the loss is the server's (the rest dropped with the connection);
    // the read ends in an error, never as the end of a shorter body.
    EXPECT_LE(received, 1000U);
    EXPECT_TRUE(ended_with);
    EXPECT_TRUE(next && next->body == "whole") << (next ? "" : next.error().message());
    EXPECT_EQ(server.accepted.load(), 2);
    EXPECT_EQ(pool.stats().http2_connections, 2U);
}

WEFT_TEST_ON_BOTH_BACKENDS(h2_client);

// The server's stream limit (4) holds the client's other requests back, on a simulated network
// and a test clock: the 50 ms left for a fifth stream take no wall time, and since the clock
// moves only once every task waits, a fifth stream the client had sent would have reached its
// handler by then.
TEST(h2_client_on_sim, the_servers_stream_limit_queues_the_rest) {
    const wt::issued_cert ca = wt::make_ca("weft h2 client CA");
    const wt::issued_cert leaf = wt::make_leaf("server", &ca);
    tls_server_options to;
    to.certificate = leaf.as_certificate();
    to.alpn = {"h2", "http/1.1"};
    server_options o;
    o.tls = tls_context::server(to);
    o.http2.max_concurrent_streams = 4;
    std::atomic<int> waiting{0};
    int waiting_after_pause = 0;
    event release;
    std::atomic<int> ok{0};
    server_stats stats;
    client_pool_stats pool_stats;
    runtime rt{testing::test_clock_runtime()};
    rt.block_on([&]() -> task<void> {
        testing::sim_network net{{.latency = 1ms}};
        client_options co{.tls = {.ca_pem = ca.cert_pem()}};
        co.connect_stream = [&net](std::string_view host, std::uint16_t port) {
            return net.connect("client", host, port);
        };
        client_pool pool{std::move(co)};
        server srv{std::move(o)};
        srv.route(method::get, "/wait", [&](request&) -> task<response> {
            waiting.fetch_add(1);
            (void)co_await release.wait();
            co_return response::text("released");
        });
        auto l = net.listen("server", 443);
        co_await with_scope([&](scope& s) -> task<void> {
            s.spawn(srv.serve(*l));
            co_await with_scope([&](scope& requests) -> task<void> {
                for (int i = 0; i < 20; ++i) {
                    requests.spawn([&]() -> task<void> {
                        auto r = co_await pool.get("https://server/wait");
                        if (r && r->status == 200) {
                            ++ok;
                        }
                    });
                }
                while (waiting.load() < 4) {
                    (void)co_await sleep_for(1ms);  // test time: the network's latency passes
                }
                (void)co_await sleep_for(50ms);  // room for a fifth stream, if one was sent
                waiting_after_pause = waiting.load();
                release.set();
            });
            co_await srv.shutdown();
        });
        stats = srv.stats();
        pool_stats = pool.stats();
    }());
    EXPECT_EQ(waiting_after_pause, 4);
    EXPECT_EQ(ok.load(), 20);  // none refused: the client held them back, not the server
    EXPECT_EQ(stats.accepted, 1U);
    EXPECT_EQ(pool_stats.http2_connections, 1U);
}

// A server that never opens its window for a request body: the upload fails by its request
// timeout (on a test clock: no wall time), its stream is reset and its slot, the server's only
// one, serves the next request.
TEST(h2_client_on_sim, a_server_that_never_opens_its_window_fails_the_upload_by_its_timeout) {
    const wt::issued_cert ca = wt::make_ca("weft h2 client CA");
    const wt::issued_cert leaf = wt::make_leaf("server", &ca);
    // No DATA may be sent on any stream, and one stream at a time: a stream the client kept
    // after its request gave up would hold the only slot.
    frame_server server{leaf, {{4 /* INITIAL_WINDOW_SIZE */, 0}, {3 /* MAX_CONCURRENT */, 1}}};
    std::atomic<std::int32_t> upload{0};
    std::atomic<int> resets{0};
    auto script = [&](int, tls_stream& t, frame_server& self) -> task<void> {
        std::string buf;
        while (auto f = co_await frame_server::next(t, buf, self)) {
            if (f->type == f_headers && (f->flags & end_stream) == 0) {
                upload.store(f->stream);  // its body waits for a window never opened
            } else if (f->type == f_headers && !co_await frame_server::answer(t, f->stream, "ok")) {
                co_return;
            } else if (f->type == f_rst && f->stream == upload.load()) {
                resets.fetch_add(1);
            }
        }
    };
    result<client_response> up = unanswered;
    result<client_response> after = unanswered;
    runtime rt{testing::test_clock_runtime()};
    rt.block_on([&]() -> task<void> {
        testing::sim_network net{{.latency = 1ms}};
        client_options o{.tls = {.ca_pem = ca.cert_pem()}};
        o.request_timeout = 30s;
        o.connect_stream = [&net](std::string_view host, std::uint16_t port) {
            return net.connect("client", host, port);
        };
        client_pool pool{std::move(o)};
        auto l = net.listen("server", 443);
        co_await with_scope([&](scope& s) -> task<void> {
            s.spawn(server.serve_from(*l, script));
            up =
                co_await pool.post("https://server/up", std::string(256 * 1024, 'u'), "text/plain");
            // The reset goes out before this request's HEADERS, which the single slot waits for.
            after = co_await pool.get("https://server/after");
            s.request_stop();
        });
    }());
    EXPECT_EQ(up.error(), std::errc::timed_out);
    EXPECT_EQ(resets.load(), 1);  // the stream given up is reset, its slot freed
    EXPECT_TRUE(after && after->body == "ok") << (after ? "" : after.error().message());
    EXPECT_EQ(server.accepted.load(), 1);
}

}  // namespace
}  // namespace weft::http::test
