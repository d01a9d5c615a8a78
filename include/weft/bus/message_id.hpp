#pragma once

#include <array>
#include <chrono>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace weft::bus {

/// A message's identity: 16 bytes, normally a UUIDv7 (RFC 9562): a 48-bit Unix timestamp in
/// milliseconds, the version and variant bits, a 16-bit sequence and 58 random bits. Byte order
/// is time order, so ids sort by creation time; within one process `generate()` is strictly
/// monotonic (see message_id.cpp for how). A caller may bring its own id (any 16 bytes that are
/// not all zero); the all-zero id means "none yet" and the publisher fills it in.
///
///     auto id = weft::bus::message_id::generate();
///     std::string s = id.to_string();          // "0190b6d1-7c3a-7e01-8a4f-1b2c3d4e5f60"
///     auto back = weft::bus::message_id::parse(s);   // std::optional<message_id>
struct message_id {
    std::array<std::uint8_t, 16> bytes{};

    /// A new UUIDv7. Any thread; lock-free.
    [[nodiscard]] static auto generate() noexcept -> message_id;
    /// The same, stamped with `now` instead of a clock reading of its own (for a caller that
    /// has just read the clock for something else: one reading serves both). Still strictly
    /// monotonic whatever `now` is.
    [[nodiscard]] static auto generate(std::chrono::system_clock::time_point now) noexcept
        -> message_id;
    /// The canonical 8-4-4-4-12 hex form (either case); nullopt for anything else.
    [[nodiscard]] static auto parse(std::string_view s) noexcept -> std::optional<message_id>;

    [[nodiscard]] auto to_string() const -> std::string;
    [[nodiscard]] auto is_nil() const noexcept -> bool { return *this == message_id{}; }
    /// The UUIDv7 timestamp (ms since the Unix epoch); meaningless for ids of other kinds.
    [[nodiscard]] auto unix_ms() const noexcept -> std::uint64_t;

    friend auto operator==(const message_id&, const message_id&) -> bool = default;
    friend auto operator<=>(const message_id&, const message_id&) = default;
};

}  // namespace weft::bus

template <>
struct std::hash<weft::bus::message_id> {
    auto operator()(const weft::bus::message_id& id) const noexcept -> std::size_t {
        // The last 8 bytes are random (or counter) bits in a UUIDv7: already well mixed.
        std::uint64_t h = 0;
        for (std::size_t i = 8; i < 16; ++i) {
            h = (h << 8) | id.bytes[i];
        }
        return static_cast<std::size_t>(h ^ (h >> 29));
    }
};
