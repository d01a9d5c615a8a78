#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "weft/sched/spawn_blocking.hpp"

namespace weft::detail {

/// Test hook: the next `n` thread creations of every blocking pool throw std::system_error.
void fail_next_blocking_threads_for_test(int n) noexcept;

/// Threads for calls that can only block. Starts a thread when a job arrives and none is idle
/// (up to `max_threads`); threads then stay until the runtime ends. Jobs are an intrusive FIFO of
/// the awaiting frames' blocking_job nodes, so submitting never allocates.
///
/// Lifetime: the queue and its lock live in a block shared with the threads, so that a runtime
/// whose shutdown deadline passed can abandon the threads still inside a call (abandon()): they
/// finish the call, touch nothing of the runtime, and exit on their own.
class blocking_pool {
public:
    explicit blocking_pool(unsigned max_threads);
    blocking_pool(const blocking_pool&) = delete;
    auto operator=(const blocking_pool&) -> blocking_pool& = delete;
    ~blocking_pool();

    /// False if `job` must not suspend (stop already requested). Throws std::system_error when
    /// no thread exists and none can be created (nothing is queued then).
    auto submit(blocking_job& job) -> bool;
    /// Stop callback path: removes a still-queued job; true if it did (caller resumes waiter).
    auto cancel(blocking_job& job) noexcept -> bool;
    /// Jobs queued or running (for shutdown's quiescence check).
    [[nodiscard]] auto in_flight() const noexcept -> std::size_t {
        return s_->in_flight.load(std::memory_order_seq_cst);
    }
    /// Threads started and still there, and of those the ones inside a call (runtime::metrics).
    [[nodiscard]] auto threads() const -> std::pair<unsigned, unsigned> {
        std::lock_guard lock(s_->mu);
        return {s_->threads, s_->running};
    }
    /// Joins every thread (after they finished what they were running), or, once abandoned,
    /// detaches them.
    void stop_threads();
    /// Shutdown deadline passed: calls still running will not resume their tasks (those stay
    /// suspended for good, their frames leaked, since the calls still write into them). Returns
    /// how many were running.
    auto abandon() -> std::size_t;
    /// A queued job was cancelled (after its waiter has been queued to run).
    void note_cancelled() noexcept { s_->in_flight.fetch_sub(1, std::memory_order_seq_cst); }

private:
    struct shared {
        std::mutex mu;
        std::condition_variable cv;
        blocking_job* head = nullptr;  // guarded by mu
        blocking_job* tail = nullptr;  // guarded by mu
        unsigned threads = 0;          // guarded by mu
        unsigned idle = 0;             // guarded by mu
        unsigned running = 0;          // guarded by mu: threads inside job->run()
        bool stopping = false;         // guarded by mu
        bool abandoned = false;        // guarded by mu
        std::atomic<std::size_t> in_flight{0};
    };
    static void thread_main(const std::shared_ptr<shared>& s);
    static auto make_thread(std::function<void()> fn) -> std::thread;

    const unsigned max_threads_;
    std::shared_ptr<shared> s_;
    std::vector<std::thread> all_;  // guarded by s_->mu
};

}  // namespace weft::detail
