#include "weft/sched/detail/default_driver.hpp"

#include <atomic>

namespace weft::detail {
namespace {
// Constant-initialised, so it is null before any static initialiser runs (one may install).
constinit std::atomic<default_driver_source> installed{nullptr};
}  // namespace

void install_default_driver(default_driver_source source) noexcept {
    installed.store(source, std::memory_order_release);
}

auto default_driver_factory() -> driver_factory {
    const default_driver_source source = installed.load(std::memory_order_acquire);
    return source != nullptr ? source() : driver_factory{};
}

}  // namespace weft::detail
