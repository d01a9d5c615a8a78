// The portable scan path: SWAR over 8-byte words, then byte by byte with the class table.

#include "char_class.hpp"
#include "scan.hpp"
#include "swar.hpp"

namespace weft::http::detail {

namespace {

auto target_stop(const char* p, const char* end) noexcept -> const char* {
    while (end - p >= 8) {
        const std::uint64_t x = swar::load(p);
        const std::uint64_t m = swar::below(x, 0x21) | swar::high(x) | swar::equal(x, 0x7f) |
                                swar::equal(x, '?') | swar::equal(x, '#');
        if (m != 0) {
            return p + swar::first(m);
        }
        p += 8;
    }
    while (p != end && has(*p, target_bit)) {
        ++p;
    }
    return p;
}

auto value_stop(const char* p, const char* end) noexcept -> const char* {
    while (end - p >= 8) {
        const std::uint64_t x = swar::load(p);
        // HT is flagged with the controls and stepped over here: it is rare in values.
        const std::uint64_t m = swar::below(x, 0x20) | swar::equal(x, 0x7f);
        if (m == 0) {
            p += 8;
            continue;
        }
        p += swar::first(m);
        if (*p != '\t') {
            return p;
        }
        ++p;
    }
    while (p != end && has(*p, value_bit)) {
        ++p;
    }
    return p;
}

}  // namespace

constinit const scan_ops scalar_scan{target_stop, value_stop};

}  // namespace weft::http::detail
