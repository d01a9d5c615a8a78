#pragma once

#include <system_error>
#include <type_traits>

namespace weft {

/// IO conditions that are not an errno: what weft reports as its own error codes.
enum class io_errc {
    eof = 1,              ///< the peer closed the connection (a read returned 0 bytes)
    backend_unavailable,  ///< the requested IO backend cannot run on this kernel
    too_long,  ///< a record passed the reader's limit before its delimiter (compares equal to
               ///< std::errc::message_size)
};

[[nodiscard]] auto io_category() noexcept -> const std::error_category&;

[[nodiscard]] inline auto make_error_code(io_errc e) noexcept -> std::error_code {
    return {static_cast<int>(e), io_category()};
}

}  // namespace weft

template <>
struct std::is_error_code_enum<weft::io_errc> : std::true_type {};
