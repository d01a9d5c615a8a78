#include "blocking_pool.hpp"

#include <stdexcept>

#include "runtime_core.hpp"

namespace weft::detail {

blocking_pool::~blocking_pool() { stop_threads(); }

void blocking_pool::stop_threads() {
    std::vector<std::thread> threads;
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
        threads.swap(all_);
    }
    cv_.notify_all();
    for (auto& t : threads) {
        t.join();
    }
}

auto blocking_pool::submit(blocking_job& job) -> bool {
    std::unique_lock lock(mu_);
    if (job.st == blocking_job::state::cancelled) {  // stop arrived before we got the lock
        return false;
    }
    job.st = blocking_job::state::queued;
    job.q_next = nullptr;
    job.q_prev = tail_;
    if (tail_ != nullptr) {
        tail_->q_next = &job;
    } else {
        head_ = &job;
    }
    tail_ = &job;
    in_flight_.fetch_add(1, std::memory_order_seq_cst);
    if (idle_ == 0 && threads_ < max_threads_) {
        ++threads_;
        all_.emplace_back([this] { thread_main(); });
    }
    lock.unlock();
    cv_.notify_one();
    return true;
}

auto blocking_pool::cancel(blocking_job& job) noexcept -> bool {
    std::lock_guard lock(mu_);
    if (job.st == blocking_job::state::idle) {
        job.st = blocking_job::state::cancelled;  // submit sees it and does not queue
        return false;
    }
    if (job.st != blocking_job::state::queued) {
        return false;  // running or done: it finishes normally
    }
    if (job.q_prev != nullptr) {
        job.q_prev->q_next = job.q_next;
    } else {
        head_ = job.q_next;
    }
    if (job.q_next != nullptr) {
        job.q_next->q_prev = job.q_prev;
    } else {
        tail_ = job.q_prev;
    }
    job.st = blocking_job::state::cancelled;
    return true;
}

void blocking_pool::thread_main() {
    std::unique_lock lock(mu_);
    for (;;) {
        while (head_ == nullptr && !stopping_) {
            ++idle_;
            cv_.wait(lock);
            --idle_;
        }
        if (head_ == nullptr) {
            return;  // stopping and nothing queued
        }
        blocking_job* job = head_;
        head_ = job->q_next;
        if (head_ != nullptr) {
            head_->q_prev = nullptr;
        } else {
            tail_ = nullptr;
        }
        job->st = blocking_job::state::running;
        lock.unlock();
        job->run();
        lock.lock();
        job->st = blocking_job::state::done;
        runtime_core* rt = job->rt;
        std::coroutine_handle<> h = job->waiter;
        lock.unlock();
        // NOTE: job lives in the waiter's frame: it may be gone once h is queued.
        runtime_schedule(*rt, h);
        in_flight_.fetch_sub(1, std::memory_order_seq_cst);
        lock.lock();
    }
}

void blocking_job::on_stop(stop_callback_node* n) noexcept {
    auto* job = static_cast<blocking_job*>(n);
    runtime_core* rt = job->rt;
    std::coroutine_handle<> h = job->waiter;
    blocking_pool* pool = job->pool;
    if (pool->cancel(*job)) {
        // Queue the waiter before dropping the in-flight count, so shutdown never sees neither.
        runtime_schedule(*rt, h);
        pool->note_cancelled();
    }
}

auto blocking_submit(blocking_job& job, stop_state* stop, std::coroutine_handle<> h) -> bool {
    sched_worker* w = tl_sched_worker;
    if (w == nullptr) {
        throw std::logic_error("weft::spawn_blocking: not on a weft::runtime worker");
    }
    job.waiter = h;
    job.rt = &w->runtime();
    job.pool = &w->runtime().blocking;
    job.stop = stop;
    if (stop != nullptr) {
        if (!stop->try_add(&job)) {
            job.st = blocking_job::state::cancelled;
            return false;
        }
        job.registered = true;
    }
    return job.pool->submit(job);
}

auto blocking_finish(blocking_job& job) noexcept -> bool {
    if (job.registered) {
        job.stop->remove(&job);
        job.registered = false;
    }
    return job.st == blocking_job::state::done;
}

}  // namespace weft::detail
