#pragma once

#include <coroutine>

namespace weft::detail {

class sched_worker;  // a runtime worker thread (src/sched/worker.hpp)
class runtime_core;

/// The runtime worker running on this thread, or nullptr (set together with current_worker()).
extern constinit thread_local sched_worker* tl_sched_worker;

/// Any thread: queue `h` on runtime `rt`, on this thread's worker when it is one of rt's,
/// otherwise through the injector (waking a parked worker).
void runtime_schedule(runtime_core& rt, std::coroutine_handle<> h);

}  // namespace weft::detail
