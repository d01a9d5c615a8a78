#include "reactor.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

namespace weft::detail {

constinit thread_local reactor* reactor::tl_reactor = nullptr;

namespace {
// Every attached reactor, for io_operations_waiting_for_test.
struct attached_reactors {
    std::mutex mu;
    std::vector<const reactor*> list;  // guarded by mu
};
auto attached() -> attached_reactors& {
    static auto* a = new attached_reactors;  // never destroyed: a reactor may detach at exit
    return *a;
}
}  // namespace

void reactor::attached_for_test() {
    auto& a = attached();
    std::lock_guard lock(a.mu);
    a.list.push_back(this);
}

void reactor::detached_for_test() noexcept {
    auto& a = attached();
    std::lock_guard lock(a.mu);
    std::erase(a.list, this);
}

auto io_operations_waiting_for_test() -> std::size_t {
    auto& a = attached();
    std::lock_guard lock(a.mu);
    std::size_t n = 0;
    for (const reactor* r : a.list) {
        n += r->pending();
    }
    return n;
}

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
