#include "weft/bus/message_id.hpp"

#include <atomic>
#include <chrono>
#include <random>

namespace weft::bus {
namespace {

// Monotonicity: one process-wide 64-bit word holds (unix_ms << 16 | sequence). Every generate()
// advances it with a compare-exchange to max(now_ms << 16, previous + 1), so the (timestamp,
// sequence) pairs handed out are strictly increasing in the order the exchanges succeed, even
// when the clock steps back or more than 65536 ids are made in one millisecond (the sequence
// then carries into the timestamp, which runs ahead of the clock for a moment; RFC 9562 6.2
// allows this). relaxed: the word orders only itself; nothing else is published through it.
std::atomic<std::uint64_t> last_stamp{0};

auto ms_since_epoch(std::chrono::system_clock::time_point now) noexcept -> std::uint64_t {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count());
}

auto next_stamp(std::uint64_t now_ms) noexcept -> std::uint64_t {
    const std::uint64_t fresh = (now_ms & 0xFFFF'FFFF'FFFFULL) << 16;
    std::uint64_t prev = last_stamp.load(std::memory_order_relaxed);
    for (;;) {
        const std::uint64_t next = fresh > prev ? fresh : prev + 1;
        if (last_stamp.compare_exchange_weak(prev, next, std::memory_order_relaxed)) {
            return next;
        }
    }
}

auto random_bits() noexcept -> std::uint64_t {
    // One generator per thread, seeded once from the OS. NOTE: called only from plain functions,
    // never inlined into a coroutine, so the thread_local is this thread's.
    thread_local std::mt19937_64 gen{[] {
        std::random_device rd;
        return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    }()};
    return gen();
}

auto hex_value(char c) noexcept -> int {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

constexpr bool is_dash_position(std::size_t i) noexcept {
    return i == 8 || i == 13 || i == 18 || i == 23;
}

}  // namespace

// Layout (big-endian, RFC 9562 5.7):
//   bytes 0-5  unix_ts_ms (48 bits)
//   byte  6    version 0111 | sequence bits 15..12
//   byte  7    sequence bits 11..4
//   byte  8    variant 10 | sequence bits 3..0 | 2 random bits
//   bytes 9-15 56 random bits
auto message_id::generate() noexcept -> message_id {
    return generate(std::chrono::system_clock::now());
}

auto message_id::generate(std::chrono::system_clock::time_point now) noexcept -> message_id {
    const std::uint64_t stamp = next_stamp(ms_since_epoch(now));
    const std::uint64_t ms = stamp >> 16;
    const auto seq = static_cast<std::uint32_t>(stamp & 0xFFFF);
    const std::uint64_t rnd = random_bits();
    message_id id;
    for (int i = 0; i < 6; ++i) {
        id.bytes[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(ms >> (40 - 8 * i));
    }
    id.bytes[6] = static_cast<std::uint8_t>(0x70 | (seq >> 12));
    id.bytes[7] = static_cast<std::uint8_t>(seq >> 4);
    id.bytes[8] = static_cast<std::uint8_t>(0x80 | ((seq & 0xF) << 2) | (rnd & 0x3));
    for (std::size_t i = 9; i < 16; ++i) {
        id.bytes[i] = static_cast<std::uint8_t>(rnd >> (8 * (i - 8)));
    }
    return id;
}

auto message_id::unix_ms() const noexcept -> std::uint64_t {
    std::uint64_t ms = 0;
    for (std::size_t i = 0; i < 6; ++i) {
        ms = (ms << 8) | bytes[i];
    }
    return ms;
}

auto message_id::to_string() const -> std::string {
    static constexpr char digits[] = "0123456789abcdef";
    std::string s;
    s.reserve(36);
    for (std::size_t i = 0; i < 16; ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) {
            s.push_back('-');
        }
        s.push_back(digits[bytes[i] >> 4]);
        s.push_back(digits[bytes[i] & 0xF]);
    }
    return s;
}

auto message_id::parse(std::string_view s) noexcept -> std::optional<message_id> {
    if (s.size() != 36) {
        return std::nullopt;
    }
    message_id id;
    std::size_t out = 0;
    for (std::size_t i = 0; i < s.size();) {
        if (is_dash_position(i)) {
            if (s[i] != '-') {
                return std::nullopt;
            }
            ++i;
            continue;
        }
        const int hi = hex_value(s[i]);
        const int lo = hex_value(s[i + 1]);
        if (hi < 0 || lo < 0) {
            return std::nullopt;
        }
        id.bytes[out++] = static_cast<std::uint8_t>((hi << 4) | lo);
        i += 2;
    }
    return id;
}

}  // namespace weft::bus
