#include "weft/sync/detail/waiter.hpp"

#include <stdexcept>

namespace weft::detail {

// Out of line on purpose: see current_worker() in core/detail/worker_base.hpp.

void resume_waiter(std::coroutine_handle<> h, worker_base* home) {
    if (worker_base* w = current_worker(); w != nullptr) {
        w->wake(h);  // the LIFO slot: the woken partner runs next, on this core
    } else if (home != nullptr) {
        home->schedule_remote(h);
    } else {
        h.resume();
    }
}

void yield_waiter(std::coroutine_handle<> h) {
    worker_base* w = current_worker();
    if (w == nullptr) {
        throw std::logic_error("weft::sync: yield without a weft executor");
    }
    w->schedule_remote(h);
}

auto consume_budget() noexcept -> bool {
    worker_base* w = current_worker();
    return w != nullptr && w->consume_budget();
}

}  // namespace weft::detail
