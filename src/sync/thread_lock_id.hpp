#pragma once

#include <cstdint>

namespace weft::detail {

/// This thread's biased_lock id, 0 until first asked for (see this_thread_lock_id()).
/// NOTE: read only inside functions that are never inlined into a coroutine body (this
/// library's out-of-line functions), as tl_worker_unsafe_in_coroutines.
extern constinit thread_local std::uintptr_t tl_lock_id;

/// Gives this thread its id (the first call on each thread). Out of line: cold.
[[gnu::cold]] auto assign_thread_lock_id() noexcept -> std::uintptr_t;

/// this_thread_lock_id(), inline for the library's own out-of-line functions (this_thread_ids()
/// reads both thread ids in one call per channel operation).
inline auto thread_lock_id_here() noexcept -> std::uintptr_t {
    const std::uintptr_t id = tl_lock_id;
    return id != 0 ? id : assign_thread_lock_id();
}

}  // namespace weft::detail
