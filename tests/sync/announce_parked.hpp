#pragma once

// For tests that must act on a task they know is waiting (wake it, close under it, cancel it),
// without sleeping and hoping it got there.

#include <coroutine>
#include <type_traits>

#include "weft/sync/latch.hpp"

namespace weft::test {

/// `co_await announce_parked(parked, [&] { return ch.recv(); })`: awaits the operation the
/// factory returns (built in place: weft's awaiters do not move) and counts `parked` down once
/// the awaiting task is parked in it, or once the operation completed without parking. The test
/// waits with `co_await parked.wait()`, then knows every such waiter is parked (or done).
/// For weft::sync operations (their await_suspend returns bool or a handle: either way the
/// task is parked, or has its operation queued, once it returns).
template <typename Factory>
class [[nodiscard]] announce_parked {
public:
    announce_parked(weft::latch& parked, Factory make) : parked_(&parked), inner_(make()) {}
    announce_parked(const announce_parked&) = delete;
    auto operator=(const announce_parked&) -> announce_parked& = delete;
    ~announce_parked() = default;

    auto await_ready() -> bool {
        if (inner_.await_ready()) {
            parked_->count_down();
            return true;
        }
        return false;
    }
    template <typename P>
    [[gnu::noinline]] auto await_suspend(std::coroutine_handle<P> h) -> decltype(auto) {
        // A local: once parked, the task may be resumed (and this awaiter gone) at once.
        weft::latch* parked = parked_;
        decltype(auto) next = inner_.await_suspend(h);  // bool, or a handle to transfer to
        parked->count_down();
        return next;
    }
    auto await_resume() -> decltype(auto) { return inner_.await_resume(); }

private:
    weft::latch* parked_;
    std::invoke_result_t<Factory&> inner_;
};

}  // namespace weft::test
