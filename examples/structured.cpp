// Structured concurrency on the work-stealing runtime: fork-join, a scope of children with a
// failure that cancels its siblings, a sleep with a timeout, and a blocking call off the
// workers. Build: part of the default build (examples/); run: ./build/.../examples/structured

#include <cstdio>
#include <stdexcept>
#include <weft/weft.hpp>

using namespace std::chrono_literals;

namespace {

auto fib(int n) -> weft::task<long> {
    if (n < 2) {
        co_return n;
    }
    auto a = co_await weft::fork(fib(n - 1));  // the child runs now; this continuation is stealable
    long b = co_await fib(n - 2);
    co_return co_await std::move(a) + b;
}

auto program() -> weft::task<int> {
    std::printf("fib(27) = %ld\n", co_await fib(27));

    // Children finish before with_scope returns; the first failure cancels the others.
    int cancelled = 0;
    try {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            for (int i = 0; i < 3; ++i) {
                s.spawn([&]() -> weft::task<void> {
                    auto r = co_await weft::sleep_for(1h);  // ends early: cancelled
                    if (!r && r.error() == std::errc::operation_canceled) {
                        ++cancelled;
                    }
                });
            }
            s.spawn([]() -> weft::task<void> {
                co_await weft::yield();
                throw std::runtime_error("one child failed");
            });
            co_return;
        });
    } catch (const std::runtime_error& e) {
        std::printf("scope failed: %s (%d siblings cancelled)\n", e.what(), cancelled);
    }

    // An operation that reports its own cancellation (a result holding operation_canceled)
    // becomes timed_out; a value it produced anyway would be returned, never dropped.
    auto slow = []() -> weft::task<weft::result<void>> { co_return co_await weft::sleep_for(1h); };
    auto t = co_await weft::with_timeout(20ms, slow());
    std::printf("with_timeout: %s\n", t ? "finished" : t.error().message().c_str());

    auto size = co_await weft::spawn_blocking([] { return 6 * 7; });
    std::printf("spawn_blocking: %d\n", *size);
    co_return 0;
}

}  // namespace

auto main() -> int {
    weft::runtime rt;  // one worker per CPU
    return rt.block_on(program());
}
