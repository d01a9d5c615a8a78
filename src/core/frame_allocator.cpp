#include "weft/core/frame_allocator.hpp"

#include <cstdlib>
#include <new>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WEFT_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define WEFT_ASAN 1
#endif
#ifdef WEFT_ASAN
#include <sanitizer/asan_interface.h>
#define WEFT_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define WEFT_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define WEFT_POISON(p, n) ((void)(p), (void)(n))
#define WEFT_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace weft {
namespace {

// Size classes of 64 bytes: class k holds blocks of (k + 1) * 64 bytes.
constexpr std::size_t class_bytes = 64;
constexpr std::size_t class_count = detail::max_recycled_frame / class_bytes;
// A thread keeps at most this many bytes per class. Frames often die on another thread than the
// one that made them (M:N); the cap stops a consumer thread from hoarding what a producer
// thread then has to malloc again, and bounds the memory a burst leaves behind.
constexpr std::size_t class_cap_bytes = 256 * 1024;

struct free_block {
    free_block* next;
};

// Invariant per class k: count[k] == length of the list heads[k], and
// count[k] * block_size(k) <= class_cap_bytes. Listed blocks are poisoned under ASan except for
// their first word (the link), so a use of a destroyed frame is reported.
struct frame_cache {
    free_block* heads[class_count] = {};
    std::uint32_t count[class_count] = {};
    frame_allocator_stats stats;

    constexpr frame_cache() = default;
    frame_cache(const frame_cache&) = delete;
    auto operator=(const frame_cache&) -> frame_cache& = delete;
    ~frame_cache() {
        for (std::size_t k = 0; k < class_count; ++k) {
            while (free_block* b = heads[k]) {
                WEFT_UNPOISON(b, (k + 1) * class_bytes);
                heads[k] = b->next;
                std::free(b);
            }
        }
    }
};

thread_local frame_cache tl_cache;

}  // namespace

auto this_thread_frame_stats() noexcept -> frame_allocator_stats { return tl_cache.stats; }

namespace detail {

auto frame_alloc(std::size_t bytes) -> void* {
    frame_cache& c = tl_cache;
    if (bytes <= max_recycled_frame) {
        const std::size_t k = (bytes - 1) / class_bytes;
        if (free_block* b = c.heads[k]) {
            WEFT_UNPOISON(b, (k + 1) * class_bytes);
            c.heads[k] = b->next;
            --c.count[k];
            ++c.stats.recycled;
            return b;
        }
        bytes = (k + 1) * class_bytes;
    }
    ++c.stats.system_allocs;
    void* p = std::malloc(bytes);
    if (p == nullptr) {
        throw std::bad_alloc();
    }
    return p;
}

void frame_free(void* p, std::size_t bytes) noexcept {
    frame_cache& c = tl_cache;
    if (bytes <= max_recycled_frame) {
        const std::size_t k = (bytes - 1) / class_bytes;
        const std::size_t block = (k + 1) * class_bytes;
        if ((c.count[k] + 1) * block <= class_cap_bytes) {
            auto* b = static_cast<free_block*>(p);
            b->next = c.heads[k];
            c.heads[k] = b;
            ++c.count[k];
            WEFT_POISON(reinterpret_cast<char*>(b) + sizeof(free_block),
                        block - sizeof(free_block));
            return;
        }
    }
    ++c.stats.system_frees;
    std::free(p);
}

}  // namespace detail
}  // namespace weft
