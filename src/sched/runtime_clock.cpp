#include "weft/sched/runtime_clock.hpp"

#include "runtime_clock_tl.hpp"

namespace weft {

namespace detail {
constinit thread_local manual_clock* tl_manual_clock = nullptr;
}  // namespace detail

// Out of line: a thread_local read inlined into a coroutine may use the address of another
// thread's copy after the coroutine moved (worker_base.hpp).
auto runtime_clock::now() noexcept -> time_point {
    if (manual_clock* c = detail::tl_manual_clock; c != nullptr) [[unlikely]] {
        return c->now();
    }
    return std::chrono::steady_clock::now();
}

auto runtime_clock::manual() noexcept -> manual_clock* { return detail::tl_manual_clock; }

}  // namespace weft
