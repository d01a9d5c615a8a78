// wait_for_signal: a handler records each signal and rings the eventfd of every task waiting for
// it; the task waits for its eventfd through its worker's reactor.
//
// The handler runs on whichever thread the kernel picks (any thread that does not block the
// signal), so no thread's mask matters. What it touches is async-signal-safe: lock-free atomics
// and write(2) on eventfds that are never closed.
//
// State, all process-wide and never destroyed (a signal may come during exit):
// - arrived[s]: signal s came and no wait has taken it yet. A flag, so several sends before a
//   wait takes one count as one, as the kernel keeps a blocked signal.
// - a list of waiter slots. A slot is an eventfd made with the slot and the set of signals of
//   the wait that holds it (0 while free). Slots are pushed at the head and never unlinked nor
//   freed, and a slot's eventfd and `next` are written before it is published: the handler can
//   walk the list at any moment. Their number is the most waits ever pending at once.
//
// The two sides, each a store then a load, all seq_cst, so at least one sees the other:
//   handler: arrived[s] = true; then for every slot whose set holds s: write its eventfd.
//   wait:    slot.set = S;      then take any arrived[s], s in S (exchange to false).
// A signal the wait's first look misses rings its eventfd. After a wake-up the wait first
// empties its eventfd (a read), then looks again: a signal whose write came before that read
// set its flag before it, so the look finds it (or another wait took it); one whose write came
// after leaves the eventfd readable, and the wait wakes again. No signal is lost and no wait
// spins: a wait's eventfd is written only for signals of its own set.

#include "weft/io/signal.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>

#include "weft/io/fd_wait.hpp"

namespace weft {
namespace {

constexpr int max_signal = 64;

struct waiter_slot {
    int efd = -1;                       // set before the slot is published
    std::atomic<std::uint64_t> set{0};  // signals of the wait that holds it; 0: free
    std::atomic<bool> held{false};      // a wait owns the slot (set may still be 0)
    waiter_slot* next = nullptr;        // set before the slot is published
};

static_assert(std::atomic<bool>::is_always_lock_free);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
static_assert(std::atomic<waiter_slot*>::is_always_lock_free);

// Constant-initialised: ready before any static initialiser, and never destroyed.
constinit std::array<std::atomic<bool>, max_signal + 1> arrived{};
constinit std::atomic<waiter_slot*> slots{nullptr};

auto bit(int sig) -> std::uint64_t { return std::uint64_t{1} << (sig - 1); }

void on_signal(int sig) {
    const int saved_errno = errno;
    arrived[sig].store(true, std::memory_order_seq_cst);
    const std::uint64_t one = 1;
    for (waiter_slot* s = slots.load(std::memory_order_acquire); s != nullptr; s = s->next) {
        if ((s->set.load(std::memory_order_seq_cst) & bit(sig)) != 0) {
            [[maybe_unused]] const ssize_t n = ::write(s->efd, &one, sizeof(one));
        }
    }
    errno = saved_errno;
}

auto signal_name(int sig) -> std::string {
    const char* abbrev = ::sigabbrev_np(sig);
    return abbrev != nullptr ? "SIG" + std::string(abbrev) : "signal " + std::to_string(sig);
}

// Installs on_signal for every signal of `signals` that does not have it yet, once per signal
// for the life of the process.
void install_handlers(signal_set signals) {
    static std::mutex mu;
    static std::uint64_t installed = 0;  // guarded by mu
    std::lock_guard lock(mu);
    for (int sig = 1; sig <= max_signal; ++sig) {
        if (!signals.contains(sig) || (installed & bit(sig)) != 0) {
            continue;
        }
        struct sigaction sa {};
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        // Restart what the handler interrupts: other threads' blocking calls must not fail
        // with EINTR because a signal came for weft.
        sa.sa_flags = SA_RESTART;
        if (::sigaction(sig, &sa, nullptr) != 0) {
            throw std::system_error(errno, std::system_category(),
                                    "weft::wait_for_signal: sigaction(" + signal_name(sig) + ")");
        }
        installed |= bit(sig);
    }
}

// A free slot, or a new one; nullptr with errno set when no eventfd can be made.
auto hold_slot() -> waiter_slot* {
    for (waiter_slot* s = slots.load(std::memory_order_acquire); s != nullptr; s = s->next) {
        if (!s->held.load(std::memory_order_relaxed) &&
            !s->held.exchange(true, std::memory_order_acquire)) {
            return s;
        }
    }
    const int efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (efd < 0) {
        return nullptr;
    }
    auto* s = new waiter_slot;  // never freed: the handler may be walking the list
    s->efd = efd;
    s->held.store(true, std::memory_order_relaxed);
    s->next = slots.load(std::memory_order_relaxed);
    // release publishes efd and next to the handler's and hold_slot's acquire loads.
    while (!slots.compare_exchange_weak(s->next, s, std::memory_order_release,
                                        std::memory_order_relaxed)) {
    }
    return s;
}

// Gives the slot back however the wait ends (a signal, an error, the frame destroyed).
struct slot_holder {
    explicit slot_holder(waiter_slot* s) noexcept : slot(s) {}
    slot_holder(const slot_holder&) = delete;
    auto operator=(const slot_holder&) -> slot_holder& = delete;
    ~slot_holder() {
        slot->set.store(0, std::memory_order_seq_cst);
        // A ring meant for this wait would only wake the next holder for nothing.
        std::uint64_t count = 0;
        [[maybe_unused]] const ssize_t n = ::read(slot->efd, &count, sizeof(count));
        // release: the next holder sees the slot emptied.
        slot->held.store(false, std::memory_order_release);
    }
    waiter_slot* slot;
};

auto take_arrived(std::uint64_t set) -> int {
    for (int sig = 1; sig <= max_signal; ++sig) {
        if ((set & bit(sig)) != 0 && arrived[sig].exchange(false, std::memory_order_seq_cst)) {
            return sig;
        }
    }
    return 0;
}

auto wait_for_set(std::uint64_t set) -> task<result<int>> {
    waiter_slot* slot = hold_slot();
    if (slot == nullptr) {
        co_return std::error_code(errno, std::system_category());
    }
    const slot_holder holder(slot);
    slot->set.store(set, std::memory_order_seq_cst);
    for (;;) {
        if (const int sig = take_arrived(set); sig != 0) {
            co_return sig;
        }
        if (auto r = co_await wait_readable(slot->efd); !r) {
            co_return r.error();  // cancelled: a signal that comes later stays for the next wait
        }
        std::uint64_t count = 0;
        [[maybe_unused]] const ssize_t n = ::read(slot->efd, &count, sizeof(count));
    }
}

// Raised by a fault of the thread itself: a handler that returns runs the faulting instruction
// again, forever.
auto is_fault_signal(int sig) -> bool {
    return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGTRAP ||
           sig == SIGSYS;
}

}  // namespace

auto signal_set::add(int signal) -> signal_set& {
    // sigaddset also refuses the signals glibc keeps for itself (thread cancellation, setxid).
    sigset_t probe;
    sigemptyset(&probe);
    if (signal < 1 || signal > max_signal || signal == SIGKILL || signal == SIGSTOP ||
        sigaddset(&probe, signal) != 0) {
        throw std::invalid_argument("weft::signal_set: " + std::to_string(signal) +
                                    " is not a signal that can be caught");
    }
    bits_ |= bit(signal);
    return *this;
}

auto signal_set::contains(int signal) const noexcept -> bool {
    return signal >= 1 && signal <= max_signal && (bits_ & bit(signal)) != 0;
}

auto signal_set::to_sigset() const noexcept -> sigset_t {
    sigset_t set;
    sigemptyset(&set);
    for (int s = 1; s <= max_signal; ++s) {
        if (contains(s)) {
            sigaddset(&set, s);
        }
    }
    return set;
}

// Not a coroutine: the set is checked and the handlers installed here, at the call, so a
// misuse throws where it is easiest to see and a signal sent once this returns is kept.
auto wait_for_signal(signal_set signals) -> task<result<int>> {
    if (signals.empty()) {
        throw std::invalid_argument("weft::wait_for_signal: no signal given");
    }
    std::uint64_t set = 0;
    for (int sig = 1; sig <= max_signal; ++sig) {
        if (!signals.contains(sig)) {
            continue;
        }
        if (is_fault_signal(sig)) {
            throw std::invalid_argument("weft::wait_for_signal: " + signal_name(sig) +
                                        " reports a fault of the thread that raised it");
        }
        set |= bit(sig);
    }
    install_handlers(signals);
    return wait_for_set(set);
}

}  // namespace weft
