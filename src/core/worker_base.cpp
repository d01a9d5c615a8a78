#include "weft/core/detail/worker_base.hpp"

namespace weft::detail {
constinit thread_local worker_base* tl_worker_unsafe_in_coroutines = nullptr;

auto current_worker() noexcept -> worker_base* { return tl_worker_unsafe_in_coroutines; }
void set_current_worker(worker_base* w) noexcept { tl_worker_unsafe_in_coroutines = w; }

}  // namespace weft::detail
