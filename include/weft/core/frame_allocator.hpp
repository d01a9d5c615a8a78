#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory_resource>

#include "weft/core/config.hpp"

// Cached frames are poisoned when weft itself was built with AddressSanitizer, whatever the
// includer's flags (config.hpp says why). The runtime's functions, not ASan's
// ASAN_POISON_MEMORY_REGION macros: those expand to nothing in an uninstrumented includer.
#if WEFT_SANITIZE_ADDRESS
#include <sanitizer/asan_interface.h>
#define WEFT_POISON(p, n) __asan_poison_memory_region((p), (n))
#define WEFT_UNPOISON(p, n) __asan_unpoison_memory_region((p), (n))
#else
#define WEFT_POISON(p, n) ((void)(p), (void)(n))
#define WEFT_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace weft {

/// Counters of the calling thread's coroutine-frame cache. Tests use them to prove that a
/// steady-state workload takes no memory from the system allocator.
struct frame_allocator_stats {
    std::uint64_t system_allocs = 0;  ///< mallocs: a new 64 KiB slab, or one too-large frame
    std::uint64_t system_frees = 0;   ///< frees (only of too-large frames: slabs stay pooled)
    std::uint64_t recycled = 0;       ///< frames served from freed frames
};

/// This thread's counters (they are per thread: frames freed on another thread land there).
[[nodiscard]] auto this_thread_frame_stats() noexcept -> frame_allocator_stats;

/// Coroutine frames of weft tasks alive in the whole process (allocated and not yet freed, by
/// any thread, with any memory resource): tests use it to prove that a shutdown destroyed
/// every task. Computed from the slow paths' counts, so the fast paths pay nothing: blocks
/// carved from slabs, large and pmr frames, minus the blocks on every thread's free lists and
/// in the transfer cache.
/// NOTE: call it only while no other thread makes or frees frames (after a runtime was
/// destroyed, for instance): it reads the other threads' free-list counts, which they update
/// with plain stores.
[[nodiscard]] auto live_frames() noexcept -> std::int64_t;

namespace detail {

// Every weft coroutine frame is laid out as [header | frame]. The header records who owns the
// memory: nullptr = the per-thread recycling cache, otherwise the std::pmr::memory_resource the
// caller passed with std::allocator_arg. 16 bytes keep the frame 16-byte aligned.
struct alignas(16) frame_header {
    std::pmr::memory_resource* resource;
};

/// Frames up to this many bytes (header included) are recycled; larger ones go to malloc.
inline constexpr std::size_t max_recycled_frame = 2048;
/// Size classes of 64 bytes: class k holds blocks of (k + 1) * 64 bytes.
inline constexpr std::size_t frame_class_bytes = 64;
inline constexpr std::size_t frame_class_count = max_recycled_frame / frame_class_bytes;
/// A thread keeps at most this many bytes per class; past it, half moves to a shared pool.
inline constexpr std::size_t frame_class_cap_bytes = 64 * 1024;

struct free_block {
    free_block* next;
};

// The per-thread free lists, reached through an out-of-line accessor (see the NOTE at
// current_worker() in detail/worker_base.hpp: frames are allocated and freed inside coroutines,
// which may have moved threads since they last looked); the slow paths in frame_allocator.cpp
// register the thread-exit hand-back.
// Invariant per class k: count[k] == length of heads[k] <= cap_count(k) (except transiently
// inside frame_free_slow).
struct frame_lists {
    free_block* heads[frame_class_count];
    std::uint32_t count[frame_class_count];
    frame_allocator_stats stats;
    // live_frames()'s registry of threads (under its lock). A thread registers on its first
    // slow path, which comes before it holds any block: an empty class always takes the slow
    // path, both to allocate and to free.
    frame_lists* next_thread;
    bool registered;
};
[[nodiscard]] auto this_thread_frame_lists() noexcept -> frame_lists&;

constexpr auto frame_class_of(std::size_t bytes) noexcept -> std::size_t {
    return (bytes - 1) / frame_class_bytes;
}
constexpr auto frame_block_size(std::size_t k) noexcept -> std::size_t {
    return (k + 1) * frame_class_bytes;
}

[[nodiscard]] auto frame_alloc_slow(std::size_t bytes) -> void*;
void frame_free_slow(void* p, std::size_t bytes) noexcept;

[[nodiscard]] inline auto frame_alloc(std::size_t bytes) -> void* {
    if (bytes <= max_recycled_frame) {
        const std::size_t k = frame_class_of(bytes);
        frame_lists& l = this_thread_frame_lists();
        if (free_block* b = l.heads[k]) {
            WEFT_UNPOISON(b, frame_block_size(k));
            l.heads[k] = b->next;
            --l.count[k];
            ++l.stats.recycled;
            return b;
        }
    }
    return frame_alloc_slow(bytes);
}

inline void frame_free(void* p, std::size_t bytes) noexcept {
    if (bytes <= max_recycled_frame) {
        const std::size_t k = frame_class_of(bytes);
        frame_lists& l = this_thread_frame_lists();
        const std::uint32_t n = l.count[k];
        if (n != 0 && (n + 1) * frame_block_size(k) <= frame_class_cap_bytes) {
            auto* b = static_cast<free_block*>(p);
            b->next = l.heads[k];
            l.heads[k] = b;
            l.count[k] = n + 1;
            WEFT_POISON(static_cast<char*>(p) + sizeof(free_block),
                        frame_block_size(k) - sizeof(free_block));
            return;
        }
    }
    frame_free_slow(p, bytes);
}

/// A frame from a caller's memory resource (counted for live_frames()).
[[nodiscard]] auto allocate_with_resource(std::size_t bytes, std::pmr::memory_resource* r) -> void*;
void deallocate_with_resource(void* p, std::size_t bytes, std::pmr::memory_resource* r) noexcept;

[[nodiscard]] inline auto allocate_frame(std::size_t n, std::pmr::memory_resource* r) -> void* {
    const std::size_t total = n + sizeof(frame_header);
    void* raw = r == nullptr ? frame_alloc(total) : allocate_with_resource(total, r);
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
        deallocate_with_resource(h, total, h->resource);
    }
}

}  // namespace detail
}  // namespace weft
