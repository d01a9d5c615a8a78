#pragma once

#include <coroutine>
#include <stdexcept>

#include "weft/core/detail/worker_base.hpp"

namespace weft {

/// `co_await weft::yield()`: lets every other queued task run before this one continues (it goes
/// to the back: the runtime's injector, or the inline executor's remote queue).
struct [[nodiscard]] yield {
    auto await_ready() const noexcept -> bool { return false; }
    WEFT_PUBLISHES_HANDLE void await_suspend(std::coroutine_handle<> h) const {
        detail::worker_base* w = detail::current_worker();
        if (w == nullptr) {
            throw std::logic_error("weft::yield: no weft executor on this thread");
        }
        w->schedule_remote(h);
    }
    void await_resume() const noexcept {}
};

}  // namespace weft
