#include "weft/core/frame_allocator.hpp"

#include <cstdlib>
#include <mutex>
#include <new>

namespace weft {
namespace detail {

namespace {
constinit thread_local frame_lists tl_frame_lists{};

// What live_frames() adds up. Updated on slow paths only.
struct frame_census {
    std::mutex mu;
    frame_lists* threads = nullptr;       // every thread with frame_lists, until it exits; under mu
    std::atomic<std::int64_t> carved{0};  // blocks ever carved from slabs (never returned)
    std::atomic<std::int64_t> transfer{0};  // blocks in the transfer stacks
    std::atomic<std::int64_t> unpooled{0};  // large and pmr frames alive
};
auto census() noexcept -> frame_census& {
    // Never destroyed: threads may exit (and unregister) after main returns.
    static auto* c = new frame_census;
    return *c;
}

void register_thread(frame_lists& l) noexcept;
}  // namespace

auto this_thread_frame_lists() noexcept -> frame_lists& { return tl_frame_lists; }

namespace {

// An empty class is refilled by carving a slab of this many bytes into blocks: one malloc
// instead of one per frame, so a burst of spawns costs a few instructions per frame.
constexpr std::size_t slab_bytes = 64 * 1024;

// Frames of up to max_recycled_frame bytes live in slabs that are never returned to the
// system: the memory of the peak number of live frames stays pooled for reuse. Frames often die
// on another thread than the one that made them (M:N: a spawner on one worker, its children
// finishing on another), so a thread's surplus moves here in batches and a thread that runs dry
// takes a batch back (one lock per batch, tcmalloc's transfer cache). Frames larger than
// max_recycled_frame use malloc/free directly.
//
// A batch on a transfer stack: its head block carries, after the link word, the next batch and
// the batch length.
struct batch_head {
    free_block* next;
    batch_head* next_batch;
    std::size_t count;
};

struct transfer_stack {
    std::mutex mu;
    batch_head* batches = nullptr;  // guarded by mu
};

transfer_stack g_transfer[frame_class_count];

// Moves the first `n` blocks of class k from this thread's list to the transfer stack.
void give_back(frame_lists& l, std::size_t k, std::uint32_t n) noexcept {
    free_block* head = l.heads[k];
    free_block* last = head;
    for (std::uint32_t i = 1; i < n; ++i) {
        last = last->next;  // the link word is never poisoned
    }
    l.heads[k] = last->next;
    last->next = nullptr;
    l.count[k] -= n;
    auto* bh = reinterpret_cast<batch_head*>(head);
    WEFT_UNPOISON(bh, sizeof(batch_head));
    bh->count = n;
    transfer_stack& t = g_transfer[k];
    std::lock_guard lock(t.mu);
    bh->next_batch = t.batches;
    t.batches = bh;
    census().transfer.fetch_add(n, std::memory_order_relaxed);
}

// Takes one batch of class k from the transfer stack into this thread's (empty) list.
auto take_batch(frame_lists& l, std::size_t k) noexcept -> bool {
    transfer_stack& t = g_transfer[k];
    batch_head* bh = nullptr;
    {
        std::lock_guard lock(t.mu);
        bh = t.batches;
        if (bh == nullptr) {
            return false;
        }
        t.batches = bh->next_batch;
        census().transfer.fetch_sub(static_cast<std::int64_t>(bh->count),
                                    std::memory_order_relaxed);
    }
    l.heads[k] = reinterpret_cast<free_block*>(bh);
    l.count[k] = static_cast<std::uint32_t>(bh->count);
    WEFT_POISON(reinterpret_cast<char*>(bh) + sizeof(free_block),
                sizeof(batch_head) - sizeof(free_block));
    return true;
}

void carve(frame_lists& l, std::size_t k) {
    const std::size_t size = frame_block_size(k);
    const std::size_t n = slab_bytes / size;
    auto* slab = static_cast<char*>(std::malloc(n * size));
    if (slab == nullptr) {
        throw std::bad_alloc();
    }
    ++l.stats.system_allocs;
    census().carved.fetch_add(static_cast<std::int64_t>(n), std::memory_order_relaxed);
    free_block* head = l.heads[k];
    for (std::size_t i = n; i-- > 0;) {
        auto* b = reinterpret_cast<free_block*>(slab + i * size);
        b->next = head;
        head = b;
        WEFT_POISON(slab + i * size + sizeof(free_block), size - sizeof(free_block));
    }
    l.heads[k] = head;
    l.count[k] += static_cast<std::uint32_t>(n);
}

// On thread exit, hands this thread's blocks to the transfer stacks for the threads that remain.
struct exit_hand_back {
    exit_hand_back() = default;
    exit_hand_back(const exit_hand_back&) = delete;
    auto operator=(const exit_hand_back&) -> exit_hand_back& = delete;
    ~exit_hand_back() {
        frame_lists& l = tl_frame_lists;
        for (std::size_t k = 0; k < frame_class_count; ++k) {
            if (l.count[k] != 0) {
                give_back(l, k, l.count[k]);
            }
        }
        if (l.registered) {
            frame_census& c = census();
            std::lock_guard lock(c.mu);
            for (frame_lists** p = &c.threads; *p != nullptr; p = &(*p)->next_thread) {
                if (*p == &l) {
                    *p = l.next_thread;
                    break;
                }
            }
            // Not re-registered if a later thread_local destructor frees a frame here: its
            // block stays on this dead list and counts as live (a bounded, rare error).
        }
    }
};
thread_local exit_hand_back tl_exit_hand_back;

void register_thread(frame_lists& l) noexcept {
    (void)&tl_exit_hand_back;  // hands back and unregisters at thread exit (first use builds it)
    frame_census& c = census();
    std::lock_guard lock(c.mu);
    l.next_thread = c.threads;
    c.threads = &l;
    l.registered = true;
}

}  // namespace

auto frame_alloc_slow(std::size_t bytes) -> void* {
    frame_lists& l = tl_frame_lists;
    if (bytes > max_recycled_frame) {
        void* p = std::malloc(bytes);
        if (p == nullptr) {
            throw std::bad_alloc();
        }
        ++l.stats.system_allocs;
        census().unpooled.fetch_add(1, std::memory_order_relaxed);
        return p;
    }
    if (!l.registered) {
        register_thread(l);  // before this thread holds a block
    }
    const std::size_t k = frame_class_of(bytes);
    if (!take_batch(l, k)) {
        carve(l, k);
    }
    return frame_alloc(bytes);
}

void frame_free_slow(void* p, std::size_t bytes) noexcept {
    frame_lists& l = tl_frame_lists;
    if (bytes > max_recycled_frame) {
        ++l.stats.system_frees;
        census().unpooled.fetch_sub(1, std::memory_order_relaxed);
        std::free(p);
        return;
    }
    if (!l.registered) {
        register_thread(l);  // before this thread holds a block
    }
    const std::size_t k = frame_class_of(bytes);
    auto* b = static_cast<free_block*>(p);
    b->next = l.heads[k];
    l.heads[k] = b;
    ++l.count[k];
    WEFT_POISON(static_cast<char*>(p) + sizeof(free_block),
                frame_block_size(k) - sizeof(free_block));
    if (l.count[k] > 1) {  // over the cap: half moves on (an empty class merely starts here)
        give_back(l, k, l.count[k] / 2);
    }
}

auto allocate_with_resource(std::size_t bytes, std::pmr::memory_resource* r) -> void* {
    void* p = r->allocate(bytes, alignof(frame_header));
    census().unpooled.fetch_add(1, std::memory_order_relaxed);
    return p;
}

void deallocate_with_resource(void* p, std::size_t bytes, std::pmr::memory_resource* r) noexcept {
    census().unpooled.fetch_sub(1, std::memory_order_relaxed);
    r->deallocate(p, bytes, alignof(frame_header));
}

}  // namespace detail

auto this_thread_frame_stats() noexcept -> frame_allocator_stats {
    return detail::tl_frame_lists.stats;
}

auto live_frames() noexcept -> std::int64_t {
    detail::frame_census& c = detail::census();
    std::lock_guard lock(c.mu);
    std::int64_t pooled = 0;  // blocks waiting on some thread's free lists
    for (const detail::frame_lists* l = c.threads; l != nullptr; l = l->next_thread) {
        for (const std::uint32_t n : l->count) {
            pooled += n;
        }
    }
    return c.carved.load(std::memory_order_relaxed) + c.unpooled.load(std::memory_order_relaxed) -
           c.transfer.load(std::memory_order_relaxed) - pooled;
}

}  // namespace weft
