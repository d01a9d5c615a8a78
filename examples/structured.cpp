// Structured concurrency on the work-stealing runtime: fork-join, a scope of children with a
// failure that cancels its siblings, a sleep with a timeout, and a blocking call off the
// workers. Each step checks its result: the program exits 1 if any is wrong.

#include <atomic>
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

auto check(bool ok, const char* what, int& failures) -> void {
    std::printf("%s: %s\n", what, ok ? "ok" : "WRONG");
    failures += ok ? 0 : 1;
}

auto program() -> weft::task<int> {
    int failures = 0;
    const long f = co_await fib(27);
    check(f == 196418, "fib(27) = 196418", failures);

    // Children finish before with_scope returns; the first failure cancels the others. They run
    // on any worker, at once: the count is atomic.
    std::atomic<int> cancelled{0};
    bool failed = false;
    try {
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            for (int i = 0; i < 3; ++i) {
                s.spawn([&]() -> weft::task<void> {
                    auto r = co_await weft::sleep_for(1h);  // ends early: cancelled
                    if (!r && r.error() == std::errc::operation_canceled) {
                        cancelled.fetch_add(1, std::memory_order_relaxed);
                    }
                });
            }
            s.spawn([]() -> weft::task<void> {
                co_await weft::yield();
                throw std::runtime_error("one child failed");
            });
            co_return;
        });
    } catch (const std::runtime_error&) {
        failed = true;
    }
    check(failed && cancelled.load() == 3, "a failed child rethrown, 3 siblings cancelled",
          failures);

    // An operation that reports its own cancellation (a result holding operation_canceled)
    // becomes timed_out; a value it produced anyway would be returned, never dropped.
    auto slow = []() -> weft::task<weft::result<void>> { co_return co_await weft::sleep_for(1h); };
    auto t = co_await weft::with_timeout(20ms, slow());
    check(!t && t.error() == std::errc::timed_out, "with_timeout(20ms, an hour's sleep) timed out",
          failures);

    auto answer = co_await weft::spawn_blocking([] { return 6 * 7; });
    check(answer && *answer == 42, "spawn_blocking returned 42", failures);
    co_return failures == 0 ? 0 : 1;
}

}  // namespace

auto main() -> int {
    weft::runtime rt;  // one worker per CPU
    return rt.block_on(program());
}
