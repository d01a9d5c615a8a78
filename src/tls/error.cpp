#include "weft/tls/error.hpp"

#include <openssl/err.h>
#include <openssl/x509.h>

#include <string>

namespace weft {

namespace {
class tls_category_impl final : public std::error_category {
public:
    [[nodiscard]] auto name() const noexcept -> const char* override { return "weft.tls"; }
    [[nodiscard]] auto message(int c) const -> std::string override {
        switch (static_cast<tls_errc>(c)) {
            case tls_errc::truncated:
                return "TLS connection closed by peer without close_notify";
            case tls_errc::unusable:
                return "TLS stream unusable after an earlier failure";
        }
        return "unknown weft.tls error";
    }
};

class openssl_category_impl final : public std::error_category {
public:
    [[nodiscard]] auto name() const noexcept -> const char* override { return "openssl"; }
    [[nodiscard]] auto message(int c) const -> std::string override {
        const auto e = static_cast<unsigned long>(c);
        const char* lib = ERR_lib_error_string(e);
        const char* reason = ERR_reason_error_string(e);
        std::string m = lib != nullptr ? lib : "OpenSSL";
        m += ": ";
        m += reason != nullptr ? reason : "reason " + std::to_string(ERR_GET_REASON(e));
        return m;
    }
};

class x509_verify_category_impl final : public std::error_category {
public:
    [[nodiscard]] auto name() const noexcept -> const char* override { return "x509.verify"; }
    [[nodiscard]] auto message(int c) const -> std::string override {
        return std::string("certificate verify failed: ") + X509_verify_cert_error_string(c);
    }
};
}  // namespace

auto tls_category() noexcept -> const std::error_category& {
    static const tls_category_impl c;
    return c;
}

auto openssl_category() noexcept -> const std::error_category& {
    static const openssl_category_impl c;
    return c;
}

auto x509_verify_category() noexcept -> const std::error_category& {
    static const x509_verify_category_impl c;
    return c;
}

}  // namespace weft
