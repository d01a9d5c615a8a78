#include "weft/sync/detail/waiter.hpp"

#include <stdexcept>

#include "thread_lock_id.hpp"

namespace weft::detail {

// Out of line on purpose: see current_worker() in core/detail/worker_base.hpp. Being out of line
// (in this file, never inlined into a coroutine body) is also what lets these functions read
// tl_worker_unsafe_in_coroutines directly: each call runs on one thread from start to end, so
// its read is current (one call less per operation than going through current_worker()).

void resume_waiter(std::coroutine_handle<> h, waiter_home home) {
    worker_base* w = tl_worker_unsafe_in_coroutines;
    // w == home.worker first: the common case, decided without a load.
    if (w != nullptr && (w == home.worker || w->root_stop() == home.executor)) {
        w->wake(h);  // the LIFO slot: the woken partner runs next, on this core
    } else if (home.worker != nullptr) {
        home.worker->schedule_remote(h);
    } else {
        h.resume();
    }
}

void yield_waiter(std::coroutine_handle<> h) {
    worker_base* w = tl_worker_unsafe_in_coroutines;
    if (w == nullptr) {
        throw std::logic_error("weft::sync: yield without a weft executor");
    }
    w->yield_turn(h);
}

auto this_thread_ids() noexcept -> thread_ids {
    return thread_ids{thread_lock_id_here(), tl_worker_unsafe_in_coroutines};
}

auto consume_budget() noexcept -> bool {
    worker_base* w = tl_worker_unsafe_in_coroutines;
    return w != nullptr && w->consume_budget();
}

}  // namespace weft::detail
