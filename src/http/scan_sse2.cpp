// The SSE2 scan path: 16 bytes per step (SSE2 is part of x86-64, so no target attribute).

#if defined(__x86_64__) || defined(__i386__)

#include <emmintrin.h>

#include <bit>

#include "char_class.hpp"
#include "scan.hpp"

namespace weft::http::detail {

namespace {

auto target_stop(const char* p, const char* end) noexcept -> const char* {
    const __m128i bias = _mm_set1_epi8(0x21);
    const __m128i span = _mm_set1_epi8(0x7e - 0x21);
    const __m128i question = _mm_set1_epi8('?');
    const __m128i hash = _mm_set1_epi8('#');
    while (end - p >= 16) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        // v in 0x21..0x7E  <=>  (v - 0x21) as unsigned <= 0x5D  <=>  min(v - 0x21, 0x5D) == v -
        // 0x21
        const __m128i x = _mm_sub_epi8(v, bias);
        const __m128i in_range = _mm_cmpeq_epi8(_mm_min_epu8(x, span), x);
        const __m128i marks = _mm_or_si128(_mm_cmpeq_epi8(v, question), _mm_cmpeq_epi8(v, hash));
        const unsigned m = (~static_cast<unsigned>(_mm_movemask_epi8(in_range)) & 0xffffU) |
                           static_cast<unsigned>(_mm_movemask_epi8(marks));
        if (m != 0) {
            return p + std::countr_zero(m);
        }
        p += 16;
    }
    while (p != end && has(*p, target_bit)) {
        ++p;
    }
    return p;
}

auto value_stop(const char* p, const char* end) noexcept -> const char* {
    const __m128i c1f = _mm_set1_epi8(0x1f);
    const __m128i del = _mm_set1_epi8(0x7f);
    const __m128i tab = _mm_set1_epi8('\t');
    while (end - p >= 16) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        // v <= 0x1F (unsigned)  <=>  min(v, 0x1F) == v
        const __m128i ctl =
            _mm_or_si128(_mm_cmpeq_epi8(_mm_min_epu8(v, c1f), v), _mm_cmpeq_epi8(v, del));
        const __m128i bad = _mm_andnot_si128(_mm_cmpeq_epi8(v, tab), ctl);
        const auto m = static_cast<unsigned>(_mm_movemask_epi8(bad));
        if (m != 0) {
            return p + std::countr_zero(m);
        }
        p += 16;
    }
    while (p != end && has(*p, value_bit)) {
        ++p;
    }
    return p;
}

}  // namespace

constinit const scan_ops sse2_scan{target_stop, value_stop};

}  // namespace weft::http::detail

#endif
