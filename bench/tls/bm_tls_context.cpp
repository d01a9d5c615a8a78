// One SSL_CTX shared by every worker against one per worker: OpenSSL 3.0 takes locks of the
// SSL_CTX on each SSL_new and SSL_free (its reference count, the session cache and ex_data
// locks, openssl #17064, #20286). Each thread here plays a worker: it runs full TLS 1.3
// handshakes (a new connection per request), or request/response records on one established
// connection (keep-alive), with both ends in memory (a BIO pair) so that only OpenSSL's cost
// is measured. Compare the shared and per_worker rows at the same thread count (1, 2, 4, ... up
// to the machine's CPUs).

#include <benchmark/benchmark.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>
#include <thread>

#include "tls/cert_factory.hpp"
#include "weft/tls/tls_context.hpp"

namespace {

struct contexts {
    weft::tls_context server;
    weft::tls_context client;
};

auto make_contexts() -> contexts {
    static const auto ca = weft::test::make_ca("bench CA");
    static const auto leaf = weft::test::make_leaf("localhost", &ca);
    weft::tls_server_options so;
    so.certificate = leaf.as_certificate();
    so.session_tickets = false;  // every handshake is a full one
    weft::tls_client_options co;
    co.ca_pem = ca.cert_pem();
    return {weft::tls_context::server(so), weft::tls_context::client(co)};
}

auto shared_contexts() -> const contexts& {
    static const contexts c = make_contexts();
    return c;
}

// A client and a server SSL joined by a BIO pair.
struct connection {
    SSL* server = nullptr;
    SSL* client = nullptr;

    explicit connection(const contexts& c)
        : server(SSL_new(c.server.native_handle())), client(SSL_new(c.client.native_handle())) {
        BIO* s = nullptr;
        BIO* k = nullptr;
        BIO_new_bio_pair(&s, 0, &k, 0);
        SSL_set_bio(server, s, s);
        SSL_set_bio(client, k, k);
        SSL_set_accept_state(server);
        SSL_set_connect_state(client);
        SSL_set_tlsext_host_name(client, "localhost");
        SSL_set1_host(client, "localhost");
    }
    connection(const connection&) = delete;
    auto operator=(const connection&) -> connection& = delete;
    ~connection() {
        SSL_free(client);
        SSL_free(server);
    }

    void handshake() const {
        for (int round = 0; round < 16; ++round) {
            const int c = SSL_do_handshake(client);
            const int s = SSL_do_handshake(server);
            if (c == 1 && s == 1) {
                return;
            }
        }
        throw std::runtime_error("handshake did not finish");
    }
};

// The contexts a thread uses: the process's shared pair, or its own (made before timing).
template <bool Shared>
auto contexts_for_thread() -> const contexts& {
    if constexpr (Shared) {
        return shared_contexts();
    } else {
        thread_local const contexts mine = make_contexts();
        return mine;
    }
}

template <bool Shared>
void BM_handshake(benchmark::State& state) {
    const contexts& c = contexts_for_thread<Shared>();
    for (auto _ : state) {
        const connection conn{c};
        conn.handshake();
    }
    state.SetItemsProcessed(state.iterations());
}

template <bool Shared>
void BM_keep_alive_request(benchmark::State& state) {
    const contexts& c = contexts_for_thread<Shared>();
    const connection conn{c};
    conn.handshake();
    const std::string request = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";
    const std::string response =
        "HTTP/1.1 200 OK\r\nContent-Length: 13\r\nContent-Type: text/plain\r\n\r\nHello, World!";
    std::array<char, 4096> buf{};
    for (auto _ : state) {
        if (SSL_write(conn.client, request.data(), static_cast<int>(request.size())) <= 0 ||
            SSL_read(conn.server, buf.data(), buf.size()) <= 0 ||
            SSL_write(conn.server, response.data(), static_cast<int>(response.size())) <= 0 ||
            SSL_read(conn.client, buf.data(), buf.size()) <= 0) {
            state.SkipWithError("a record failed");
            break;
        }
    }
    state.SetItemsProcessed(state.iterations());
}

// 1, 2, 4, ... threads up to the machine's CPUs.
const int max_threads = static_cast<int>(std::max(2U, std::thread::hardware_concurrency()));

BENCHMARK(BM_handshake<true>)->Name("handshake/shared")->ThreadRange(1, max_threads)->UseRealTime();
BENCHMARK(BM_handshake<false>)
    ->Name("handshake/per_worker")
    ->ThreadRange(1, max_threads)
    ->UseRealTime();
BENCHMARK(BM_keep_alive_request<true>)
    ->Name("keep_alive_request/shared")
    ->ThreadRange(1, max_threads)
    ->UseRealTime();
BENCHMARK(BM_keep_alive_request<false>)
    ->Name("keep_alive_request/per_worker")
    ->ThreadRange(1, max_threads)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
