// libFuzzer: a whole connection (pipelined requests, bodies, trailers) fed as a server feeds
// it. The first 8 bytes seed where the stream is cut; the rest is the stream. Cut at those
// places, the stream must give exactly what it gives whole, and every scan path must give the
// same as the portable one.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string_view>
#include <vector>

#include "http/connection_driver.hpp"
#include "weft/http/scan_path.hpp"

namespace {

void check(bool ok) {
    if (!ok) {
        std::abort();
    }
}

}  // namespace

extern "C" auto LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) -> int {
    using namespace weft::http;
    if (size < 8) {
        return 0;
    }
    std::uint64_t seed = 0;
    std::memcpy(&seed, data, 8);
    const std::string_view in{reinterpret_cast<const char*>(data) + 8, size - 8};

    request_limits limits;
    limits.request_line = 256;
    limits.header_block = 512;
    limits.fields = 16;
    limits.body = 1024;
    limits.chunk_extensions = 64;

    set_scan_path(scan_path::scalar);
    const test::connection_record whole = test::run_connection(in, {}, limits);

    std::vector<std::size_t> cuts;
    if (in.size() > 1) {
        std::mt19937_64 rng{seed};
        const std::size_t count = 1 + rng() % 16;
        for (std::size_t i = 0; i < count; ++i) {
            cuts.push_back(1 + rng() % (in.size() - 1));
        }
        std::sort(cuts.begin(), cuts.end());
        cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    }
    check(test::run_connection(in, cuts, limits) == whole);

    for (scan_path p : {scan_path::avx2, scan_path::sse2}) {
        if (set_scan_path(p)) {
            check(test::run_connection(in, {}, limits) == whole);
            check(test::run_connection(in, cuts, limits) == whole);
        }
    }
    return 0;
}
