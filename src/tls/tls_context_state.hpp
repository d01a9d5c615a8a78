#pragma once

#include <openssl/ssl.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "weft/tls/tls_context.hpp"

namespace weft::detail {

struct ssl_ctx_free {
    void operator()(SSL_CTX* c) const noexcept { SSL_CTX_free(c); }
};

/// What a tls_context shares among its copies. The callbacks of every SSL_CTX it publishes hold
/// a pointer to it: they run only inside a handshake, which holds the tls_context (hence this
/// state); a context named for SNI is kept alive by the context that names it.
///
/// `ctx` is the SSL_CTX new connections start from. reload() builds a new one and publishes it
/// with a release store; a new connection's acquire load pairs with it and holds the pointer
/// while SSL_new takes OpenSSL's own reference. A connection keeps the SSL_CTX it started with
/// (that reference) until it ends, so a reload never changes a connection in flight; the old
/// SSL_CTX is freed when its last connection ends.
struct tls_context_state {
    tls_context_state() = default;
    tls_context_state(const tls_context_state&) = delete;
    auto operator=(const tls_context_state&) -> tls_context_state& = delete;
    ~tls_context_state() = default;

    std::atomic<std::shared_ptr<SSL_CTX>> ctx;
    tls_server_options server_options;  // what reload() rebuilds from (a server's)
    std::mutex reload_mutex;            // one reload at a time (rare; never on a handshake)
    bool server = false;
    bool verify = false;
    std::chrono::milliseconds handshake_timeout{0};
    std::string alpn;  // the server's ALPN protocols, wire format (length-prefixed)
    // SNI: lower-case name ("*.example.com" for a wildcard) -> the context to switch to
    std::vector<std::pair<std::string, std::shared_ptr<tls_context_state>>> names;
};

}  // namespace weft::detail
