// libFuzzer: the W3C trace context parsers over arbitrary bytes (the first line a traceparent,
// the rest a tracestate). Checks their promises: no crash or UB (ASan, UBSan); what parses has
// valid ids and formats as version 00 to text that parses to the same context; a version-00
// input with no flag but "sampled" formats back to itself; extract keeps a tracestate only
// when valid_tracestate accepts it, and then as given without its surrounding blanks.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "weft/trace/context.hpp"

namespace {

void check(bool ok) {
    if (!ok) {
        std::abort();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace weft::trace;
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    const std::size_t nl = in.find('\n');
    const std::string_view tp = in.substr(0, nl);
    const std::string_view ts =
        nl == std::string_view::npos ? std::string_view{} : in.substr(nl + 1);

    if (const auto c = parse_traceparent(tp)) {
        check(c->valid());
        const std::string out = traceparent(*c);
        check(out.size() == 55);
        const auto again = parse_traceparent(out);
        check(again && *again == *c);
        if (tp.substr(0, 2) == "00" && (tp.substr(53) == "00" || tp.substr(53) == "01")) {
            check(out == tp);
        }
    }
    const context x = extract(tp, ts);
    check(x.valid() == parse_traceparent(tp).has_value());
    if (x.valid() && !x.state.empty()) {
        check(valid_tracestate(x.state));
        check(ts.find(x.state) != std::string_view::npos);
    }
    return 0;
}
