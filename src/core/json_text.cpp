#include "weft/core/detail/json_text.hpp"

#include <cstddef>
#include <cstdint>

namespace weft::detail {

auto valid_utf8(std::string_view s) noexcept -> bool {
    std::size_t i = 0;
    while (i < s.size()) {
        const auto b = static_cast<unsigned char>(s[i]);
        std::size_t len = 0;
        std::uint32_t cp = 0;
        if (b < 0x80) {
            ++i;
            continue;
        }
        if ((b & 0xE0) == 0xC0) {
            len = 2;
            cp = b & 0x1F;
        } else if ((b & 0xF0) == 0xE0) {
            len = 3;
            cp = b & 0x0F;
        } else if ((b & 0xF8) == 0xF0) {
            len = 4;
            cp = b & 0x07;
        } else {
            return false;
        }
        if (s.size() - i < len) {
            return false;
        }
        for (std::size_t k = 1; k < len; ++k) {
            const auto c = static_cast<unsigned char>(s[i + k]);
            if ((c & 0xC0) != 0x80) {
                return false;
            }
            cp = (cp << 6) | (c & 0x3F);
        }
        const std::uint32_t min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            return false;
        }
        i += len;
    }
    return true;
}

void append_json_escaped(std::string& out, std::string_view s) {
    static constexpr char digits[] = "0123456789abcdef";
    const bool utf8 = valid_utf8(s);
    for (const char c : s) {
        const auto u = static_cast<unsigned char>(c);
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            default:
                if (u < 0x20 || u == 0x7F || (u >= 0x80 && !utf8)) {
                    out += "\\u00";
                    out.push_back(digits[u >> 4]);
                    out.push_back(digits[u & 0xF]);
                } else {
                    out.push_back(c);
                }
        }
    }
}

void append_json_string(std::string& out, std::string_view s) {
    out.push_back('"');
    append_json_escaped(out, s);
    out.push_back('"');
}

}  // namespace weft::detail
