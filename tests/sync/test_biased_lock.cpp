#include <gtest/gtest.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "test_util.hpp"
#include "weft/sync/detail/biased_lock.hpp"

namespace {

// The channel's lock, biased to the thread that used it alone, then revoked while that thread
// keeps using it: mutual exclusion holds throughout (a plain counter; TSan checks the accesses).
TEST(biased_lock, revocation_while_the_owner_keeps_locking_excludes) {
    weft::detail::biased_lock mu;
    long counter = 0;
    const int owner_solo = 4 * static_cast<int>(weft::detail::biased_lock::bias_after);
    for (int i = 0; i < owner_solo; ++i) {  // biased to this thread from bias_after on
        mu.lock();
        ++counter;
        mu.unlock();
    }
    const int per_thread = 20'000;
    std::atomic<bool> go{false};
    auto hammer = [&] {
        while (!go.load(std::memory_order_acquire)) {
        }
        for (int i = 0; i < per_thread; ++i) {
            mu.lock();
            ++counter;
            mu.unlock();
        }
    };
    std::thread a(hammer);
    std::thread b(hammer);
    go.store(true, std::memory_order_release);
    hammer();  // the owner, racing with the revocations
    a.join();
    b.join();
    mu.lock();
    EXPECT_EQ(counter, owner_solo + 3L * per_thread);
    mu.unlock();
}

// The process registers for membarrier(2) while it is still single-threaded (at static
// initialisation): registering later, with workers running, waits for an RCU grace period
// (12 ms here) inside the first lock to bias, while the other workers spin on that lock.
// Run alone (ctest runs each test in its own process): nothing in this test biases a lock.
TEST(biased_lock, process_registers_for_membarrier_before_any_lock_biases) {
#if defined(WEFT_BIASED_LOCK_SEQ_CST) || defined(WEFT_NO_BIASED_LOCK)
    GTEST_SKIP() << "this build never biases a lock (no membarrier)";
#else
    constexpr int get_registrations = 1 << 9;  // MEMBARRIER_CMD_GET_REGISTRATIONS (Linux 6.3)
    const long regs = syscall(SYS_membarrier, get_registrations, 0, 0);
    if (regs < 0) {
        GTEST_SKIP() << "this kernel cannot report membarrier registrations";
    }
    EXPECT_NE(regs & MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0);
#endif
}

// membarrier(2) refused after a lock was biased (a seccomp filter installed since): the revoker
// cannot exclude the owner, so going on would let two threads into the critical section. The
// process must abort with a message instead.
TEST(biased_lock_death_test, membarrier_refused_during_a_revocation_aborts) {
#if defined(WEFT_BIASED_LOCK_SEQ_CST) || defined(WEFT_NO_BIASED_LOCK)
    GTEST_SKIP() << "this build never revokes with membarrier";
#else
    const long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (cmds < 0 || (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) {
        GTEST_SKIP() << "no private expedited membarrier here: no lock is ever biased";
    }
    GTEST_FLAG_SET(death_test_style, "threadsafe");  // the watchdog thread runs meanwhile
    EXPECT_DEATH(
        {
            weft::detail::biased_lock mu;
            for (std::uint32_t i = 0; i < 2 * weft::detail::biased_lock::bias_after; ++i) {
                mu.lock();  // biased to this thread from bias_after on
                mu.unlock();
            }
            weft::detail::simulate_membarrier_refusal_for_test(true);
            std::thread other([&] {
                mu.lock();  // revokes
                mu.unlock();
            });
            other.join();
        },
        "membarrier\\(2\\) refused .*mutual exclusion would be lost");
#endif
}

}  // namespace
