#pragma once

// The WebSocket frame format (RFC 6455 5.2) and the incremental UTF-8 check of text messages.
// Internal to weft::http: websocket.cpp reads and writes frames with these.
//
//   byte 0: FIN(1) RSV1-3(3) opcode(4)      byte 1: MASK(1) length(7)
//   length 126: a 16-bit length follows; 127: a 64-bit one (top bit 0); then the 4-byte mask
//   key when MASK is set; then the payload.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace weft::http::detail {

enum class ws_opcode : std::uint8_t {
    continuation = 0x0,
    text = 0x1,
    binary = 0x2,
    close = 0x8,
    ping = 0x9,
    pong = 0xA,
};

[[nodiscard]] constexpr auto is_control(ws_opcode op) noexcept -> bool {
    return (static_cast<std::uint8_t>(op) & 0x8) != 0;
}

/// A frame head as read: `size` bytes of head, then `length` bytes of payload.
struct ws_frame_head {
    bool fin = false;
    std::uint8_t rsv = 0;  // the three reserved bits (RSV1 = 4: a compressed message's first frame)
    std::uint8_t opcode = 0;
    bool masked = false;
    std::uint8_t mask[4] = {};
    std::uint64_t length = 0;
    std::size_t size = 0;
};

/// Parses a frame head from the start of `in`. 0: more bytes are needed; 1: `h` is complete;
/// -1: the 64-bit length has its top bit set (RFC 6455 5.2: a protocol error).
[[nodiscard]] inline auto parse_frame_head(std::string_view in, ws_frame_head& h) noexcept -> int {
    if (in.size() < 2) {
        return 0;
    }
    const auto b0 = static_cast<std::uint8_t>(in[0]);
    const auto b1 = static_cast<std::uint8_t>(in[1]);
    h.fin = (b0 & 0x80) != 0;
    h.rsv = static_cast<std::uint8_t>((b0 >> 4) & 0x7);
    h.opcode = b0 & 0x0F;
    h.masked = (b1 & 0x80) != 0;
    const std::uint8_t len7 = b1 & 0x7F;
    std::size_t n = 2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0) + (h.masked ? 4 : 0);
    if (in.size() < n) {
        return 0;
    }
    std::size_t at = 2;
    if (len7 == 126) {
        h.length = (std::uint64_t{static_cast<std::uint8_t>(in[2])} << 8) |
                   static_cast<std::uint8_t>(in[3]);
        at = 4;
    } else if (len7 == 127) {
        h.length = 0;
        for (std::size_t i = 0; i < 8; ++i) {
            h.length = (h.length << 8) | static_cast<std::uint8_t>(in[2 + i]);
        }
        if ((h.length >> 63) != 0) {
            return -1;
        }
        at = 10;
    } else {
        h.length = len7;
    }
    if (h.masked) {
        std::memcpy(h.mask, in.data() + at, 4);
    }
    h.size = n;
    return 1;
}

/// RSV1 in ws_frame_head::rsv: set on the first frame of a message compressed with
/// permessage-deflate (RFC 7692 6).
inline constexpr std::uint8_t rsv1 = 0x4;

/// Writes a frame head into `out` (at least 14 bytes) and returns its size. `compressed` sets
/// RSV1.
[[nodiscard]] inline auto write_frame_head(std::uint8_t* out,
                                           ws_opcode op,
                                           bool fin,
                                           std::uint64_t length,
                                           const std::uint8_t* mask,
                                           bool compressed = false) noexcept -> std::size_t {
    out[0] = static_cast<std::uint8_t>((fin ? 0x80 : 0) | (compressed ? rsv1 << 4 : 0) |
                                       static_cast<std::uint8_t>(op));
    const std::uint8_t m = mask != nullptr ? 0x80 : 0;
    std::size_t n = 2;
    if (length < 126) {
        out[1] = static_cast<std::uint8_t>(m | length);
    } else if (length <= 0xFFFF) {
        out[1] = static_cast<std::uint8_t>(m | 126);
        out[2] = static_cast<std::uint8_t>(length >> 8);
        out[3] = static_cast<std::uint8_t>(length);
        n = 4;
    } else {
        out[1] = static_cast<std::uint8_t>(m | 127);
        for (std::size_t i = 0; i < 8; ++i) {
            out[2 + i] = static_cast<std::uint8_t>(length >> (56 - 8 * i));
        }
        n = 10;
    }
    if (mask != nullptr) {
        std::memcpy(out + n, mask, 4);
        n += 4;
    }
    return n;
}

/// XORs `n` bytes at `p` with the mask key, starting at key byte `phase` (masking and
/// unmasking are the same operation).
inline void apply_mask(char* p, std::size_t n, const std::uint8_t* mask, std::size_t phase = 0) {
    for (std::size_t i = 0; i < n; ++i) {
        p[i] = static_cast<char>(static_cast<std::uint8_t>(p[i]) ^ mask[(i + phase) & 3]);
    }
}

/// An incremental UTF-8 check (RFC 3629: no overlongs, no surrogates, at most U+10FFFF), fed
/// the pieces of a text message as they arrive, so an invalid sequence is found in the
/// fragment that holds it (RFC 6455 8.1: fail fast).
class utf8_check {
public:
    /// False once the bytes seen so far cannot begin valid UTF-8.
    [[nodiscard]] auto feed(std::string_view s) noexcept -> bool {
        for (const char ch : s) {
            const auto c = static_cast<std::uint8_t>(ch);
            if (need_ == 0) {
                if (c < 0x80) {
                    continue;
                }
                lo_ = 0x80;
                hi_ = 0xBF;
                if (c >= 0xC2 && c <= 0xDF) {
                    need_ = 1;
                } else if (c == 0xE0) {
                    need_ = 2;
                    lo_ = 0xA0;
                } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
                    need_ = 2;
                } else if (c == 0xED) {
                    need_ = 2;
                    hi_ = 0x9F;  // no surrogates
                } else if (c == 0xF0) {
                    need_ = 3;
                    lo_ = 0x90;
                } else if (c >= 0xF1 && c <= 0xF3) {
                    need_ = 3;
                } else if (c == 0xF4) {
                    need_ = 3;
                    hi_ = 0x8F;
                } else {
                    return false;
                }
            } else {
                if (c < lo_ || c > hi_) {
                    return false;
                }
                lo_ = 0x80;
                hi_ = 0xBF;
                --need_;
            }
        }
        return true;
    }
    /// True when no sequence is left open (the message may end here).
    [[nodiscard]] auto complete() const noexcept -> bool { return need_ == 0; }
    void reset() noexcept { need_ = 0; }

private:
    int need_ = 0;  // continuation bytes still owed by the open sequence
    std::uint8_t lo_ = 0x80;
    std::uint8_t hi_ = 0xBF;  // the range of the next continuation byte
};

}  // namespace weft::http::detail
