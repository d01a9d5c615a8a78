#pragma once

#include <system_error>
#include <type_traits>

namespace weft {

/// Errors of weft::sync operations (category "weft.sync"). Would-block outcomes of the try_*
/// operations use the generic `std::errc::operation_would_block`; cancellation is
/// `std::errc::operation_canceled` and a timeout `std::errc::timed_out`, as everywhere in weft.
enum class sync_errc {
    closed = 1,  ///< the channel (or worker_pool) was closed
};

[[nodiscard]] auto sync_category() noexcept -> const std::error_category&;

[[nodiscard]] inline auto make_error_code(sync_errc e) noexcept -> std::error_code {
    return {static_cast<int>(e), sync_category()};
}

}  // namespace weft

template <>
struct std::is_error_code_enum<weft::sync_errc> : std::true_type {};
