#include "weft/core/detail/worker_base.hpp"

#include <cstdio>
#include <exception>

namespace weft::detail {
constinit thread_local worker_base* tl_worker_unsafe_in_coroutines = nullptr;

auto current_worker() noexcept -> worker_base* { return tl_worker_unsafe_in_coroutines; }
void set_current_worker(worker_base* w) noexcept { tl_worker_unsafe_in_coroutines = w; }

void worker_base::detached_failure(std::exception_ptr e) noexcept { print_detached_failure(e); }

void print_detached_failure(const std::exception_ptr& e) noexcept {
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& ex) {
        std::fprintf(stderr, "weft: a detached task failed: %s\n", ex.what());
    } catch (...) {
        std::fprintf(stderr, "weft: a detached task failed with a non-standard exception\n");
    }
}

void report_detached_failure(std::exception_ptr e) noexcept {
    if (worker_base* w = current_worker()) {
        w->detached_failure(std::move(e));
    } else {
        print_detached_failure(e);
    }
}

}  // namespace weft::detail
