#include "weft/testing/seeds.hpp"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "weft/testing/test_clock.hpp"

namespace weft::testing {

auto seeded_runtime(std::uint64_t seed, bool auto_advance) -> runtime_options {
    runtime_options o = test_clock_runtime({.auto_advance = auto_advance, .workers = 1});
    o.seed = seed;
    return o;
}

auto run_seeds(unsigned n,
               const std::function<task<void>(std::uint64_t seed)>& body,
               const seed_options& o) -> unsigned {
    std::uint64_t first = 1;
    std::uint64_t last = n;
    if (const char* e = std::getenv("WEFT_TEST_SEED"); e != nullptr && *e != '\0') {
        first = last = std::strtoull(e, nullptr, 10);
    }
    unsigned ran = 0;
    for (std::uint64_t seed = first; seed <= last; ++seed) {
        std::string why;
        try {
            runtime rt{seeded_runtime(seed, o.auto_advance)};
            rt.block_on(body(seed));
        } catch (const std::exception& ex) {
            why = ex.what();
            if (why.empty()) {
                why = "an exception";
            }
        } catch (...) {
            why = "an exception not derived from std::exception";
        }
        ++ran;
        if (why.empty() && o.failed && o.failed()) {
            why = "the run reported a failure";
        }
        if (!why.empty()) {
            const std::string msg = "weft::testing: seed " + std::to_string(seed) +
                                    " failed: " + why +
                                    "; rerun it alone with WEFT_TEST_SEED=" + std::to_string(seed);
            std::fprintf(stderr, "%s\n", msg.c_str());
            throw seed_failure(seed, msg);
        }
    }
    return ran;
}

}  // namespace weft::testing
