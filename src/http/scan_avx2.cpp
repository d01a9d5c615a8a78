// The AVX2 scan path: 32 bytes per step, then one 16-byte SSE2 step, then byte by byte. Built
// without -mavx2: the functions carry target("avx2") and are reached only through avx2_scan,
// which scan_path.cpp installs only when the CPU (and the OS, for the YMM state) has AVX2.

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <bit>

#include "char_class.hpp"
#include "scan.hpp"

namespace weft::http::detail {

namespace {

__attribute__((target("avx2"))) auto target_stop(const char* p, const char* end) noexcept -> const
    char* {
    const __m256i bias = _mm256_set1_epi8(0x21);
    const __m256i span = _mm256_set1_epi8(0x7e - 0x21);
    const __m256i question = _mm256_set1_epi8('?');
    const __m256i hash = _mm256_set1_epi8('#');
    while (end - p >= 32) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
        const __m256i x = _mm256_sub_epi8(v, bias);
        const __m256i in_range = _mm256_cmpeq_epi8(_mm256_min_epu8(x, span), x);
        const __m256i marks =
            _mm256_or_si256(_mm256_cmpeq_epi8(v, question), _mm256_cmpeq_epi8(v, hash));
        const auto m = ~static_cast<std::uint32_t>(_mm256_movemask_epi8(in_range)) |
                       static_cast<std::uint32_t>(_mm256_movemask_epi8(marks));
        if (m != 0) {
            return p + std::countr_zero(m);
        }
        p += 32;
    }
    if (end - p >= 16) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        const __m128i x = _mm_sub_epi8(v, _mm256_castsi256_si128(bias));
        const __m128i in_range = _mm_cmpeq_epi8(_mm_min_epu8(x, _mm256_castsi256_si128(span)), x);
        const __m128i marks = _mm_or_si128(_mm_cmpeq_epi8(v, _mm256_castsi256_si128(question)),
                                           _mm_cmpeq_epi8(v, _mm256_castsi256_si128(hash)));
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

__attribute__((target("avx2"))) auto value_stop(const char* p, const char* end) noexcept -> const
    char* {
    const __m256i c1f = _mm256_set1_epi8(0x1f);
    const __m256i del = _mm256_set1_epi8(0x7f);
    const __m256i tab = _mm256_set1_epi8('\t');
    while (end - p >= 32) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
        const __m256i ctl = _mm256_or_si256(_mm256_cmpeq_epi8(_mm256_min_epu8(v, c1f), v),
                                            _mm256_cmpeq_epi8(v, del));
        const __m256i bad = _mm256_andnot_si256(_mm256_cmpeq_epi8(v, tab), ctl);
        const auto m = static_cast<std::uint32_t>(_mm256_movemask_epi8(bad));
        if (m != 0) {
            return p + std::countr_zero(m);
        }
        p += 32;
    }
    if (end - p >= 16) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        const __m128i ctl =
            _mm_or_si128(_mm_cmpeq_epi8(_mm_min_epu8(v, _mm256_castsi256_si128(c1f)), v),
                         _mm_cmpeq_epi8(v, _mm256_castsi256_si128(del)));
        const __m128i bad = _mm_andnot_si128(_mm_cmpeq_epi8(v, _mm256_castsi256_si128(tab)), ctl);
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

constinit const scan_ops avx2_scan{target_stop, value_stop};

}  // namespace weft::http::detail

#endif
