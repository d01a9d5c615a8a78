// The random source of schedule shuffling (include/weft/core/detail/shuffle.hpp). Compiled in
// every build; empty unless WEFT_SHUFFLE is on.

#include "weft/core/detail/shuffle.hpp"

#if WEFT_SHUFFLE_BUILD

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string_view>

namespace weft::detail {

namespace {

auto splitmix(std::uint64_t& x) noexcept -> std::uint64_t {
    std::uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

std::atomic<std::uint64_t> threads{0};

struct thread_rng {
    std::uint64_t state;
    thread_rng() noexcept {
        // Each thread's stream: the seed and the order in which threads first asked.
        state = shuffle_seed() ^ (threads.fetch_add(1, std::memory_order_relaxed) * 0x51ED2701ULL);
        (void)splitmix(state);
    }
};

}  // namespace

auto shuffle_seed() noexcept -> std::uint64_t {
    static const std::uint64_t seed = [] {
        const char* e = std::getenv("WEFT_SHUFFLE_SEED");
        if (e == nullptr || *e == '\0') {
            return std::uint64_t{0};
        }
        std::uint64_t s = 0;
        if (std::string_view{e} == "random") {
            s = static_cast<std::uint64_t>(
                    std::chrono::steady_clock::now().time_since_epoch().count()) %
                1000000007ULL;
        } else {
            s = std::strtoull(e, nullptr, 10);
        }
        std::fprintf(stderr, "weft: schedule shuffling on, WEFT_SHUFFLE_SEED=%llu\n",
                     static_cast<unsigned long long>(s));
        return s;
    }();
    return seed;
}

auto shuffle_on() noexcept -> bool {
    static const bool on = [] {
        const char* e = std::getenv("WEFT_SHUFFLE_SEED");
        return e != nullptr && *e != '\0';
    }();
    return on;
}

auto shuffle_chance(unsigned one_in) noexcept -> bool {
    if (!shuffle_on()) {
        return false;
    }
    thread_local thread_rng rng;
    return one_in != 0 && splitmix(rng.state) % one_in == 0;
}

}  // namespace weft::detail

#endif
