#pragma once

// Byte classes of RFC 9110 / 9112 / 3986 as one 256-entry table: one load per byte, no
// branches.

#include <array>
#include <cstdint>
#include <string_view>

namespace weft::http::detail {

inline constexpr std::uint8_t tchar_bit = 1;     // token (RFC 9110 5.6.2)
inline constexpr std::uint8_t target_bit = 2;    // 0x21..0x7E except '?' and '#'
inline constexpr std::uint8_t value_bit = 4;     // field-vchar, SP, HT (obs-text included)
inline constexpr std::uint8_t hex_bit = 8;       // HEXDIG
inline constexpr std::uint8_t regname_bit = 16;  // unreserved / sub-delims (RFC 3986 reg-name)
inline constexpr std::uint8_t qdtext_bit = 32;   // quoted-string text (RFC 9110 5.6.4)

inline constexpr auto char_classes = [] {
    std::array<std::uint8_t, 256> t{};
    constexpr std::string_view tchar_marks = "!#$%&'*+-.^_`|~";
    constexpr std::string_view unreserved_marks = "-._~";
    constexpr std::string_view sub_delims = "!$&'()*+,;=";
    for (int c = 0; c < 256; ++c) {
        const auto ch = static_cast<char>(c);
        const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        const bool digit = c >= '0' && c <= '9';
        std::uint8_t v = 0;
        if (alpha || digit || tchar_marks.find(ch) != std::string_view::npos) {
            v |= tchar_bit;
        }
        if (c >= 0x21 && c <= 0x7e && c != '?' && c != '#') {
            v |= target_bit;
        }
        if (c == ' ' || c == '\t' || (c >= 0x21 && c != 0x7f)) {
            v |= value_bit;
        }
        if (digit || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')) {
            v |= hex_bit;
        }
        if (alpha || digit || unreserved_marks.find(ch) != std::string_view::npos ||
            sub_delims.find(ch) != std::string_view::npos) {
            v |= regname_bit;
        }
        if (c == '\t' || c == ' ' || c == 0x21 || (c >= 0x23 && c <= 0x5b) ||
            (c >= 0x5d && c <= 0x7e) || c >= 0x80) {
            v |= qdtext_bit;
        }
        t[static_cast<std::size_t>(c)] = v;
    }
    return t;
}();

[[nodiscard]] inline auto has(char c, std::uint8_t bit) noexcept -> bool {
    return (char_classes[static_cast<unsigned char>(c)] & bit) != 0;
}
[[nodiscard]] inline auto is_tchar(char c) noexcept -> bool { return has(c, tchar_bit); }
[[nodiscard]] inline auto is_hex(char c) noexcept -> bool { return has(c, hex_bit); }
[[nodiscard]] inline auto is_ows(char c) noexcept -> bool { return c == ' ' || c == '\t'; }

[[nodiscard]] inline auto to_lower(char c) noexcept -> char {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c + ('a' - 'A')) : c;
}

/// ASCII case-insensitive equality.
[[nodiscard]] inline auto iequals(std::string_view a, std::string_view b) noexcept -> bool {
    if (a.size() != b.size()) {
        return false;
    }
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (to_lower(a[i]) != to_lower(b[i])) {
            return false;
        }
    }
    return true;
}

}  // namespace weft::http::detail
