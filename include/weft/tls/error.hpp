#pragma once

#include <system_error>
#include <type_traits>

namespace weft {

/// TLS conditions that are weft's own (not a reason from OpenSSL's error queue).
enum class tls_errc {
    /// The peer closed the TCP connection without a close_notify: the data may be cut short
    /// (a truncation attack looks the same). Protocols that frame their own messages (HTTP/1.1
    /// with a length) may treat it as eof.
    truncated = 1,
    /// An earlier operation failed, or a write was cancelled part-way: the record stream is
    /// broken and every later operation reports this.
    unusable,
};

/// weft's own TLS conditions (tls_errc).
[[nodiscard]] auto tls_category() noexcept -> const std::error_category&;

/// Reasons from OpenSSL's error queue. The value is ERR_PACK(library, 0, reason) of the first
/// error OpenSSL queued for the failed call; message() names the library and the reason, as
/// OpenSSL does ("SSL routines: unsupported protocol").
[[nodiscard]] auto openssl_category() noexcept -> const std::error_category&;

/// Certificate verification failures: the value is the X509_V_ERR_* code that
/// SSL_get_verify_result gave, message() OpenSSL's X509_verify_cert_error_string
/// ("certificate has expired", "hostname mismatch", "self-signed certificate", ...).
[[nodiscard]] auto x509_verify_category() noexcept -> const std::error_category&;

[[nodiscard]] inline auto make_error_code(tls_errc e) noexcept -> std::error_code {
    return {static_cast<int>(e), tls_category()};
}

}  // namespace weft

template <>
struct std::is_error_code_enum<weft::tls_errc> : std::true_type {};
