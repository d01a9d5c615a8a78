#include "weft/io/buffer.hpp"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <new>

namespace weft {
namespace {

// Pool blocks: [pooled_block header | capacity bytes]. Classes are powers of two from 1 KiB
// (class 0) to 1 MiB (class 10); a thread keeps at most keep_per_class blocks of a class and
// frees the rest. Reached only from out-of-line functions in this file (thread_locals are never
// read inline in code that may run inside a coroutine: see detail/worker_base.hpp).
constexpr std::size_t min_block = 1024;
constexpr unsigned class_count = 11;
constexpr unsigned keep_per_class = 32;
constexpr unsigned unpooled = ~0U;

struct pooled_block : detail::bytes_block {
    unsigned cls;
    std::size_t capacity;
    pooled_block* next_free;
};

struct thread_pool {
    pooled_block* free[class_count] = {};
    unsigned count[class_count] = {};
    buffer_pool_stats stats;
    thread_pool() = default;
    thread_pool(const thread_pool&) = delete;
    auto operator=(const thread_pool&) -> thread_pool& = delete;
    ~thread_pool() {
        for (auto* head : free) {
            while (head != nullptr) {
                pooled_block* next = head->next_free;
                head->~pooled_block();
                std::free(head);
                head = next;
            }
        }
    }
};

thread_local thread_pool tl_pool;

auto class_for(std::size_t n) noexcept -> unsigned {
    const std::size_t rounded = std::bit_ceil(std::max(n, min_block));
    const auto cls = static_cast<unsigned>(std::countr_zero(rounded / min_block));
    return cls < class_count ? cls : unpooled;
}

void give_back(detail::bytes_block* b) noexcept {
    auto* pb = static_cast<pooled_block*>(b);
    thread_pool& p = tl_pool;
    if (pb->cls != unpooled && p.count[pb->cls] < keep_per_class) {
        pb->next_free = p.free[pb->cls];
        p.free[pb->cls] = pb;
        ++p.count[pb->cls];
        return;
    }
    pb->~pooled_block();
    std::free(pb);
}

auto take(std::size_t n) -> pooled_block* {
    thread_pool& p = tl_pool;
    const unsigned cls = class_for(n);
    if (cls != unpooled && p.free[cls] != nullptr) {
        pooled_block* b = p.free[cls];
        p.free[cls] = b->next_free;
        --p.count[cls];
        ++p.stats.reused;
        b->refs.store(1, std::memory_order_relaxed);
        return b;
    }
    const std::size_t capacity = cls == unpooled ? n : (min_block << cls);
    void* raw = std::malloc(sizeof(pooled_block) + capacity);
    if (raw == nullptr) {
        throw std::bad_alloc();
    }
    ++p.stats.mallocs;
    auto* b = ::new (raw) pooled_block;
    b->release = &give_back;
    b->cls = cls;
    b->capacity = capacity;
    b->next_free = nullptr;
    return b;
}

auto payload(detail::bytes_block* b) noexcept -> std::byte* {
    return reinterpret_cast<std::byte*>(static_cast<pooled_block*>(b) + 1);
}

}  // namespace

auto this_thread_buffer_stats() noexcept -> buffer_pool_stats { return tl_pool.stats; }

void buffer::reserve(std::size_t n) {
    if (n <= capacity_) {
        return;
    }
    const std::size_t want = std::max(n, capacity_ * 2);
    pooled_block* b = take(want);
    const std::size_t keep = size_;
    if (keep != 0) {
        std::memcpy(payload(b), data_, keep);
    }
    release();  // the old storage (and resets the fields)
    block_ = b;
    data_ = payload(b);
    size_ = keep;
    capacity_ = b->capacity;
}

void buffer::append(std::span<const std::byte> more) {
    if (more.empty()) {
        return;
    }
    auto room = prepare(more.size());
    std::memcpy(room.data(), more.data(), more.size());
    commit(more.size());
}

auto buffer::prepare(std::size_t n) -> std::span<std::byte> {
    reserve(size_ + n);
    return {data_ + size_, n};
}

auto buffer::freeze() && -> bytes {
    if (block_ == nullptr) {
        return {};
    }
    bytes out(std::exchange(block_, nullptr), data_, size_);
    data_ = nullptr;
    size_ = capacity_ = 0;
    return out;
}

void buffer::release() noexcept {
    if (block_ != nullptr) {
        // This buffer held the only reference (freeze() hands it over instead).
        give_back(block_);
        block_ = nullptr;
    }
    data_ = nullptr;
    size_ = capacity_ = 0;
}

}  // namespace weft
