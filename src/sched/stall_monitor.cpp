#include "stall_monitor.hpp"

#include <execinfo.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <mutex>
#include <string>
#include <system_error>

#include "runtime_core.hpp"

namespace weft::detail {

constinit thread_local sched_worker::stack_capture* tl_stack_capture = nullptr;

namespace {

// Signals counted by the dump_signal handler; each runtime's monitor compares it with the
// count it saw last. Lock-free, so a handler may touch it.
std::atomic<std::uint64_t> g_dump_requests{0};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

// How long report() waits for the stalled worker's handler to record its stack.
constexpr std::chrono::milliseconds stack_wait{100};

extern "C" void on_stack_signal(int /*sig*/) {
    const int saved = errno;
    // backtrace() is safe here once libgcc is loaded: the monitor calls it once before the
    // handler is installed (its first call may load it, which allocates).
    if (sched_worker::stack_capture* c = tl_stack_capture) {
        const std::uint64_t want = c->requested.load(std::memory_order_acquire);
        if (want != c->answered.load(std::memory_order_relaxed)) {
            c->depth = ::backtrace(c->frames, sched_worker::stack_capture::max_depth);
            c->answered.store(want, std::memory_order_release);  // publishes frames to report()
        }
    }
    errno = saved;
}

extern "C" void on_dump_signal(int /*sig*/) {
    g_dump_requests.fetch_add(1, std::memory_order_relaxed);
}

void install(int sig, void (*fn)(int)) {
    struct sigaction sa {};
    sa.sa_handler = fn;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (::sigaction(sig, &sa, nullptr) != 0) {
        throw std::system_error(errno, std::system_category(), "weft: sigaction");
    }
}

std::once_flag g_stack_handler;

}  // namespace

auto stall_monitor::stack_signal() noexcept -> int { return SIGRTMIN + 4; }

stall_monitor::stall_monitor(runtime_core& rt)
    : rt_(rt),
      threshold_(rt.opts.stall_threshold
                     ? std::max(*rt.opts.stall_threshold, std::chrono::milliseconds{0})
                     : std::chrono::milliseconds{0}),
      watches_(rt.workers.size()) {
    if (threshold_.count() > 0) {
        std::call_once(g_stack_handler, [] {
            void* warm[1];
            (void)::backtrace(warm, 1);
            install(stack_signal(), on_stack_signal);
        });
    }
    if (rt.opts.dump_signal != 0) {
        dumps_seen_ = g_dump_requests.load(std::memory_order_relaxed);
        install(rt.opts.dump_signal, on_dump_signal);
    }
    // The constructor returns once the thread runs. Its start is a virtual call into the
    // thread's state, which UBSan checks by probing the vtable's memory through a pipe: started
    // later, it could fall in a moment the program has used every descriptor (a server at its
    // limit), and the probe's failure reads as an invalid object.
    thread_ = std::thread([this] { run(); });
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return started_; });
}

stall_monitor::~stall_monitor() {
    {
        std::lock_guard lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

void stall_monitor::run() {
    std::chrono::milliseconds tick{50};
    if (threshold_.count() > 0) {
        tick = std::clamp(threshold_ / 2, std::chrono::milliseconds{1}, tick);
    }
    std::unique_lock lock(mu_);
    started_ = true;
    cv_.notify_all();
    while (!stop_) {
        cv_.wait_for(lock, tick);
        if (stop_) {
            break;
        }
        lock.unlock();
        if (rt_.opts.dump_signal != 0) {
            const std::uint64_t n = g_dump_requests.load(std::memory_order_relaxed);
            if (n != dumps_seen_) {
                dumps_seen_ = n;
                rt_.dump().print(stderr);
            }
        }
        if (threshold_.count() > 0) {
            check(std::chrono::steady_clock::now());
        }
        lock.lock();
    }
}

void stall_monitor::check(std::chrono::steady_clock::time_point now) {
    for (std::size_t i = 0; i < rt_.workers.size(); ++i) {
        sched_worker& w = *rt_.workers[i];
        watch& x = watches_[i];
        const std::uint64_t b = w.beat.load(std::memory_order_relaxed);
        if ((b & 1) == 0) {
            continue;  // in its loop, or parked
        }
        if (b != x.beat) {
            x.beat = b;  // a task entered since the last look: its clock starts now
            x.since = now;
            continue;
        }
        if (x.reported != b && now - x.since >= threshold_) {
            x.reported = b;  // once per stall
            report(w);
        }
    }
}

void stall_monitor::report(sched_worker& w) {
    sched_worker::bump(w.stalls);
    stall_report r{.worker = w.index(), .threshold = threshold_};
    void* running = w.running.load(std::memory_order_relaxed);
    rt_.for_each_record([&](const task_record& rec) {
        const void* f = rec.frame.load(std::memory_order_acquire);
        if (f == nullptr || running == nullptr) {
            return;
        }
        if (f == running || rec.leaf.load(std::memory_order_relaxed) == running ||
            rec.woken.load(std::memory_order_relaxed) == running) {
            r.task_id = rec.id.load(std::memory_order_relaxed);
            const char* name = rec.name.load(std::memory_order_relaxed);
            r.task_name = name != nullptr ? name : "";
            r.task_site = rec.site.load(std::memory_order_relaxed);
        }
    });
    // The monitor is the only writer of `requested`.
    const std::uint64_t request = w.capture.requested.load(std::memory_order_relaxed) + 1;
    w.capture.requested.store(request, std::memory_order_release);
    if (::pthread_kill(w.native_handle(), stack_signal()) == 0) {
        const auto until = std::chrono::steady_clock::now() + stack_wait;
        bool answered = false;
        while (!(answered = w.capture.answered.load(std::memory_order_acquire) == request) &&
               std::chrono::steady_clock::now() < until) {
            std::this_thread::sleep_for(std::chrono::milliseconds{1});
        }
        if (answered && w.capture.depth > 0) {
            r.stack.assign(w.capture.frames, w.capture.frames + w.capture.depth);
        }
    }
    if (rt_.opts.on_stall) {
        rt_.opts.on_stall(r);
    } else {
        const std::string text = r.to_string();
        std::fwrite(text.data(), 1, text.size(), stderr);
    }
}

}  // namespace weft::detail
