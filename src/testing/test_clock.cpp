#include "weft/testing/test_clock.hpp"

#include <stdexcept>

#include "weft/sched/timer.hpp"

namespace weft::testing {

auto test_clock_runtime(test_clock_options o) -> runtime_options {
    return runtime_options{.workers = o.workers == 0 ? 1 : o.workers,
                           .clock = std::make_shared<manual_clock>(o.auto_advance)};
}

auto advance(std::chrono::nanoseconds d) -> task<void> {
    manual_clock* c = runtime_clock::manual();
    if (c == nullptr) {
        throw std::logic_error("weft::testing::advance: not on a runtime with a test clock");
    }
    const auto target = c->now() + d;
    c->allow_until(target);
    // Its own timer is the last step: the runtime steps through the earlier ones first.
    (co_await sleep_until(target)).value();
}

}  // namespace weft::testing
