#include "relay_stop.hpp"

#include "weft/core/result.hpp"
#include "weft/sched/timer.hpp"

namespace weft::bus::detail {

namespace {
auto wait_task(event& e) -> task<result<void>> { co_return co_await e.wait(); }
}  // namespace

auto wait_for_event(event& e, std::chrono::milliseconds d) -> task<void> {
    auto r = co_await with_timeout(d, wait_task(e));
    (void)r;  // set, timed out or cancelled: the caller looks at its own state next
}

}  // namespace weft::bus::detail
