#pragma once

#include "weft/sched/runtime_clock.hpp"

namespace weft::detail {

/// The manual clock of the runtime whose worker runs on this thread (set by the worker for its
/// lifetime), nullptr on steady_clock runtimes and off the workers. Read only out of line
/// (runtime_clock::now).
extern constinit thread_local manual_clock* tl_manual_clock;

}  // namespace weft::detail
