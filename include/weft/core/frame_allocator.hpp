#pragma once

#include <cstddef>
#include <cstdint>
#include <memory_resource>

namespace weft {

/// Counters of the calling thread's coroutine-frame cache. Tests use them to prove that a
/// steady-state workload takes no memory from the system allocator.
struct frame_allocator_stats {
    std::uint64_t system_allocs = 0;  ///< frames taken from malloc (cache miss or too large)
    std::uint64_t system_frees = 0;   ///< frames given back to free (cache full or too large)
    std::uint64_t recycled = 0;       ///< frames served from the cache
};

/// This thread's counters (they are per thread: frames freed on another thread land there).
[[nodiscard]] auto this_thread_frame_stats() noexcept -> frame_allocator_stats;

namespace detail {

// Every weft coroutine frame is laid out as [header | frame]. The header records who owns the
// memory: nullptr = the per-thread recycling cache, otherwise the std::pmr::memory_resource the
// caller passed with std::allocator_arg. 16 bytes keep the frame 16-byte aligned.
struct alignas(16) frame_header {
    std::pmr::memory_resource* resource;
};

/// Frames up to this many bytes (header included) are recycled; larger ones go to malloc.
inline constexpr std::size_t max_recycled_frame = 2048;

[[nodiscard]] auto frame_alloc(std::size_t bytes) -> void*;
void frame_free(void* p, std::size_t bytes) noexcept;

[[nodiscard]] inline auto allocate_frame(std::size_t n, std::pmr::memory_resource* r) -> void* {
    const std::size_t total = n + sizeof(frame_header);
    void* raw = r == nullptr ? frame_alloc(total) : r->allocate(total, alignof(frame_header));
    auto* h = static_cast<frame_header*>(raw);
    h->resource = r;
    return h + 1;
}

inline void deallocate_frame(void* frame, std::size_t n) noexcept {
    auto* h = static_cast<frame_header*>(frame) - 1;
    const std::size_t total = n + sizeof(frame_header);
    if (h->resource == nullptr) {
        frame_free(h, total);
    } else {
        h->resource->deallocate(h, total, alignof(frame_header));
    }
}

}  // namespace detail
}  // namespace weft
