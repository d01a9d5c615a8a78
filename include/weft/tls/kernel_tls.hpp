#pragma once

#include <string_view>

namespace weft {

/// Whether the kernel offers kernel TLS: `tls` among the upper-layer protocols in
/// /proc/sys/net/ipv4/tcp_available_ulp (the `tls` module loaded). Read once per process.
///
/// weft reports it and does not use it: tls_stream encrypts in user space on every kernel.
/// kTLS (SSL_OP_ENABLE_KTLS, then sendfile of encrypted files) would only be switched on where
/// it can be tested end to end, byte for byte against the user-space path; a kernel without the
/// `tls` module cannot run that test.
[[nodiscard]] auto kernel_tls_available() noexcept -> bool;

namespace detail {
/// Whether a tcp_available_ulp list (names separated by spaces) holds `tls`.
[[nodiscard]] auto ulp_list_has_tls(std::string_view list) noexcept -> bool;
}  // namespace detail

}  // namespace weft
