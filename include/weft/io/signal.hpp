#pragma once

#include <concepts>
#include <csignal>
#include <cstdint>
#include <span>

#include "weft/core/result.hpp"
#include "weft/core/task.hpp"

namespace weft {

/// A set of signal numbers, written `{SIGINT, SIGTERM}` where a signal_set is expected (or one
/// number alone). Each number is checked as it is added: one that is not a signal, and SIGKILL
/// or SIGSTOP (which can be neither caught nor waited for), throw std::invalid_argument.
/// NOTE: not a std::initializer_list: g++ 12 rejects a braced list that initialises one inside
/// a co_await expression ("array used as initializer"); this type takes the numbers as
/// constructor arguments instead.
///
///     weft::signal_set s{SIGINT, SIGTERM};
///     s.add(SIGHUP);
class signal_set {
public:
    signal_set() noexcept = default;
    template <typename... Signals>
        requires(sizeof...(Signals) > 0 && (std::same_as<Signals, int> && ...))
    signal_set(Signals... signals) {  // NOLINT(google-explicit-constructor): {SIGINT, SIGTERM}
        (add(signals), ...);
    }
    explicit signal_set(std::span<const int> signals) {
        for (const int s : signals) {
            add(s);
        }
    }

    auto add(int signal) -> signal_set&;
    [[nodiscard]] auto contains(int signal) const noexcept -> bool;
    [[nodiscard]] auto empty() const noexcept -> bool { return bits_ == 0; }
    /// As a sigset_t, for sigprocmask, signalfd and friends.
    [[nodiscard]] auto to_sigset() const noexcept -> sigset_t;

private:
    std::uint64_t bits_ = 0;  // bit s - 1 for signal s (Linux numbers them 1..64)
};

/// Waits until one of `signals` is sent to the process and yields its number. Needs no set-up
/// and may be called from any task on a runtime with reactors, whatever the threads' signal
/// masks: the first wait for a signal installs weft's handler for it (sigaction, SA_RESTART),
/// which records the signal and wakes the waiting tasks through their workers' reactors (an
/// eventfd per pending wait). No thread is dedicated to signals.
///
/// From that first call on, the signal's disposition is weft's for the rest of the process:
/// it no longer ends the process (SIGINT, SIGTERM) nor runs a handler installed before, and a
/// signal that comes while nobody waits is kept and returned by the next wait at once (several
/// sends of one signal before it is taken count as one). A signal sent before the first call
/// meets its previous disposition. One signal ends one wait: of tasks waiting for the same
/// signal at once, one gets it. Signals sent to one thread (pthread_kill, raise) and
/// process-directed ones (kill, Ctrl-C, a service manager's SIGTERM) are alike. A signal
/// blocked in every thread of the process is never delivered, so never seen.
///
/// Throws, at the call: std::invalid_argument for an empty set or a signal that reports a
/// fault of the thread raising it (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS); the
/// std::system_error of sigaction. Awaiting it off a runtime worker with a reactor throws
/// std::logic_error.
///
/// NOTE: under ThreadSanitizer a handler runs only when its thread is inside one of TSan's
/// interceptors, or next enters one: a signal the kernel hands to a thread blocked elsewhere
/// (a worker in io_uring_enter, a thread in block_on's wait) is seen when that thread next
/// calls into one, which may be never.
///
/// Errors are values: `operation_canceled` when the task's stop is requested (cancel-safe: a
/// signal that comes later stays for the next wait, none is taken and lost); the system error
/// when no eventfd can be made (EMFILE).
///
///     auto sig = co_await weft::wait_for_signal({SIGINT, SIGTERM});   // result<int>
///     if (sig) { server.drain(); }                 // *sig == SIGINT or SIGTERM
[[nodiscard]] auto wait_for_signal(signal_set signals) -> task<result<int>>;

}  // namespace weft
