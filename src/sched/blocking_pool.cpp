#include "blocking_pool.hpp"

#include <functional>
#include <stdexcept>
#include <system_error>

#include "runtime_core.hpp"

namespace weft::detail {

blocking_pool::blocking_pool(unsigned max_threads)
    : max_threads_(max_threads), s_(std::make_shared<shared>()) {}

blocking_pool::~blocking_pool() { stop_threads(); }

void blocking_pool::stop_threads() {
    std::vector<std::thread> threads;
    bool abandoned = false;
    {
        std::lock_guard lock(s_->mu);
        s_->stopping = true;
        abandoned = s_->abandoned;
        threads.swap(all_);
    }
    s_->cv.notify_all();
    for (auto& t : threads) {
        if (abandoned) {
            t.detach();  // it holds the shared block; it exits after its call
        } else {
            t.join();
        }
    }
}

auto blocking_pool::abandon() -> std::size_t {
    std::lock_guard lock(s_->mu);
    s_->abandoned = true;
    return s_->running;
}

auto blocking_pool::submit(blocking_job& job) -> bool {
    shared& s = *s_;
    std::unique_lock lock(s.mu);
    if (job.st == blocking_job::state::cancelled) {  // stop arrived before we got the lock
        return false;
    }
    // A thread first: what can throw (std::thread's constructor, the vector's growth) comes
    // before the job is linked or counted, so a failure leaves nothing pointing into the
    // awaiting frame. With threads running already, the job waits for one of them instead.
    if (s.idle == 0 && s.threads < max_threads_) {
        try {
            all_.reserve(all_.size() + 1);
            all_.push_back(make_thread([sp = s_] { thread_main(sp); }));
            ++s.threads;
        } catch (...) {
            if (s.threads == 0) {
                throw;  // nobody would ever run it
            }
        }
    }
    job.st = blocking_job::state::queued;
    job.q_next = nullptr;
    job.q_prev = s.tail;
    if (s.tail != nullptr) {
        s.tail->q_next = &job;
    } else {
        s.head = &job;
    }
    s.tail = &job;
    s.in_flight.fetch_add(1, std::memory_order_seq_cst);
    lock.unlock();
    s.cv.notify_one();
    return true;
}

auto blocking_pool::cancel(blocking_job& job) noexcept -> bool {
    shared& s = *s_;
    std::lock_guard lock(s.mu);
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
        s.head = job.q_next;
    }
    if (job.q_next != nullptr) {
        job.q_next->q_prev = job.q_prev;
    } else {
        s.tail = job.q_prev;
    }
    job.st = blocking_job::state::cancelled;
    return true;
}

void blocking_pool::thread_main(const std::shared_ptr<shared>& sp) {
    shared& s = *sp;
    std::unique_lock lock(s.mu);
    for (;;) {
        while (s.head == nullptr && !s.stopping) {
            ++s.idle;
            s.cv.wait(lock);
            --s.idle;
        }
        if (s.head == nullptr || s.abandoned) {
            return;  // stopping and nothing queued
        }
        blocking_job* job = s.head;
        s.head = job->q_next;
        if (s.head != nullptr) {
            s.head->q_prev = nullptr;
        } else {
            s.tail = nullptr;
        }
        job->st = blocking_job::state::running;
        ++s.running;
        lock.unlock();
        job->run();
        lock.lock();
        --s.running;
        if (s.abandoned) {
            return;  // the runtime is gone: its task stays suspended (see abandon)
        }
        job->st = blocking_job::state::done;
        // Under the lock, so that abandon() cannot pass between the check above and this: the
        // runtime is alive until its shutdown has abandoned us or joined us.
        // NOTE: job lives in the waiter's frame: it may be gone once the waiter is queued.
        runtime_schedule(*job->rt, job->waiter);
        s.in_flight.fetch_sub(1, std::memory_order_seq_cst);
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

namespace {
std::atomic<int> g_thread_failures_for_test{0};
}  // namespace

void fail_next_blocking_threads_for_test(int n) noexcept {
    g_thread_failures_for_test.store(n, std::memory_order_relaxed);
}

auto blocking_pool::make_thread(std::function<void()> fn) -> std::thread {
    if (g_thread_failures_for_test.load(std::memory_order_relaxed) > 0) {
        g_thread_failures_for_test.fetch_sub(1, std::memory_order_relaxed);
        throw std::system_error(EAGAIN, std::system_category(),
                                "weft blocking pool: thread creation failed (test)");
    }
    return std::thread(std::move(fn));
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
    try {
        return job.pool->submit(job);
    } catch (...) {
        // The exception reaches the task as if await_suspend had not suspended: await_resume
        // (and with it blocking_finish) never runs, so the stop callback goes here.
        if (job.registered) {
            job.stop->remove(&job);
            job.registered = false;
        }
        throw;
    }
}

auto blocking_finish(blocking_job& job) noexcept -> bool {
    if (job.registered) {
        job.stop->remove(&job);
        job.registered = false;
    }
    return job.st == blocking_job::state::done;
}

}  // namespace weft::detail
