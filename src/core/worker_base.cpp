#include "weft/core/detail/worker_base.hpp"

namespace weft::detail {
namespace {
constinit thread_local worker_base* tl_worker = nullptr;
}  // namespace

auto current_worker() noexcept -> worker_base* { return tl_worker; }
void set_current_worker(worker_base* w) noexcept { tl_worker = w; }

}  // namespace weft::detail
