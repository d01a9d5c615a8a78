// A user's test built against weft::testing alone: an hour's sleep on the test clock and a
// body run over seeds on the seeded runtime.
#include <chrono>
#include <cstdio>
#include <weft/sched/timer.hpp>
#include <weft/testing/seeds.hpp>
#include <weft/testing/test_clock.hpp>

using namespace std::chrono_literals;

int main() {
    weft::runtime rt{weft::testing::test_clock_runtime()};
    const bool slept = rt.block_on([]() -> weft::task<bool> {
        const auto start = weft::runtime_clock::now();
        (void)co_await weft::sleep_for(1h);
        co_return weft::runtime_clock::now() - start == 1h;
    }());
    const unsigned ran =
        weft::testing::run_seeds(4, [](std::uint64_t) -> weft::task<void> { co_return; });
    std::printf("testing: slept an hour of test time: %s, seeds run: %u\n", slept ? "yes" : "no",
                ran);
    return slept && ran == 4 ? 0 : 1;
}
