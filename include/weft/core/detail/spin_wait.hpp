#pragma once

#include <thread>

namespace weft::detail {

/// Backoff for a thread spinning on a lock whose holder keeps it for nanoseconds (the sync
/// objects' locks, stop_state's list lock): call once() per failed look.
///
/// It re-reads at full speed for a moment (the holder is about to let go), pauses a few times,
/// then yields the thread: that lets a holder preempted inside its critical section finish (2-core
/// machines) and, under steady contention, backs off long enough for the other side to do a run
/// of operations with the line in its own cache instead of trading it on every operation.
/// One pause costs ~140 cycles on recent Intel server cores, longer than the critical sections
/// it waits for (the counts were chosen by measurement: docs/design/decisions.md).
class spin_wait {
public:
    static constexpr unsigned plain_spins = 64;  // ~100 ns of re-reads
    static constexpr unsigned paused_spins = 4;  // then < 1 µs of pauses

    void once() noexcept {
        if (n_ < plain_spins) {
            ++n_;
            return;
        }
        if (n_ < plain_spins + paused_spins) {
            ++n_;
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
            return;
        }
        std::this_thread::yield();
    }

private:
    unsigned n_ = 0;
};

}  // namespace weft::detail
