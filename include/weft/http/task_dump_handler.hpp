#pragma once

#include "weft/http/router.hpp"
#include "weft/sched/runtime.hpp"

namespace weft::http {

/// A handler that answers with `rt.dump()` as text/plain (task_dump::to_string): every live
/// task, its spawn site, its state and its chain of awaiting coroutines. The workers stop in
/// their loops while the dump is taken (a moment, see runtime::dump): mount it on an admin
/// listener, not a public one. Keep `rt` alive as long as the handler.
///
///     srv.route(weft::http::method::get, "/debug/tasks", weft::http::task_dump_handler(rt));
[[nodiscard]] auto task_dump_handler(runtime& rt) -> handler;

}  // namespace weft::http
