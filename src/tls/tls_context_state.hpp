#pragma once

#include <openssl/ssl.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace weft::detail {

/// What a tls_context shares among its copies. The callbacks of `ctx` hold a pointer to it:
/// it lives as long as the SSL_CTX (which it frees), and a context named for SNI is kept alive
/// by the context that names it.
struct tls_context_state {
    tls_context_state() = default;
    tls_context_state(const tls_context_state&) = delete;
    auto operator=(const tls_context_state&) -> tls_context_state& = delete;
    ~tls_context_state();

    SSL_CTX* ctx = nullptr;
    bool server = false;
    bool verify = false;
    std::chrono::milliseconds handshake_timeout{0};
    std::string alpn;  // the server's ALPN protocols, wire format (length-prefixed)
    // SNI: lower-case name ("*.example.com" for a wildcard) -> the context to switch to
    std::vector<std::pair<std::string, std::shared_ptr<tls_context_state>>> names;
};

}  // namespace weft::detail
