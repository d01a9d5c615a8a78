#include "weft/bus/envelope_codec.hpp"

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "weft/bus/errc.hpp"
#include "weft/core/detail/json_text.hpp"

namespace weft::bus {
namespace {

auto varint_size(std::uint64_t v) noexcept -> std::size_t {
    std::size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        ++n;
    }
    return n;
}

auto str_size(std::string_view s) noexcept -> std::size_t {
    return varint_size(s.size()) + s.size();
}

/// Writes `v` as a varint at `p` (room for it is the caller's: see varint_size); returns the end.
auto put_varint(char* p, std::uint64_t v) noexcept -> char* {
    while (v >= 0x80) {
        *p++ = static_cast<char>((v & 0x7F) | 0x80);
        v >>= 7;
    }
    *p++ = static_cast<char>(v);
    return p;
}

auto put_str(char* p, std::string_view s) noexcept -> char* {
    p = put_varint(p, s.size());
    if (!s.empty()) {
        std::memcpy(p, s.data(), s.size());
    }
    return p + s.size();
}

/// A cursor over the input that never reads past its end: every take checks what remains first.
class reader {
public:
    explicit reader(std::string_view in) noexcept : in_(in) {}

    auto remaining() const noexcept -> std::size_t { return in_.size() - pos_; }

    auto byte(std::uint8_t& b) noexcept -> bool {
        if (remaining() < 1) {
            return false;
        }
        b = static_cast<std::uint8_t>(in_[pos_++]);
        return true;
    }
    auto bytes(std::size_t n, std::string_view& out) noexcept -> bool {
        if (remaining() < n) {
            return false;
        }
        out = in_.substr(pos_, n);
        pos_ += n;
        return true;
    }
    auto varint(std::uint64_t& v) noexcept -> bool {
        v = 0;
        for (unsigned shift = 0; shift < 64; shift += 7) {
            std::uint8_t b = 0;
            if (!byte(b)) {
                return false;
            }
            const std::uint64_t bits = b & 0x7F;
            if (shift == 63 && bits > 1) {
                return false;  // beyond 64 bits
            }
            v |= bits << shift;
            if ((b & 0x80) == 0) {
                return b != 0 || shift == 0;  // a zero last byte: an overlong (non-minimal) form
            }
        }
        return false;  // an 11th byte
    }
    auto str(std::string& out) -> bool {
        std::uint64_t n = 0;
        std::string_view s;
        if (!varint(n) || n > remaining() || !bytes(static_cast<std::size_t>(n), s)) {
            return false;
        }
        out.assign(s);
        return true;
    }
    auto str(std::string_view& out) noexcept -> bool {
        std::uint64_t n = 0;
        return varint(n) && n <= remaining() && bytes(static_cast<std::size_t>(n), out);
    }

private:
    std::string_view in_;
    std::size_t pos_ = 0;
};

auto to_unix_ns(std::chrono::system_clock::time_point t) noexcept -> std::int64_t {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

using weft::detail::append_json_string;
using weft::detail::valid_utf8;

void base64(std::string& out, std::string_view s) {
    static constexpr char table[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::size_t i = 0;
    for (; i + 3 <= s.size(); i += 3) {
        const std::uint32_t v =
            (static_cast<std::uint32_t>(static_cast<unsigned char>(s[i])) << 16) |
            (static_cast<std::uint32_t>(static_cast<unsigned char>(s[i + 1])) << 8) |
            static_cast<unsigned char>(s[i + 2]);
        out.push_back(table[(v >> 18) & 63]);
        out.push_back(table[(v >> 12) & 63]);
        out.push_back(table[(v >> 6) & 63]);
        out.push_back(table[v & 63]);
    }
    const std::size_t rest = s.size() - i;
    if (rest > 0) {
        std::uint32_t v = static_cast<std::uint32_t>(static_cast<unsigned char>(s[i])) << 16;
        if (rest == 2) {
            v |= static_cast<std::uint32_t>(static_cast<unsigned char>(s[i + 1])) << 8;
        }
        out.push_back(table[(v >> 18) & 63]);
        out.push_back(table[(v >> 12) & 63]);
        out.push_back(rest == 2 ? table[(v >> 6) & 63] : '=');
        out.push_back('=');
    }
}

void rfc3339(std::string& out, std::chrono::system_clock::time_point t) {
    const std::int64_t ns = to_unix_ns(t);
    std::int64_t secs = ns / 1'000'000'000;
    std::int64_t frac = ns % 1'000'000'000;
    if (frac < 0) {
        frac += 1'000'000'000;
        --secs;
    }
    const auto tt = static_cast<std::time_t>(secs);
    std::tm tm{};
    gmtime_r(&tt, &tm);
    char buf[64];
    const std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    out.append(buf, n);
    char fbuf[16];
    std::snprintf(fbuf, sizeof fbuf, ".%09lldZ", static_cast<long long>(frac));
    out += fbuf;
}

}  // namespace

void encode(const envelope& env, std::string& out) {
    // The exact size first, then one resize and plain stores: appending byte by byte spent most
    // of its instructions in the string's capacity checks (docs/design/decisions.md).
    std::size_t size = 1 + sizeof env.id.bytes + 8 + str_size(env.topic) + str_size(env.key) +
                       str_size(env.type) + varint_size(env.headers.size()) + str_size(env.payload);
    for (const header& h : env.headers) {
        size += str_size(h.name) + str_size(h.value);
    }
    const std::size_t start = out.size();
    out.resize(start + size);
    char* p = out.data() + start;
    *p++ = static_cast<char>(envelope_codec_version);
    std::memcpy(p, env.id.bytes.data(), sizeof env.id.bytes);
    p += sizeof env.id.bytes;
    const auto ns = static_cast<std::uint64_t>(to_unix_ns(env.time));
    for (int i = 0; i < 8; ++i) {
        *p++ = static_cast<char>(ns >> (8 * i));
    }
    p = put_str(p, env.topic);
    p = put_str(p, env.key);
    p = put_str(p, env.type);
    p = put_varint(p, env.headers.size());
    for (const header& h : env.headers) {
        p = put_str(p, h.name);
        p = put_str(p, h.value);
    }
    put_str(p, env.payload);
}

auto encode(const envelope& env) -> std::string {
    std::string out;
    encode(env, out);
    return out;
}

namespace {

/// The head every decoder reads first: the version byte, then the 16-byte id.
auto read_version_and_id(reader& r, message_id& id) -> std::error_code {
    std::uint8_t version = 0;
    if (!r.byte(version)) {
        return make_error_code(bus_errc::malformed_envelope);
    }
    if (version != envelope_codec_version) {
        return make_error_code(bus_errc::unsupported_version);
    }
    std::string_view raw;
    if (!r.bytes(16, raw)) {
        return make_error_code(bus_errc::malformed_envelope);
    }
    for (std::size_t i = 0; i < 16; ++i) {
        id.bytes[i] = static_cast<std::uint8_t>(raw[i]);
    }
    return {};
}

}  // namespace

auto decode(std::string_view bytes) -> result<envelope> {
    const std::error_code malformed = make_error_code(bus_errc::malformed_envelope);
    reader r{bytes};
    envelope env;
    if (const auto ec = read_version_and_id(r, env.id)) {
        return ec;
    }
    std::string_view raw;
    if (!r.bytes(8, raw)) {
        return malformed;
    }
    std::uint64_t ns = 0;
    for (std::size_t i = 0; i < 8; ++i) {
        ns |= static_cast<std::uint64_t>(static_cast<unsigned char>(raw[i])) << (8 * i);
    }
    env.time = std::chrono::system_clock::time_point{
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::nanoseconds{static_cast<std::int64_t>(ns)})};
    if (!r.str(env.topic) || !r.str(env.key) || !r.str(env.type)) {
        return malformed;
    }
    std::uint64_t count = 0;
    // Each header takes at least two bytes (two empty strings): a count beyond that cannot be
    // honest, and checking it first bounds the reservation below by the input's size.
    if (!r.varint(count) || count > r.remaining() / 2) {
        return malformed;
    }
    env.headers.reserve(static_cast<std::size_t>(count));
    for (std::uint64_t i = 0; i < count; ++i) {
        header h;
        if (!r.str(h.name) || !r.str(h.value)) {
            return malformed;
        }
        env.headers.push_back(std::move(h));
    }
    if (!r.str(env.payload) || r.remaining() != 0) {
        return malformed;
    }
    return env;
}

auto to_json(const envelope& env) -> std::string {
    std::string out;
    out.reserve(128 + env.payload.size() * 2);
    out += "{\"id\":\"";
    out += env.id.to_string();
    out += "\",\"topic\":";
    append_json_string(out, env.topic);
    out += ",\"key\":";
    append_json_string(out, env.key);
    out += ",\"type\":";
    append_json_string(out, env.type);
    out += ",\"time\":\"";
    rfc3339(out, env.time);
    out += "\",\"headers\":[";
    for (std::size_t i = 0; i < env.headers.size(); ++i) {
        if (i != 0) {
            out.push_back(',');
        }
        out.push_back('[');
        append_json_string(out, env.headers[i].name);
        out.push_back(',');
        append_json_string(out, env.headers[i].value);
        out.push_back(']');
    }
    out += "],";
    if (valid_utf8(env.payload)) {
        out += "\"payload\":";
        append_json_string(out, env.payload);
    } else {
        out += "\"payload_base64\":\"";
        base64(out, env.payload);
        out.push_back('"');
    }
    out.push_back('}');
    return out;
}

auto decode_routing(std::string_view bytes) -> result<encoded_envelope> {
    const std::error_code malformed = make_error_code(bus_errc::malformed_envelope);
    reader r{bytes};
    encoded_envelope e;
    e.bytes = bytes;
    if (const auto ec = read_version_and_id(r, e.id)) {
        return ec;
    }
    std::string_view raw;
    std::string_view skipped;
    if (!r.bytes(8, raw) || !r.str(e.topic) || !r.str(e.key) || !r.str(skipped)) {
        return malformed;
    }
    std::uint64_t count = 0;
    if (!r.varint(count) || count > r.remaining() / 2) {
        return malformed;
    }
    for (std::uint64_t i = 0; i < count; ++i) {
        if (!r.str(skipped) || !r.str(skipped)) {
            return malformed;
        }
    }
    if (!r.str(skipped) || r.remaining() != 0) {
        return malformed;
    }
    return e;
}

}  // namespace weft::bus
