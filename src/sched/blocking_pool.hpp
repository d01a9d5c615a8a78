#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>
#include <vector>

#include "weft/sched/spawn_blocking.hpp"

namespace weft::detail {

/// Threads for calls that can only block. Starts a thread when a job arrives and none is idle
/// (up to `max_threads`); threads then stay until the runtime ends. Jobs are an intrusive FIFO of
/// the awaiting frames' blocking_job nodes, so submitting never allocates.
class blocking_pool {
public:
    explicit blocking_pool(unsigned max_threads) noexcept : max_threads_(max_threads) {}
    blocking_pool(const blocking_pool&) = delete;
    auto operator=(const blocking_pool&) -> blocking_pool& = delete;
    ~blocking_pool();

    /// False if `job` must not suspend (stop already requested).
    auto submit(blocking_job& job) -> bool;
    /// Stop callback path: removes a still-queued job; true if it did (caller resumes waiter).
    auto cancel(blocking_job& job) noexcept -> bool;
    /// Jobs queued or running (for shutdown's quiescence check).
    [[nodiscard]] auto in_flight() const noexcept -> std::size_t {
        return in_flight_.load(std::memory_order_seq_cst);
    }
    void stop_threads();
    /// A queued job was cancelled (after its waiter has been queued to run).
    void note_cancelled() noexcept { in_flight_.fetch_sub(1, std::memory_order_seq_cst); }

private:
    void thread_main();

    const unsigned max_threads_;
    std::mutex mu_;
    std::condition_variable cv_;
    blocking_job* head_ = nullptr;  // guarded by mu_
    blocking_job* tail_ = nullptr;  // guarded by mu_
    unsigned threads_ = 0;          // guarded by mu_
    unsigned idle_ = 0;             // guarded by mu_
    bool stopping_ = false;         // guarded by mu_
    std::vector<std::thread> all_;  // guarded by mu_
    std::atomic<std::size_t> in_flight_{0};
};

}  // namespace weft::detail
