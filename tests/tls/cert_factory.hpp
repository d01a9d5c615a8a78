#pragma once

// Certificates made at run time with OpenSSL's API (no private key is ever checked in): a CA,
// leaves it issues (valid, expired, for another name), and self-signed leaves. P-256 keys.

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "weft/tls/tls_context.hpp"

namespace weft::test {

struct pkey_free {
    void operator()(EVP_PKEY* k) const noexcept { EVP_PKEY_free(k); }
};
struct x509_free {
    void operator()(X509* x) const noexcept { X509_free(x); }
};

inline auto pem_of(X509* x) -> std::string {
    BIO* b = BIO_new(BIO_s_mem());
    PEM_write_bio_X509(b, x);
    char* p = nullptr;
    const long n = BIO_get_mem_data(b, &p);
    std::string s(p, static_cast<std::size_t>(n));
    BIO_free(b);
    return s;
}

inline auto pem_of(EVP_PKEY* k) -> std::string {
    BIO* b = BIO_new(BIO_s_mem());
    PEM_write_bio_PrivateKey(b, k, nullptr, nullptr, 0, nullptr, nullptr);
    char* p = nullptr;
    const long n = BIO_get_mem_data(b, &p);
    std::string s(p, static_cast<std::size_t>(n));
    BIO_free(b);
    return s;
}

inline void add_ext(X509* x, X509V3_CTX* ctx, int nid, const char* value) {
    X509_EXTENSION* e = X509V3_EXT_conf_nid(nullptr, ctx, nid, value);
    if (e == nullptr) {
        throw std::runtime_error("cert_factory: extension");
    }
    X509_add_ext(x, e, -1);
    X509_EXTENSION_free(e);
}

/// A certificate with its key. `issuer`/`issuer_key` null: self-signed.
struct issued_cert {
    std::unique_ptr<X509, x509_free> cert;
    std::unique_ptr<EVP_PKEY, pkey_free> key;

    [[nodiscard]] auto cert_pem() const -> std::string { return pem_of(cert.get()); }
    [[nodiscard]] auto key_pem() const -> std::string { return pem_of(key.get()); }
    /// As a server's certificate: the chain is this leaf alone.
    [[nodiscard]] auto as_certificate() const -> tls_certificate { return {cert_pem(), key_pem()}; }
};

struct cert_spec {
    std::string common_name;
    std::string subject_alt_names;  // "DNS:localhost,IP:127.0.0.1"; empty for a CA
    bool ca = false;
    long valid_from_s = -3600;  // relative to now
    long valid_until_s = 86400;
};

inline auto make_cert(const cert_spec& spec, const issued_cert* issuer) -> issued_cert {
    static long serial = 1;
    issued_cert out;
    out.key.reset(EVP_EC_gen("P-256"));
    out.cert.reset(X509_new());
    X509* x = out.cert.get();
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
    X509_gmtime_adj(X509_getm_notBefore(x), spec.valid_from_s);
    X509_gmtime_adj(X509_getm_notAfter(x), spec.valid_until_s);
    X509_set_pubkey(x, out.key.get());
    X509_NAME* name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(spec.common_name.c_str()), -1,
                               -1, 0);
    X509* signer = issuer != nullptr ? issuer->cert.get() : x;
    EVP_PKEY* signer_key = issuer != nullptr ? issuer->key.get() : out.key.get();
    X509_set_issuer_name(x, X509_get_subject_name(signer));
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, signer, x, nullptr, nullptr, 0);
    add_ext(x, &ctx, NID_subject_key_identifier, "hash");
    if (spec.ca) {
        add_ext(x, &ctx, NID_basic_constraints, "critical,CA:TRUE");
        add_ext(x, &ctx, NID_key_usage, "critical,keyCertSign,cRLSign");
    } else {
        add_ext(x, &ctx, NID_basic_constraints, "critical,CA:FALSE");
        add_ext(x, &ctx, NID_ext_key_usage, "serverAuth,clientAuth");
        if (!spec.subject_alt_names.empty()) {
            add_ext(x, &ctx, NID_subject_alt_name, spec.subject_alt_names.c_str());
        }
    }
    if (X509_sign(x, signer_key, EVP_sha256()) == 0) {
        throw std::runtime_error("cert_factory: sign");
    }
    return out;
}

inline auto make_ca(const std::string& name) -> issued_cert {
    cert_spec spec;
    spec.common_name = name;
    spec.ca = true;
    return make_cert(spec, nullptr);
}

/// A leaf for `dns` (and 127.0.0.1) issued by `ca` (null: self-signed).
inline auto make_leaf(const std::string& dns,
                      const issued_cert* ca,
                      long from_s = -3600,
                      long until_s = 86400) -> issued_cert {
    cert_spec spec;
    spec.common_name = dns;
    spec.subject_alt_names = "DNS:" + dns + ",IP:127.0.0.1";
    spec.valid_from_s = from_s;
    spec.valid_until_s = until_s;
    return make_cert(spec, ca);
}

}  // namespace weft::test
