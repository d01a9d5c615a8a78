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
/// or SIGSTOP (which can be neither blocked nor waited for), throw std::invalid_argument.
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

/// Blocks `signals` in the calling thread, so that they are not delivered the default way (for
/// SIGINT and SIGTERM: ending the process) but wait, pending, for wait_for_signal. Threads
/// inherit the mask of the thread that creates them, so call it first thing in main, before the
/// runtime starts its workers and before any library starts threads of its own (librdkafka,
/// cnats): then every thread of the process blocks them. Blocking them only in weft's workers
/// would not do: the kernel hands a process-directed signal to any thread that does not block
/// it, and the main thread or a library's thread would take it the default way.
/// Throws std::invalid_argument for an empty set.
///
///     int main() {
///         weft::block_signals({SIGINT, SIGTERM});   // before any thread exists
///         weft::runtime rt{weft::io_runtime_options()};
///         return rt.block_on(serve());
///     }
void block_signals(signal_set signals);

/// Waits until one of `signals` is sent to the process and yields its number. The signal is
/// taken through a signalfd read through the awaiting worker's reactor (a one-shot poll on
/// io_uring, the worker's epoll otherwise), so no handler runs and no thread is dedicated to
/// signals. A signal that arrived while nobody waited stays pending and is returned by the next
/// wait at once (several sends of one signal before it is taken count as one, as the kernel
/// keeps them). One signal ends one wait: tasks waiting for the same signal at the same time
/// are not all woken by it.
///
/// The signals must be blocked in every thread of the process: see block_signals. A wait for a
/// signal the calling thread does not block throws std::logic_error (it would be a race with the
/// default action); an empty set throws std::invalid_argument. Signals sent to one thread
/// (pthread_kill, tgkill) are seen only by a wait running on that thread; process-directed ones
/// (kill, Ctrl-C, a service manager's SIGTERM) by any.
///
/// Cancellable through the task's stop token: `operation_canceled`, and the signal, if it comes
/// later, stays pending for the next wait. Other failures (no descriptor left: EMFILE) are
/// values too.
///
///     weft::block_signals({SIGINT, SIGTERM});      // in main, before the runtime
///     ...
///     auto sig = co_await weft::wait_for_signal({SIGINT, SIGTERM});   // result<int>
///     if (sig) { server.drain(); }                 // *sig == SIGINT or SIGTERM
[[nodiscard]] auto wait_for_signal(signal_set signals) -> task<result<int>>;

}  // namespace weft
