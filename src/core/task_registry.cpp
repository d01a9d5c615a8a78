#include "weft/core/detail/task_registry.hpp"

namespace weft::detail {

task_registry::~task_registry() {
    // A task may outlive its runtime (its join_handle is destroyed later, and with it the frame,
    // which then closes its record): while any record is live the chunks are left allocated.
    bool live = false;
    for_each([&](const task_record& r) {
        live = live || r.frame.load(std::memory_order_acquire) != nullptr;
    });
    if (live) {
        return;
    }
    const chunk* c = chunks_.load(std::memory_order_relaxed);
    while (c != nullptr) {
        const chunk* next = c->next;
        delete c;
        c = next;
    }
}

auto task_registry::refill() -> task_record* {
    std::size_t reclaimed = 0;
    std::size_t look = total_ < chunk_size ? total_ : chunk_size;
    if (skip_ > 0) {
        --skip_;
        look = 0;
    }
    for (std::size_t n = 0; n < look; ++n) {
        if (sweep_chunk_ == nullptr || sweep_index_ == sweep_chunk_->size) {
            sweep_chunk_ = sweep_chunk_ != nullptr && sweep_chunk_->next != nullptr
                               ? sweep_chunk_->next
                               : chunks_.load(std::memory_order_relaxed);
            sweep_index_ = 0;
        }
        task_record& r = sweep_chunk_->records[sweep_index_++];
        // acquire: pairs with close()'s release; the task's last writes to the record happen
        // before the reuse.
        if (!r.listed && r.frame.load(std::memory_order_acquire) == nullptr) {
            r.listed = true;
            r.next_free = free_;
            free_ = &r;
            ++reclaimed;
        }
    }
    if (look != 0) {
        if (reclaimed == 0) {
            backoff_ = backoff_ == 0 ? 1 : (backoff_ < 8 ? 2 * backoff_ : 8);
            skip_ = backoff_;
        } else {
            backoff_ = 0;
        }
    }
    if (2 * reclaimed < look || free_ == nullptr) {
        auto* c = new chunk(chunk_size);
        for (std::size_t i = chunk_size; i-- > 0;) {
            task_record& r = c->records[i];
            r.listed = true;
            r.next_free = free_;
            free_ = &r;
        }
        c->next = chunks_.load(std::memory_order_relaxed);
        total_ += chunk_size;
        chunks_.store(c, std::memory_order_release);  // publishes the chunk to readers
    }
    return free_;
}

}  // namespace weft::detail
