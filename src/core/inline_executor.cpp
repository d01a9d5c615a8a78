#include <atomic>
#include <mutex>

#include "weft/core/sync_wait.hpp"

namespace weft {

void inline_executor::schedule_remote(std::coroutine_handle<> h) noexcept {
    {
        std::lock_guard lock(mu_);
        remote_.push_back(h);
        // Bumped under the lock: the owner cannot take h (and possibly finish and destroy
        // *this) before we are done with the members. Release pairs with the acquire in
        // run_until.
        wake_.fetch_add(1, std::memory_order_release);
    }
    // NOTE: *this may be gone by now; notify_one only hands the address to the kernel.
    wake_.notify_one();
}

void inline_executor::overflow(std::coroutine_handle<> h) {
    std::lock_guard lock(mu_);
    remote_.push_back(h);
}

void inline_executor::run_until(const std::atomic<bool>& done) {
    std::vector<std::coroutine_handle<>> batch;
    for (;;) {
        while (void* a = pop()) {
            std::coroutine_handle<>::from_address(a).resume();
        }
        const std::uint32_t seen = wake_.load(std::memory_order_acquire);
        {
            std::lock_guard lock(mu_);
            batch.swap(remote_);
        }
        if (!batch.empty()) {
            for (auto h : batch) {
                h.resume();
            }
            batch.clear();
            continue;
        }
        if (done.load(std::memory_order_acquire)) {
            return;
        }
        wake_.wait(seen, std::memory_order_acquire);
    }
}

}  // namespace weft
