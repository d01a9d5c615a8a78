#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <ctime>

#include "weft/sched/driver.hpp"

namespace weft {
namespace {

class futex_driver final : public park_driver {
public:
    void park(std::optional<std::int64_t> timeout_ns) override {
        // word_: 0 = no wake-up pending, 1 = a wake-up is pending. acquire pairs with the
        // release in unpark: whatever the waker published before waking us is visible.
        if (word_.exchange(0, std::memory_order_acquire) == 1) {
            return;
        }
        timespec ts{};
        timespec* tsp = nullptr;
        if (timeout_ns) {
            const std::int64_t ns = *timeout_ns < 0 ? 0 : *timeout_ns;
            ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
            ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
            tsp = &ts;
        }
        // Sleeps only while word_ is still 0; a wake between the exchange and here makes the
        // kernel return EAGAIN at once. Spurious returns are fine: the worker re-checks.
        syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word_), FUTEX_WAIT_PRIVATE, 0, tsp,
                nullptr, 0);
        // Consume the wake-up (if any) that ended the wait.
        word_.exchange(0, std::memory_order_acquire);
    }

    void unpark() noexcept override {
        if (word_.exchange(1, std::memory_order_release) == 0) {
            syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word_), FUTEX_WAKE_PRIVATE, 1,
                    nullptr, nullptr, 0);
        }
    }

private:
    static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
    std::atomic<std::uint32_t> word_{0};
};

}  // namespace

auto make_futex_driver() -> std::unique_ptr<park_driver> {
    return std::make_unique<futex_driver>();
}

}  // namespace weft
