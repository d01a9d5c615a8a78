// libFuzzer: the request parser over arbitrary bytes, with the default limits and with tiny
// ones (so the limit paths are reached by short inputs). Checks the parser's promises: no crash
// or UB (ASan, UBSan), views only into the input, counts within the limits, and the result
// sticky.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "weft/http/request_parser.hpp"

namespace {

void check(bool ok) {
    if (!ok) {
        std::abort();
    }
}

void run(std::string_view in, const weft::http::request_limits& limits) {
    using namespace weft::http;
    request_parser p{limits};
    const parse_status st = p.parse(in);
    check(p.scanned() <= in.size());
    check(p.parse(in) == st);
    if (st == parse_status::error) {
        const int s = status_of(p.error());
        check(s >= 400 && s <= 505);
        return;
    }
    if (st == parse_status::incomplete) {
        return;
    }
    const request_head& h = p.head();
    const auto inside = [&](std::string_view v) {
        return v.empty() || (v.data() >= in.data() && v.data() + v.size() <= in.data() + h.size());
    };
    check(h.size() <= in.size());
    check(h.field_count() <= limits.fields);
    check(inside(h.method_name()) && !h.method_name().empty());
    check(inside(h.target()) && !h.target().empty());
    check(inside(h.query()) && inside(h.authority()) && inside(h.host()));
    check(h.form() == target_form::absolute || inside(h.path()));
    for (header_field f : h.fields()) {
        check(inside(f.name) && !f.name.empty() && inside(f.value));
        check(h.find(f.name).has_value());
    }
    if (h.framing().kind == body_kind::content_length) {
        check(h.framing().length <= limits.body);
    }
    check(h.version_minor() == 0 || h.version_minor() == 1);
}

}  // namespace

extern "C" auto LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) -> int {
    const std::string_view in{reinterpret_cast<const char*>(data), size};
    run(in, {});
    weft::http::request_limits tiny;
    tiny.request_line = 24;
    tiny.header_block = 64;
    tiny.fields = 4;
    tiny.body = 100;
    run(in, tiny);
    return 0;
}
