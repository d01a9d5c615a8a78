#include "weft/io/signal.hpp"

#include <pthread.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>

#include "weft/io/fd_wait.hpp"

namespace weft {
namespace {

auto signal_name(int sig) -> std::string {
    const char* abbrev = ::sigabbrev_np(sig);
    return abbrev != nullptr ? "SIG" + std::string(abbrev) : "signal " + std::to_string(sig);
}

// Closes the signalfd however the wait ends (a value, an error, or the frame destroyed at
// shutdown).
struct fd_closer {
    explicit fd_closer(int f) noexcept : fd(f) {}
    int fd;
    fd_closer(const fd_closer&) = delete;
    auto operator=(const fd_closer&) -> fd_closer& = delete;
    ~fd_closer() { ::close(fd); }
};

auto wait_for_set(sigset_t set) -> task<result<int>> {
    // Non-blocking: the read below must fail with EAGAIN, never sleep in a worker.
    const int sfd = ::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sfd < 0) {
        co_return std::error_code(errno, std::system_category());
    }
    const fd_closer closer(sfd);
    for (;;) {
        // First look: a signal may be pending already. After a wake-up, another wait may have
        // taken it (one signal ends one wait): wait again then.
        signalfd_siginfo info{};
        const ssize_t n = ::read(sfd, &info, sizeof(info));
        if (n == static_cast<ssize_t>(sizeof(info))) {
            co_return static_cast<int>(info.ssi_signo);
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && errno != EAGAIN) {
            co_return std::error_code(errno, std::system_category());
        }
        if (auto r = co_await wait_readable(sfd); !r) {
            co_return r.error();  // cancelled: the signal, if it comes, stays pending
        }
    }
}

}  // namespace

auto signal_set::add(int signal) -> signal_set& {
    // sigaddset also refuses the signals glibc keeps for itself (thread cancellation, setxid).
    sigset_t probe;
    sigemptyset(&probe);
    if (signal < 1 || signal > 64 || signal == SIGKILL || signal == SIGSTOP ||
        sigaddset(&probe, signal) != 0) {
        throw std::invalid_argument("weft::signal_set: " + std::to_string(signal) +
                                    " is not a signal that can be blocked");
    }
    bits_ |= std::uint64_t{1} << (signal - 1);
    return *this;
}

auto signal_set::contains(int signal) const noexcept -> bool {
    return signal >= 1 && signal <= 64 && (bits_ & (std::uint64_t{1} << (signal - 1))) != 0;
}

auto signal_set::to_sigset() const noexcept -> sigset_t {
    sigset_t set;
    sigemptyset(&set);
    for (int s = 1; s <= 64; ++s) {
        if (contains(s)) {
            sigaddset(&set, s);
        }
    }
    return set;
}

void block_signals(signal_set signals) {
    if (signals.empty()) {
        throw std::invalid_argument("weft::block_signals: no signal given");
    }
    const sigset_t set = signals.to_sigset();
    if (const int rc = ::pthread_sigmask(SIG_BLOCK, &set, nullptr); rc != 0) {
        throw std::system_error(rc, std::system_category(), "pthread_sigmask");
    }
}

// Not a coroutine: the set is checked here, at the call, where a misuse is easiest to see.
auto wait_for_signal(signal_set signals) -> task<result<int>> {
    if (signals.empty()) {
        throw std::invalid_argument("weft::wait_for_signal: no signal given");
    }
    sigset_t blocked;
    ::pthread_sigmask(SIG_BLOCK, nullptr, &blocked);
    for (int sig = 1; sig <= 64; ++sig) {
        if (signals.contains(sig) && sigismember(&blocked, sig) != 1) {
            throw std::logic_error("weft::wait_for_signal: " + signal_name(sig) +
                                   " is not blocked in this thread; call weft::block_signals at "
                                   "the start of main, before any thread starts");
        }
    }
    return wait_for_set(signals.to_sigset());
}

}  // namespace weft
