#pragma once

#include <atomic>
#include <cstdlib>
#include <string_view>

namespace weft::bus::detail {

// Crash points for the chaos tests (tests/bus/chaos). Compiled in only where the build defines
// WEFT_OUTBOX_CRASH_POINTS (tests/CMakeLists.txt does, for the outbox libraries and weft::bus
// of a test build); elsewhere all are constant no-ops.
// - crash_point(name): when WEFT_OUTBOX_CRASH_POINT equals `name`, the process ends with
//   _exit(86) (no destructor, no flush, as SIGKILL would) the WEFT_OUTBOX_CRASH_AFTER-th time
//   (default 1) it passes there. Names: "after_ack" (the batch is acknowledged, not yet marked
//   done), "mid_commit" (half the batch deleted inside the finishing transaction, no COMMIT),
//   "after_mark_done" (the control below: marked done, not yet published).
// - fault_mark_done_first(): WEFT_OUTBOX_FAULT=mark_done_first makes the relay delete a batch
//   before publishing it: a deliberately broken relay, the chaos test's positive control for
//   losses.
// - fault_unbounded_window(): WEFT_OUTBOX_FAULT=unbounded_window makes the relay's per-key
//   window unbounded on any broker (relay_window): every row of a key is published at once,
//   none waiting for the ack of the one before, so a failed one is re-sent after later ones
//   were stored: the control for order.
#if defined(WEFT_OUTBOX_CRASH_POINTS)
inline void crash_point(std::string_view name) noexcept {
    static const char* const wanted = std::getenv("WEFT_OUTBOX_CRASH_POINT");
    static std::atomic<long> left{[] {
        const char* n = std::getenv("WEFT_OUTBOX_CRASH_AFTER");
        return n != nullptr ? std::atol(n) : 1L;
    }()};
    if (wanted != nullptr && name == wanted && left.fetch_sub(1) <= 1) {
        std::_Exit(86);
    }
}
inline auto fault_mark_done_first() noexcept -> bool {
    static const bool on = [] {
        const char* f = std::getenv("WEFT_OUTBOX_FAULT");
        return f != nullptr && std::string_view{f} == "mark_done_first";
    }();
    return on;
}
inline auto fault_unbounded_window() noexcept -> bool {
    static const bool on = [] {
        const char* f = std::getenv("WEFT_OUTBOX_FAULT");
        return f != nullptr && std::string_view{f} == "unbounded_window";
    }();
    return on;
}
#else
inline void crash_point(std::string_view /*name*/) noexcept {}
constexpr auto fault_mark_done_first() noexcept -> bool { return false; }
constexpr auto fault_unbounded_window() noexcept -> bool { return false; }
#endif

}  // namespace weft::bus::detail
