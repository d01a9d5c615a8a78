#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "weft/core/result.hpp"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX
struct ssl_st;      // OpenSSL's SSL

namespace weft {

/// The lowest TLS version a context accepts. TLS 1.0 and 1.1 are never offered.
enum class tls_version { tls1_2, tls1_3 };

/// A certificate chain (leaf first, then the intermediates) and its private key, PEM-encoded.
struct tls_certificate {
    std::string chain_pem{};
    std::string key_pem{};

    /// Reads both files (PEM). Throws std::system_error when one cannot be read.
    [[nodiscard]] static auto from_files(const std::filesystem::path& chain,
                                         const std::filesystem::path& key) -> tls_certificate;
};

struct tls_server_options {
    tls_certificate certificate{};
    /// ALPN protocols in the server's order of preference. A client that offers ALPN and none
    /// of these is refused (no_application_protocol alert, RFC 7301); one that offers none is
    /// served. "h2" is not offered until weft::http speaks HTTP/2.
    std::vector<std::string> alpn{"http/1.1"};
    tls_version min_version = tls_version::tls1_2;
    /// TLS 1.2 suites (OpenSSL cipher-list syntax); empty: ECDHE with AES-GCM or ChaCha20-Poly1305
    /// only (forward secrecy, AEAD). TLS 1.3 suites are OpenSSL's defaults (all AEAD).
    std::string tls12_ciphers{};
    /// Session resumption by stateless tickets (the keys are the context's, shared by every
    /// worker; no server-side session cache, whose lock every handshake would take).
    bool session_tickets = true;
    /// tls_stream::accept gives up with timed_out after this (0: never). A client that stalls
    /// mid-handshake is dropped.
    std::chrono::milliseconds handshake_timeout{std::chrono::seconds{10}};
};

struct tls_client_options {
    /// Verify the server's chain and its name (tls_stream::connect's host). Off: TESTS ONLY,
    /// any certificate is accepted and the connection is open to a man in the middle.
    bool verify_peer = true;
    /// Trusted roots, PEM, in a file or in memory. Both empty: the system trust store.
    /// Either given: only these are trusted (a private PKI, tests).
    std::string ca_file{};
    std::string ca_pem{};
    /// A client certificate, for servers that ask for one.
    std::optional<tls_certificate> certificate{};
    /// ALPN protocols offered, in order of preference; empty: no ALPN.
    std::vector<std::string> alpn{};
    tls_version min_version = tls_version::tls1_2;
    /// tls_stream::connect gives up with timed_out after this (0: never).
    std::chrono::milliseconds handshake_timeout{std::chrono::seconds{10}};
};

class tls_context;

namespace detail {
struct tls_context_state;  // src/tls/tls_context_state.hpp
/// A new SSL for a connection, from the context's current SSL_CTX (nullptr: out of memory).
[[nodiscard]] auto new_ssl(const tls_context& ctx) -> ssl_st*;
}  // namespace detail

/// The configuration TLS connections share: one OpenSSL SSL_CTX (certificates, trust store,
/// versions, suites, ALPN, session-ticket keys), used by every worker. A cheap handle: copies
/// share the same SSL_CTX. Thread-safe to use from any number of connections at once; the
/// setters (add_server_name) are for before the first connection; reload() may run at any time.
///
///     auto ctx = weft::tls_context::server({.certificate =
///         weft::tls_certificate::from_files("chain.pem", "key.pem")});
///     auto tls = (co_await weft::tls_stream::accept(std::move(tcp), ctx)).value();
///
/// Setup that cannot proceed (an unreadable or mismatched certificate and key, a CA file
/// OpenSSL refuses) throws std::system_error whose code names OpenSSL's reason.
class tls_context {
public:
    [[nodiscard]] static auto server(tls_server_options o) -> tls_context;
    [[nodiscard]] static auto client(tls_client_options o = {}) -> tls_context;

    /// SNI: a client that asks for `name` is served `ctx`'s certificate (and ALPN list) instead
    /// of this context's; one that asks for no name or another name gets this context's.
    /// `name` is a host name, or "*.example.com" for any one label in front of example.com;
    /// an exact name wins over a wildcard. Versions, suites and the handshake timeout stay this
    /// context's. Both must be server contexts. Before the first connection.
    void add_server_name(std::string name, const tls_context& ctx);

    /// Certificate reload without a restart: connections accepted from now on present
    /// `certificate`; those already open (or mid-handshake) keep the one they started with.
    /// Everything else stays as configured (versions, suites, ALPN, SNI names; session-ticket
    /// keys too, so sessions issued before resume after). A certificate and key that cannot be
    /// used (unreadable, mismatched) are an error value, openssl_category(), and the current
    /// certificate stays. Any thread, at any time, concurrently with connections. Server
    /// contexts only (std::logic_error otherwise). A name added with add_server_name is
    /// reloaded through its own context. Settings made through native_handle() are not
    /// carried over.
    ///
    ///     for (;;) {  // SIGHUP: read the files again
    ///         (void)co_await weft::wait_for_signal({SIGHUP});
    ///         auto r = ctx.reload(weft::tls_certificate::from_files("chain.pem", "key.pem"));
    ///     }
    [[nodiscard]] auto reload(tls_certificate certificate) -> result<void>;

    [[nodiscard]] auto is_server() const noexcept -> bool;
    [[nodiscard]] auto verifies_peer() const noexcept -> bool;
    [[nodiscard]] auto handshake_timeout() const noexcept -> std::chrono::milliseconds;
    /// The SSL_CTX new connections start from, for settings weft has no option for (before the
    /// first connection; a reload() replaces it by one built from the options alone).
    [[nodiscard]] auto native_handle() const noexcept -> ssl_ctx_st*;

private:
    friend auto detail::new_ssl(const tls_context& ctx) -> ssl_st*;
    explicit tls_context(std::shared_ptr<detail::tls_context_state> st) noexcept
        : st_(std::move(st)) {}
    std::shared_ptr<detail::tls_context_state> st_;
};

}  // namespace weft
