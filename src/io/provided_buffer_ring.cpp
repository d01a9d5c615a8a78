#include "provided_buffer_ring.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <cstdlib>
#include <system_error>

#include "kernel_writes.hpp"

namespace weft::detail {

auto provided_buffer_ring::create(io_uring* ring) -> provided_buffer_ring* {
    auto* p = new provided_buffer_ring;
    void* br = nullptr;
    if (::posix_memalign(&br, 4096, count * sizeof(io_uring_buf)) != 0) {
        delete p;
        return nullptr;
    }
    p->br_ = static_cast<io_uring_buf_ring*>(br);
    io_uring_buf_ring_init(p->br_);
    io_uring_buf_reg reg{};
    reg.ring_addr = reinterpret_cast<std::uint64_t>(p->br_);
    reg.ring_entries = count;
    reg.bgid = group;
    if (io_uring_register_buf_ring(ring, &reg, 0) != 0) {
        delete p;  // an older kernel: receive falls back to heap buffers
        return nullptr;
    }
    p->mem_ = static_cast<std::byte*>(std::aligned_alloc(64, count * size));
    p->slots_ = new slot[count];
    p->owner_ = std::this_thread::get_id();
    for (unsigned i = 0; i < count; ++i) {
        p->slots_[i].pool = p;
        p->slots_[i].bid = i;
        p->slots_[i].release = &provided_buffer_ring::release;
    }
    p->grow();  // mem_ is only address space until a buffer is in the ring and used
    return p;
}

void provided_buffer_ring::grow() noexcept {
    const unsigned n = std::min(grow_by, count - added_);
    for (unsigned i = 0; i < n; ++i) {
        const unsigned bid = added_ + i;
        io_uring_buf_ring_add(br_, mem_ + bid * size, size, static_cast<unsigned short>(bid),
                              io_uring_buf_ring_mask(count), static_cast<int>(i));
    }
    io_uring_buf_ring_advance(br_, static_cast<int>(n));
    added_ += n;
}

provided_buffer_ring::~provided_buffer_ring() {
    std::free(br_);
    std::free(mem_);
    delete[] slots_;
}

namespace {

void count_out(std::int64_t n) noexcept {
    if (std::atomic<std::int64_t>* const out =
            provided_buffers_out_for_test.load(std::memory_order_relaxed)) {
        out->fetch_add(n, std::memory_order_relaxed);
    }
}

}  // namespace

auto provided_buffer_ring::take(unsigned bid, std::size_t len) noexcept -> bytes {
    count_out(1);
    refs_.fetch_add(1, std::memory_order_relaxed);
    slot& s = slots_[bid];
    s.refs.store(1, std::memory_order_relaxed);
    kernel_wrote(mem_ + bid * size, len);  // the receive's byte count, not the whole buffer
    return bytes(&s, mem_ + bid * size, len);
}

void provided_buffer_ring::give_back(unsigned bid) noexcept {
    kernel_will_write(mem_ + bid * size, size);
    io_uring_buf_ring_add(br_, mem_ + bid * size, size, static_cast<unsigned short>(bid),
                          io_uring_buf_ring_mask(count), 0);
    io_uring_buf_ring_advance(br_, 1);
    count_out(-1);
}

void provided_buffer_ring::release(bytes_block* b) noexcept {
    auto* s = static_cast<slot*>(b);
    provided_buffer_ring* p = s->pool;
    // orphaned_ is set by the owner under mu_: on the owner's thread it cannot change under us;
    // elsewhere it is read again under mu_, so a buffer is either in returned_ when orphan()
    // empties it or sees the ring gone (it goes with the pool) - counted back once either way.
    if (p->orphaned_.load(std::memory_order_acquire)) {
        count_out(-1);
    } else if (std::this_thread::get_id() == p->owner_) {
        p->give_back(s->bid);
    } else {
        std::lock_guard lock(p->mu_);
        if (p->orphaned_.load(std::memory_order_relaxed)) {
            count_out(-1);
        } else {
            p->returned_.push_back(s->bid);
            p->returns_waiting_.store(true, std::memory_order_release);
        }
    }
    p->unref();
}

void provided_buffer_ring::drain_returns() noexcept {
    // Every poll and park comes here: no lock unless another thread released a buffer (one
    // racing this look waits for the next poll; the ring has plenty meanwhile, and grows).
    if (!returns_waiting_.load(std::memory_order_acquire)) {
        return;
    }
    std::vector<unsigned> batch;
    {
        std::lock_guard lock(mu_);
        returns_waiting_.store(false, std::memory_order_relaxed);
        batch.swap(returned_);
    }
    for (unsigned bid : batch) {
        give_back(bid);
    }
}

void provided_buffer_ring::orphan(io_uring* ring) noexcept {
    io_uring_unregister_buf_ring(ring, group);
    std::size_t dropped = 0;  // released on other threads, not drained: they go with the pool
    {
        std::lock_guard lock(mu_);
        orphaned_.store(true, std::memory_order_release);
        dropped = returned_.size();
        returned_.clear();
        returns_waiting_.store(false, std::memory_order_relaxed);
    }
    count_out(-static_cast<std::int64_t>(dropped));
    unref();
}

void provided_buffer_ring::unref() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        delete this;
    }
}

}  // namespace weft::detail
