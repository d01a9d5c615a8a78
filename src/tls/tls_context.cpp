#include "weft/tls/tls_context.hpp"

#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <array>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <utility>

#include "openssl_error.hpp"
#include "tls_context_state.hpp"

namespace weft {

namespace {

// Mozilla's "intermediate" TLS 1.2 list without DHE: ECDHE for forward secrecy, AEAD only.
constexpr const char* modern_tls12_ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

[[noreturn]] void fail(const char* what) {
    throw std::system_error(detail::take_openssl_error(std::make_error_code(std::errc::io_error)),
                            std::string("weft::tls_context: ") + what);
}

struct bio_deleter {
    void operator()(BIO* b) const noexcept { BIO_free(b); }
};
struct x509_deleter {
    void operator()(X509* x) const noexcept { X509_free(x); }
};
struct pkey_deleter {
    void operator()(EVP_PKEY* k) const noexcept { EVP_PKEY_free(k); }
};
using bio_ptr = std::unique_ptr<BIO, bio_deleter>;
using x509_ptr = std::unique_ptr<X509, x509_deleter>;

auto memory_bio(std::string_view pem) -> bio_ptr {
    bio_ptr b{BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()))};
    if (!b) {
        fail("out of memory");
    }
    return b;
}

auto protocol_version(tls_version v) -> int {
    return v == tls_version::tls1_3 ? TLS1_3_VERSION : TLS1_2_VERSION;
}

// ALPN's wire format: each protocol preceded by its length.
auto alpn_wire(const std::vector<std::string>& protocols) -> std::string {
    std::string w;
    for (const auto& p : protocols) {
        if (p.empty() || p.size() > 255) {
            throw std::invalid_argument("weft::tls_context: an ALPN protocol is 1 to 255 bytes");
        }
        w += static_cast<char>(p.size());
        w += p;
    }
    return w;
}

void use_certificate(SSL_CTX* ctx, const tls_certificate& c) {
    ERR_clear_error();
    auto chain = memory_bio(c.chain_pem);
    x509_ptr leaf{PEM_read_bio_X509(chain.get(), nullptr, nullptr, nullptr)};
    if (!leaf || SSL_CTX_use_certificate(ctx, leaf.get()) != 1) {
        fail("the certificate chain has no usable certificate");
    }
    for (;;) {
        x509_ptr next{PEM_read_bio_X509(chain.get(), nullptr, nullptr, nullptr)};
        if (!next) {
            ERR_clear_error();  // the end of the PEM text
            break;
        }
        if (SSL_CTX_add0_chain_cert(ctx, next.get()) != 1) {
            fail("an intermediate certificate was refused");
        }
        (void)next.release();  // add0: the context owns it now
    }
    auto key_bio = memory_bio(c.key_pem);
    std::unique_ptr<EVP_PKEY, pkey_deleter> key{
        PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr)};
    if (!key) {
        fail("the private key cannot be read");
    }
    if (SSL_CTX_use_PrivateKey(ctx, key.get()) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
        fail("the private key does not match the certificate");
    }
}

auto new_ctx(const SSL_METHOD* method, tls_version min) -> SSL_CTX* {
    ERR_clear_error();
    SSL_CTX* ctx = SSL_CTX_new(method);
    if (ctx == nullptr) {
        fail("SSL_CTX_new");
    }
    SSL_CTX_set_min_proto_version(ctx, protocol_version(min));
    // No renegotiation (a TLS 1.2 feature with a history of attacks, and a read that would
    // have to write); idle connections give their 16 KiB read and write buffers back.
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    return ctx;
}

// The server's ALPN choice: the first of the server's protocols the client offers.
auto select_alpn(SSL* /*ssl*/,
                 const unsigned char** out,
                 unsigned char* outlen,
                 const unsigned char* in,
                 unsigned int inlen,
                 void* arg) -> int {
    const auto* st = static_cast<const detail::tls_context_state*>(arg);
    const std::string& mine = st->alpn;
    if (mine.empty()) {
        return SSL_TLSEXT_ERR_NOACK;
    }
    for (std::size_t i = 0; i < mine.size(); i += 1 + static_cast<unsigned char>(mine[i])) {
        const auto len = static_cast<unsigned char>(mine[i]);
        const std::string_view want{mine.data() + i + 1, len};
        for (unsigned j = 0; j < inlen; j += 1U + in[j]) {
            const std::string_view offered{reinterpret_cast<const char*>(in + j + 1), in[j]};
            if (j + 1U + in[j] <= inlen && offered == want) {
                *out = in + j + 1;
                *outlen = in[j];
                return SSL_TLSEXT_ERR_OK;
            }
        }
    }
    return SSL_TLSEXT_ERR_ALERT_FATAL;  // no_application_protocol (RFC 7301 3.2)
}

auto wildcard_of(std::string_view host) -> std::string {
    const auto dot = host.find('.');
    if (dot == std::string_view::npos) {
        return {};
    }
    return "*" + std::string(host.substr(dot));
}

// SNI: switch the connection to the context named for the host the client asked for.
auto select_server_name(SSL* ssl, int* /*alert*/, void* arg) -> int {
    const auto* st = static_cast<const detail::tls_context_state*>(arg);
    const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    if (name == nullptr || st->names.empty()) {
        return SSL_TLSEXT_ERR_OK;
    }
    std::string host{name};
    for (char& c : host) {
        c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    const detail::tls_context_state* pick = nullptr;
    const std::string wild = wildcard_of(host);
    for (const auto& [n, ctx] : st->names) {
        if (n == host) {
            pick = ctx.get();
            break;
        }
        if (pick == nullptr && !wild.empty() && n == wild) {
            pick = ctx.get();
        }
    }
    if (pick != nullptr) {
        SSL_set_SSL_CTX(ssl, pick->ctx.load(std::memory_order_acquire).get());
    }
    return SSL_TLSEXT_ERR_OK;
}

void trust_pem(SSL_CTX* ctx, std::string_view pem) {
    X509_STORE* store = SSL_CTX_get_cert_store(ctx);
    auto b = memory_bio(pem);
    int added = 0;
    for (;;) {
        x509_ptr x{PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr)};
        if (!x) {
            ERR_clear_error();
            break;
        }
        if (X509_STORE_add_cert(store, x.get()) != 1) {
            fail("a trusted certificate was refused");
        }
        ++added;
    }
    if (added == 0) {
        throw std::system_error(std::make_error_code(std::errc::invalid_argument),
                                "weft::tls_context: ca_pem holds no certificate");
    }
}

auto read_file(const std::filesystem::path& p) -> std::string {
    std::ifstream f(p, std::ios::binary);
    if (!f) {
        throw std::system_error(std::make_error_code(std::errc::no_such_file_or_directory),
                                "weft::tls_certificate: cannot read " + p.string());
    }
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// A server SSL_CTX from `o`, its callbacks bound to `st`. Throws std::system_error.
auto server_ctx(const tls_server_options& o, detail::tls_context_state* st)
    -> std::shared_ptr<SSL_CTX> {
    std::shared_ptr<SSL_CTX> owner{new_ctx(TLS_server_method(), o.min_version),
                                   detail::ssl_ctx_free{}};
    SSL_CTX* ctx = owner.get();
    const std::string& suites = o.tls12_ciphers.empty() ? modern_tls12_ciphers : o.tls12_ciphers;
    if (SSL_CTX_set_cipher_list(ctx, suites.c_str()) != 1) {
        fail("no usable TLS 1.2 cipher suite");
    }
    use_certificate(ctx, o.certificate);
    if (o.session_tickets) {
        // Stateless tickets only: the server keeps no session cache.
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
        static constexpr unsigned char id[] = "weft";
        SSL_CTX_set_session_id_context(ctx, id, sizeof(id) - 1);
    } else {
        SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
        SSL_CTX_set_num_tickets(ctx, 0);
    }
    SSL_CTX_set_alpn_select_cb(ctx, select_alpn, st);
    SSL_CTX_set_tlsext_servername_callback(ctx, select_server_name);
    SSL_CTX_set_tlsext_servername_arg(ctx, st);
    return owner;
}

}  // namespace

auto tls_certificate::from_files(const std::filesystem::path& chain,
                                 const std::filesystem::path& key) -> tls_certificate {
    return {read_file(chain), read_file(key)};
}

auto tls_context::server(tls_server_options o) -> tls_context {
    auto st = std::make_shared<detail::tls_context_state>();
    st->server = true;
    st->handshake_timeout = o.handshake_timeout;
    st->alpn = alpn_wire(o.alpn);
    st->ctx.store(server_ctx(o, st.get()), std::memory_order_release);
    st->server_options = std::move(o);
    return tls_context{std::move(st)};
}

auto tls_context::reload(tls_certificate certificate) -> result<void> {
    if (!st_->server) {
        throw std::logic_error("weft::tls_context::reload: server contexts only");
    }
    const std::lock_guard lock{st_->reload_mutex};
    tls_server_options o = st_->server_options;
    o.certificate = std::move(certificate);
    std::shared_ptr<SSL_CTX> fresh;
    try {
        fresh = server_ctx(o, st_.get());
    } catch (const std::system_error& e) {
        return e.code();
    }
    // The ticket keys carry over: a session resumed after the reload was issued before it.
    const auto old = st_->ctx.load(std::memory_order_acquire);
    std::array<unsigned char, 80> keys{};
    if (SSL_CTX_get_tlsext_ticket_keys(old.get(), keys.data(), keys.size()) == 1) {
        (void)SSL_CTX_set_tlsext_ticket_keys(fresh.get(), keys.data(), keys.size());
    }
    OPENSSL_cleanse(keys.data(), keys.size());
    st_->ctx.store(std::move(fresh), std::memory_order_release);
    st_->server_options = std::move(o);
    return {};
}

auto tls_context::client(tls_client_options o) -> tls_context {
    auto st = std::make_shared<detail::tls_context_state>();
    st->server = false;
    st->verify = o.verify_peer;
    st->handshake_timeout = o.handshake_timeout;
    std::shared_ptr<SSL_CTX> owner{new_ctx(TLS_client_method(), o.min_version),
                                   detail::ssl_ctx_free{}};
    SSL_CTX* ctx = owner.get();
    if (o.verify_peer) {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
        if (o.ca_file.empty() && o.ca_pem.empty()) {
            if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
                fail("the system trust store cannot be loaded");
            }
        }
        if (!o.ca_file.empty() &&
            SSL_CTX_load_verify_locations(ctx, o.ca_file.c_str(), nullptr) != 1) {
            fail("ca_file cannot be loaded");
        }
        if (!o.ca_pem.empty()) {
            trust_pem(ctx, o.ca_pem);
        }
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
    }
    if (o.certificate) {
        use_certificate(ctx, *o.certificate);
    }
    if (!o.alpn.empty()) {
        const std::string w = alpn_wire(o.alpn);
        // (returns 0 on success, unlike the rest of OpenSSL)
        if (SSL_CTX_set_alpn_protos(ctx, reinterpret_cast<const unsigned char*>(w.data()),
                                    static_cast<unsigned>(w.size())) != 0) {
            fail("the ALPN list was refused");
        }
    }
    st->ctx.store(std::move(owner), std::memory_order_release);
    return tls_context{std::move(st)};
}

void tls_context::add_server_name(std::string name, const tls_context& ctx) {
    if (!st_->server || !ctx.st_->server) {
        throw std::logic_error("weft::tls_context::add_server_name: server contexts only");
    }
    for (char& c : name) {
        c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    st_->names.emplace_back(std::move(name), ctx.st_);
}

auto tls_context::is_server() const noexcept -> bool { return st_->server; }
auto tls_context::verifies_peer() const noexcept -> bool { return st_->verify; }
auto tls_context::handshake_timeout() const noexcept -> std::chrono::milliseconds {
    return st_->handshake_timeout;
}
auto tls_context::native_handle() const noexcept -> ssl_ctx_st* {
    return st_->ctx.load(std::memory_order_acquire).get();
}

auto detail::new_ssl(const tls_context& ctx) -> ssl_st* {
    // The shared_ptr holds the SSL_CTX until SSL_new has taken OpenSSL's own reference.
    const auto current = ctx.st_->ctx.load(std::memory_order_acquire);
    return SSL_new(current.get());
}

}  // namespace weft
