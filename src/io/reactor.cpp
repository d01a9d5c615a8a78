#include "reactor.hpp"

#include <atomic>

namespace weft::detail {

constinit thread_local reactor* reactor::tl_reactor = nullptr;

void reactor::unpark() noexcept {
    notified_.store(true, std::memory_order_seq_cst);
    if (sleeping_.load(std::memory_order_seq_cst)) {
        kick();
    }
}

auto reactor::begin_sleep() noexcept -> bool {
    if (notified_.exchange(false, std::memory_order_acquire)) {
        return false;
    }
    sleeping_.store(true, std::memory_order_seq_cst);
    if (notified_.exchange(false, std::memory_order_seq_cst)) {
        sleeping_.store(false, std::memory_order_relaxed);
        return false;
    }
    return true;
}

void reactor::end_sleep() noexcept {
    sleeping_.store(false, std::memory_order_relaxed);
    notified_.store(false, std::memory_order_relaxed);
}

}  // namespace weft::detail
