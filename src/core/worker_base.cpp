#include "weft/core/detail/worker_base.hpp"

namespace weft::detail {
constinit thread_local worker_base* tl_worker = nullptr;
}  // namespace weft::detail
