#pragma once

// Eight bytes at a time in a 64-bit word (SWAR). Each function flags bytes in bit 7 of their
// lane. The flags are exact up to and including the lowest one (the first byte in memory
// order); lanes above a flagged lane may be flagged falsely by the borrow that crosses into
// them, which is why only first() of a mask is ever used.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace weft::http::detail::swar {

inline constexpr std::uint64_t ones = 0x0101010101010101ULL;
inline constexpr std::uint64_t highs = 0x8080808080808080ULL;

/// Bytes p[0..7] with p[0] in the lowest lane, whatever the endianness.
[[nodiscard]] inline auto load(const char* p) noexcept -> std::uint64_t {
    std::uint64_t v = 0;
    std::memcpy(&v, p, sizeof v);
    if constexpr (std::endian::native == std::endian::big) {
        v = __builtin_bswap64(v);
    }
    return v;
}

/// Bytes below n (n <= 0x80).
[[nodiscard]] inline auto below(std::uint64_t x, std::uint8_t n) noexcept -> std::uint64_t {
    return (x - ones * n) & ~x & highs;
}

/// Bytes equal to c.
[[nodiscard]] inline auto equal(std::uint64_t x, std::uint8_t c) noexcept -> std::uint64_t {
    const std::uint64_t y = x ^ (ones * c);
    return (y - ones) & ~y & highs;
}

/// Bytes 0x80..0xFF.
[[nodiscard]] inline auto high(std::uint64_t x) noexcept -> std::uint64_t { return x & highs; }

/// Index of the first flagged byte; mask != 0.
[[nodiscard]] inline auto first(std::uint64_t mask) noexcept -> std::size_t {
    return static_cast<std::size_t>(std::countr_zero(mask)) / 8;
}

/// p[0, n) == q[0, n), eight bytes at a time (the last word overlapping the one before), with
/// no call to memcmp: for the short strings of a head (a Content-Type, a Host, a path).
[[nodiscard]] inline auto same_bytes(const char* p, const char* q, std::size_t n) noexcept -> bool {
    if (n < 8) {
        for (std::size_t i = 0; i < n; ++i) {
            if (p[i] != q[i]) {
                return false;
            }
        }
        return true;
    }
    for (std::size_t i = 0; i + 8 < n; i += 8) {
        if (load(p + i) != load(q + i)) {
            return false;
        }
    }
    return load(p + n - 8) == load(q + n - 8);
}

}  // namespace weft::http::detail::swar
