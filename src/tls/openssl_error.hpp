#pragma once

// OpenSSL's error queue as std::error_code. NOTE: the queue is per thread, and a coroutine may
// resume on another worker between two OpenSSL calls: clear it right before a call and read it
// right after, with no co_await in between.

#include <openssl/err.h>

#include <system_error>

#include "weft/tls/error.hpp"

namespace weft::detail {

/// The first error OpenSSL queued on this thread (the queue is cleared); `fallback` if none.
[[nodiscard]] inline auto take_openssl_error(std::error_code fallback) noexcept -> std::error_code {
    const unsigned long e = ERR_get_error();
    ERR_clear_error();
    if (e == 0) {
        return fallback;
    }
    if (ERR_SYSTEM_ERROR(e)) {
        return {static_cast<int>(ERR_GET_REASON(e)), std::system_category()};
    }
    return {static_cast<int>(ERR_PACK(ERR_GET_LIB(e), 0, ERR_GET_REASON(e))), openssl_category()};
}

}  // namespace weft::detail
