#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "weft/bus/message_id.hpp"

namespace weft::bus {

/// The id's text form, as message_id::to_string writes it (8-4-4-4-12 lower-case hex), into a
/// buffer of the caller's: the brokers' id headers (Kafka's `weft-id`, NATS's `Nats-Msg-Id`)
/// without a std::string allocated and freed per message. Two hex digits per byte from a
/// table: one load and one store each (to_string's loop with a branch per digit was the
/// largest single cost of a publish on both brokers in callgrind).
inline void id_text(const message_id& id, char* out) noexcept {
    static constexpr auto pairs = [] {
        constexpr char digits[] = "0123456789abcdef";
        std::array<std::array<char, 2>, 256> t{};
        for (std::size_t b = 0; b < 256; ++b) {
            t[b] = {digits[b >> 4], digits[b & 0xF]};
        }
        return t;
    }();
    // Byte i goes to out[at[i]]: 8-4-4-4-12 digits with a '-' between the groups.
    static constexpr std::array<std::uint8_t, 16> at = {0,  2,  4,  6,  9,  11, 14, 16,
                                                        19, 21, 24, 26, 28, 30, 32, 34};
    for (std::size_t i = 0; i < 16; ++i) {
        std::memcpy(out + at[i], pairs[id.bytes[i]].data(), 2);
    }
    out[8] = out[13] = out[18] = out[23] = '-';
}

/// The length id_text writes.
inline constexpr std::size_t id_text_size = 36;

}  // namespace weft::bus
