// libFuzzer: the chunked body decoder over arbitrary bytes, decoded whole and one byte at a
// time; both must give the same body, trailers and outcome, and every view must lie in the
// input given.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "weft/http/body_decoder.hpp"

namespace {

void check(bool ok) {
    if (!ok) {
        std::abort();
    }
}

struct outcome {
    std::string body;
    std::vector<std::string> trailers;
    weft::http::body_status end = weft::http::body_status::need_more;
    weft::http::parse_error error = weft::http::parse_error::none;
    std::size_t used = 0;  // bytes consumed in all, once done (an error consumes nothing more)
    auto operator==(const outcome&) const -> bool = default;
};

auto decode(std::string_view in, std::size_t piece, const weft::http::request_limits& limits)
    -> outcome {
    using namespace weft::http;
    outcome out;
    body_decoder d{{body_kind::chunked, 0}, limits};
    std::string buf;
    std::size_t from = 0;
    while (true) {
        const std::size_t n = std::min(piece, in.size() - from);
        buf.append(in.substr(from, n));
        from += n;
        for (;;) {
            const body_step s = d.decode(buf);
            check(s.consumed <= buf.size());
            const auto inside = [&](std::string_view v) {
                return v.empty() ||
                       (v.data() >= buf.data() && v.data() + v.size() <= buf.data() + s.consumed);
            };
            check(inside(s.data) && inside(s.value));
            if (s.status == body_status::data) {
                check(!s.data.empty());
                out.body.append(s.data);
            } else if (s.status == body_status::trailer) {
                out.trailers.push_back(std::string{s.data} + ":" + std::string{s.value});
            }
            buf.erase(0, s.consumed);
            out.used += s.consumed;
            if (s.status == body_status::done || s.status == body_status::error) {
                out.end = s.status;
                if (s.status == body_status::error) {
                    out.used = 0;
                }
                out.error = d.error();
                check(d.received() <= limits.body);
                return out;
            }
            if (s.status == body_status::need_more) {
                break;
            }
        }
        if (from == in.size()) {
            return out;
        }
    }
}

}  // namespace

extern "C" auto LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) -> int {
    const std::string_view in{reinterpret_cast<const char*>(data), size};
    weft::http::request_limits limits;
    limits.body = 4096;
    limits.chunk_extensions = 64;
    limits.header_block = 256;
    limits.fields = 8;
    const outcome whole = decode(in, in.size() + 1, limits);
    check(decode(in, 1, limits) == whole);
    check(decode(in, 7, limits) == whole);
    return 0;
}
