#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "weft/bus/envelope.hpp"
#include "weft/core/result.hpp"

namespace weft::bus {

/// The binary form of an envelope, as brokers carry it (version 1):
///
///     u8      version (1)
///     16 B    id
///     i64     time, nanoseconds since the Unix epoch, little-endian
///     str     topic, key, type          str = varint length, then the bytes
///     varint  header count, then per header: str name, str value
///     str     payload
///
/// varint: LEB128 (7 bits per byte, low first), minimal (no zero last byte after the first),
/// at most 10 bytes, the value within 64 bits. Every envelope thus has exactly one encoding.
/// Decoding checks every length against what remains before reading (never an over-read), and
/// accepts only an exact encoding: a truncated input, a length past the end or bytes after the
/// payload decode to `bus_errc::malformed_envelope`, an unknown version byte to
/// `unsupported_version`. Never throws on input (only std::bad_alloc).
inline constexpr std::uint8_t envelope_codec_version = 1;

/// Appends the encoding of `env` to `out`.
void encode(const envelope& env, std::string& out);
[[nodiscard]] auto encode(const envelope& env) -> std::string;
[[nodiscard]] auto decode(std::string_view bytes) -> result<envelope>;

/// An encoded envelope with the fields a broker routes it by, read out of the encoding without
/// allocating: `topic` and `key` are views into `bytes`, which is the whole encoding. Valid
/// while the bytes it views are.
struct encoded_envelope {
    message_id id{};
    std::string_view topic{};
    std::string_view key{};
    std::string_view bytes{};
};

/// Checks `bytes` exactly as decode does (the same errors for the same inputs) and returns its
/// id, topic and key as views, copying nothing: for a relay that forwards an encoding it
/// stored (weft's outboxes) without decoding it into an envelope.
[[nodiscard]] auto decode_routing(std::string_view bytes) -> result<encoded_envelope>;

/// A JSON object for logs and debugging (output only): id and type as strings, time as RFC 3339
/// UTC with nanoseconds, headers as [name, value] pairs, the payload as a JSON string when it is
/// valid UTF-8, else as "payload_base64".
[[nodiscard]] auto to_json(const envelope& env) -> std::string;

}  // namespace weft::bus
