#include "cloudevents.hpp"

#include <array>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <optional>

#include "envelope_id_text.hpp"
#include "weft/bus/envelope_codec.hpp"
#include "weft/bus/errc.hpp"
#include "weft/core/detail/json_text.hpp"

namespace weft::bus::cloudevents {
namespace {

using namespace std::string_view_literals;

/// Attributes the envelope's own fields fill: a header by one of these names is refused.
constexpr std::array<std::string_view, 6> filled_by_envelope = {
    "specversion"sv, "id"sv, "type"sv, "time"sv, "subject"sv, "data"sv};

/// The spec's MUST: lower-case a-z and 0-9. A reader takes longer names than 20 (a SHOULD).
auto valid_chars(std::string_view n) noexcept -> bool {
    if (n.empty()) {
        return false;
    }
    for (const char c : n) {
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) {
            return false;
        }
    }
    return true;
}

/// What a writer sends: the MUST and the SHOULD (at most 20 characters).
auto valid_name(std::string_view n) noexcept -> bool { return n.size() <= 20 && valid_chars(n); }

using weft::detail::append_json_string;
using weft::detail::valid_utf8;

auto lower_equal(std::string_view a, std::string_view b) noexcept -> bool {
    if (a.size() != b.size()) {
        return false;
    }
    for (std::size_t i = 0; i < a.size(); ++i) {
        char c = a[i];
        if (c >= 'A' && c <= 'Z') {
            c = static_cast<char>(c - 'A' + 'a');
        }
        if (c != b[i]) {
            return false;
        }
    }
    return true;
}

auto starts_with_lower(std::string_view s, std::string_view prefix) noexcept -> bool {
    return s.size() >= prefix.size() && lower_equal(s.substr(0, prefix.size()), prefix);
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

auto is_json_type(std::string_view content_type) noexcept -> bool {
    // "application/json", "text/json", "application/x+json", with parameters or not.
    const std::size_t semi = content_type.find(';');
    std::string_view media = content_type.substr(0, semi);
    while (!media.empty() && media.back() == ' ') {
        media.remove_suffix(1);
    }
    return lower_equal(media, "application/json") || lower_equal(media, "text/json") ||
           (media.size() > 5 && lower_equal(media.substr(media.size() - 5), "+json"));
}

// ---- JSON (the structured mode's event format): a reader that checks as it goes ----

class json_reader {
public:
    explicit json_reader(std::string_view in) noexcept : in_(in) {}

    void skip_ws() noexcept {
        while (pos_ < in_.size() &&
               (in_[pos_] == ' ' || in_[pos_] == '\t' || in_[pos_] == '\n' || in_[pos_] == '\r')) {
            ++pos_;
        }
    }
    auto at_end() const noexcept -> bool { return pos_ == in_.size(); }
    auto peek() const noexcept -> char { return pos_ < in_.size() ? in_[pos_] : '\0'; }
    auto take(char c) noexcept -> bool {
        if (peek() != c || at_end()) {
            return false;
        }
        ++pos_;
        return true;
    }
    auto position() const noexcept -> std::size_t { return pos_; }

    /// A JSON string, unescaped into `out` (UTF-8).
    auto string(std::string& out) -> bool {
        out.clear();
        if (!take('"')) {
            return false;
        }
        while (pos_ < in_.size()) {
            const char c = in_[pos_++];
            if (c == '"') {
                return valid_utf8(out);
            }
            if (static_cast<unsigned char>(c) < 0x20) {
                return false;
            }
            if (c != '\\') {
                out.push_back(c);
                continue;
            }
            if (pos_ >= in_.size()) {
                return false;
            }
            switch (in_[pos_++]) {
                case '"':
                    out.push_back('"');
                    break;
                case '\\':
                    out.push_back('\\');
                    break;
                case '/':
                    out.push_back('/');
                    break;
                case 'b':
                    out.push_back('\b');
                    break;
                case 'f':
                    out.push_back('\f');
                    break;
                case 'n':
                    out.push_back('\n');
                    break;
                case 'r':
                    out.push_back('\r');
                    break;
                case 't':
                    out.push_back('\t');
                    break;
                case 'u': {
                    std::uint32_t cp = 0;
                    if (!hex4(cp)) {
                        return false;
                    }
                    if (cp >= 0xD800 && cp <= 0xDBFF) {
                        std::uint32_t lo = 0;
                        if (!take('\\') || !take('u') || !hex4(lo) || lo < 0xDC00 || lo > 0xDFFF) {
                            return false;
                        }
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                        return false;
                    }
                    put_utf8(cp, out);
                    break;
                }
                default:
                    return false;
            }
        }
        return false;
    }

    /// Any JSON value, checked and skipped (depth-bounded).
    auto skip_value(int depth = 0) -> bool {
        if (depth > 64) {
            return false;
        }
        skip_ws();
        const char c = peek();
        if (c == '"') {
            std::string ignored;
            return string(ignored);
        }
        if (c == '{' || c == '[') {
            const char close = c == '{' ? '}' : ']';
            ++pos_;
            skip_ws();
            if (take(close)) {
                return true;
            }
            for (;;) {
                if (c == '{') {
                    std::string ignored;
                    skip_ws();
                    if (!string(ignored)) {
                        return false;
                    }
                    skip_ws();
                    if (!take(':')) {
                        return false;
                    }
                }
                if (!skip_value(depth + 1)) {
                    return false;
                }
                skip_ws();
                if (take(close)) {
                    return true;
                }
                if (!take(',')) {
                    return false;
                }
            }
        }
        for (const std::string_view lit : {"true"sv, "false"sv, "null"sv}) {
            if (in_.substr(pos_, lit.size()) == lit) {
                pos_ += lit.size();
                return true;
            }
        }
        return number();
    }

private:
    auto hex4(std::uint32_t& v) noexcept -> bool {
        if (in_.size() - pos_ < 4) {
            return false;
        }
        v = 0;
        for (int i = 0; i < 4; ++i) {
            const int h = hex_value(in_[pos_++]);
            if (h < 0) {
                return false;
            }
            v = (v << 4) | static_cast<std::uint32_t>(h);
        }
        return true;
    }
    static void put_utf8(std::uint32_t cp, std::string& out) {
        if (cp < 0x80) {
            out.push_back(static_cast<char>(cp));
        } else if (cp < 0x800) {
            out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        } else if (cp < 0x10000) {
            out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
            out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        } else {
            out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
            out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
            out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        }
    }
    auto digits() noexcept -> bool {
        const std::size_t start = pos_;
        while (pos_ < in_.size() && in_[pos_] >= '0' && in_[pos_] <= '9') {
            ++pos_;
        }
        return pos_ > start;
    }
    auto number() noexcept -> bool {
        take('-');
        if (take('0')) {
            // no leading zeros
        } else if (!digits()) {
            return false;
        }
        if (take('.') && !digits()) {
            return false;
        }
        if (peek() == 'e' || peek() == 'E') {
            ++pos_;
            if (!take('+')) {
                take('-');
            }
            if (!digits()) {
                return false;
            }
        }
        return true;
    }

    std::string_view in_;
    std::size_t pos_ = 0;
};

void base64_encode(std::string_view s, std::string& out) {
    static constexpr char table[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::size_t i = 0;
    for (; i + 3 <= s.size(); i += 3) {
        const std::uint32_t v =
            (static_cast<std::uint32_t>(static_cast<unsigned char>(s[i])) << 16) |
            (static_cast<std::uint32_t>(static_cast<unsigned char>(s[i + 1])) << 8) |
            static_cast<unsigned char>(s[i + 2]);
        for (const int shift : {18, 12, 6, 0}) {
            out.push_back(table[(v >> shift) & 63]);
        }
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

auto base64_decode(std::string_view s, std::string& out) -> bool {
    out.clear();
    if (s.size() % 4 != 0) {
        return false;
    }
    std::uint32_t acc = 0;
    int bits = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        int v = -1;
        if (c >= 'A' && c <= 'Z') {
            v = c - 'A';
        } else if (c >= 'a' && c <= 'z') {
            v = c - 'a' + 26;
        } else if (c >= '0' && c <= '9') {
            v = c - '0' + 52;
        } else if (c == '+') {
            v = 62;
        } else if (c == '/') {
            v = 63;
        } else if (c == '=' && i + 2 >= s.size()) {
            // padding: only at the end, and nothing but padding after it
            for (std::size_t k = i; k < s.size(); ++k) {
                if (s[k] != '=') {
                    return false;
                }
            }
            return true;
        } else {
            return false;
        }
        acc = (acc << 6) | static_cast<std::uint32_t>(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out.push_back(static_cast<char>((acc >> bits) & 0xFF));
        }
    }
    return true;
}

auto days_from_civil(std::int64_t y, unsigned m, unsigned d) noexcept -> std::int64_t {
    y -= m <= 2 ? 1 : 0;
    const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
    const auto yoe = static_cast<unsigned>(y - era * 400);
    const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

auto fixed_digits(std::string_view s, std::size_t at, std::size_t n, int& v) noexcept -> bool {
    if (s.size() < at + n) {
        return false;
    }
    v = 0;
    for (std::size_t i = at; i < at + n; ++i) {
        if (s[i] < '0' || s[i] > '9') {
            return false;
        }
        v = v * 10 + (s[i] - '0');
    }
    return true;
}

auto fail(std::string& why, std::string text) -> std::error_code {
    why = std::move(text);
    return make_error_code(bus_errc::malformed_event);
}

/// The attributes of a received event, by name, as text (unescaped).
struct attributes {
    std::optional<std::string> specversion, id, source, type, time, subject, datacontenttype,
        dataschema;
    std::vector<header> extensions;

    /// Files `value` under `name`; false for a name given twice.
    auto set(std::string_view name, std::string value) -> bool {
        std::optional<std::string>* slot = nullptr;
        if (name == "specversion") {
            slot = &specversion;
        } else if (name == "id") {
            slot = &id;
        } else if (name == "source") {
            slot = &source;
        } else if (name == "type") {
            slot = &type;
        } else if (name == "time") {
            slot = &time;
        } else if (name == "subject") {
            slot = &subject;
        } else if (name == "datacontenttype") {
            slot = &datacontenttype;
        } else if (name == "dataschema") {
            slot = &dataschema;
        }
        if (slot != nullptr) {
            if (slot->has_value()) {
                return false;
            }
            *slot = std::move(value);
            return true;
        }
        for (const header& h : extensions) {
            if (h.name == name) {
                return false;
            }
        }
        extensions.push_back(header{std::string(name), std::move(value)});
        return true;
    }
};

/// The envelope of a complete set of attributes, or malformed_event naming what is wrong.
auto to_envelope(attributes&& a,
                 std::string_view mode,
                 std::string_view prefix,
                 std::string_view topic,
                 std::string_view record_key,
                 std::string& why) -> result<envelope> {
    const auto missing = [&](std::string_view name) {
        return fail(why, std::string(mode) + ": no " + std::string(prefix) + std::string(name) +
                             (prefix.empty() ? " attribute" : " header"));
    };
    if (!a.specversion) {
        return missing("specversion");
    }
    if (*a.specversion != "1.0") {
        return fail(why, std::string(mode) + ": specversion '" + *a.specversion +
                             "' (this reader knows 1.0)");
    }
    if (!a.id || a.id->empty()) {
        return missing("id");
    }
    if (!a.source || a.source->empty()) {
        return missing("source");
    }
    if (!a.type || a.type->empty()) {
        return missing("type");
    }
    envelope env;
    const auto id = message_id::parse(*a.id);
    if (!id) {
        return fail(why, std::string(mode) + ": id '" + *a.id + "' is not a UUID");
    }
    env.id = *id;
    if (a.time && !parse_time(*a.time, env.time)) {
        return fail(why,
                    std::string(mode) + ": time '" + *a.time + "' is not an RFC 3339 timestamp");
    }
    env.topic = topic;
    env.type = std::move(*a.type);
    env.key = a.subject ? std::move(*a.subject) : std::string(record_key);
    env.headers.reserve(a.extensions.size() + 3);
    env.headers.push_back(header{"source", std::move(*a.source)});
    if (a.datacontenttype) {
        env.headers.push_back(header{"datacontenttype", std::move(*a.datacontenttype)});
    }
    if (a.dataschema) {
        env.headers.push_back(header{"dataschema", std::move(*a.dataschema)});
    }
    for (header& h : a.extensions) {
        env.headers.push_back(std::move(h));
    }
    return env;
}

auto read_binary(std::span<const wire_header> headers,
                 std::string_view body,
                 std::string_view topic,
                 std::string_view record_key,
                 binding b,
                 std::string& why) -> result<envelope> {
    const std::string_view prefix = b == binding::nats ? "ce-" : "ce_";
    const std::string_view mode = "CloudEvents binary";
    attributes a;
    std::string name;
    for (const wire_header& h : headers) {
        std::string value;
        if (b == binding::kafka && lower_equal(h.name, "content-type")) {
            name = "datacontenttype";
        } else if (starts_with_lower(h.name, prefix)) {
            name.assign(h.name.substr(prefix.size()));
            for (char& c : name) {
                if (c >= 'A' && c <= 'Z') {
                    c = static_cast<char>(c - 'A' + 'a');  // NATS names are case-insensitive
                }
            }
            if (!valid_chars(name)) {
                return fail(why, std::string(mode) + ": header '" + std::string(h.name) +
                                     "' is not a valid attribute name");
            }
        } else {
            continue;  // not an attribute (Nats-Msg-Id, a transport header)
        }
        if (b == binding::nats) {
            if (!decode_percent(h.value, value)) {
                return fail(why, std::string(mode) + ": header '" + std::string(h.name) +
                                     "' has a bad percent-encoding or is not UTF-8");
            }
        } else {
            value.assign(h.value);
            if (!valid_utf8(value)) {
                return fail(
                    why, std::string(mode) + ": header '" + std::string(h.name) + "' is not UTF-8");
            }
        }
        if (!a.set(name, std::move(value))) {
            return fail(why, std::string(mode) + ": attribute '" + name + "' given twice");
        }
    }
    auto env = to_envelope(std::move(a), mode, prefix, topic, record_key, why);
    if (env) {
        env->payload.assign(body);
    }
    return env;
}

auto read_structured(std::string_view body,
                     std::string_view topic,
                     std::string_view record_key,
                     std::string& why) -> result<envelope> {
    const std::string_view mode = "CloudEvents structured";
    json_reader r{body};
    r.skip_ws();
    if (!r.take('{')) {
        return fail(why, std::string(mode) + ": the body is not a JSON object");
    }
    attributes a;
    std::optional<std::string_view> data;  // raw JSON text
    bool data_is_string = false;
    std::optional<std::string> data_base64;
    std::string name;
    std::string value;
    r.skip_ws();
    bool first = true;
    while (!r.take('}')) {
        if (!first && !r.take(',')) {
            return fail(why, std::string(mode) + ": bad JSON");
        }
        first = false;
        r.skip_ws();
        if (!r.string(name)) {
            return fail(why, std::string(mode) + ": bad JSON member name");
        }
        r.skip_ws();
        if (!r.take(':')) {
            return fail(why, std::string(mode) + ": bad JSON");
        }
        r.skip_ws();
        if (name == "data") {
            const std::size_t start = r.position();
            data_is_string = r.peek() == '"';
            if (data || !r.skip_value()) {
                return fail(why, std::string(mode) + ": bad or repeated data");
            }
            data = body.substr(start, r.position() - start);
        } else if (name == "data_base64") {
            if (data_base64 || !r.string(value)) {
                return fail(why, std::string(mode) + ": data_base64 is not a string");
            }
            data_base64 = value;
        } else {
            if (r.peek() == '"') {
                if (!r.string(value)) {
                    return fail(why, std::string(mode) + ": bad JSON string in '" + name + "'");
                }
            } else {
                // An integer or boolean extension: its canonical text.
                const std::size_t start = r.position();
                const char c = r.peek();
                if (c == '{' || c == '[' || c == 'n' || !r.skip_value()) {
                    return fail(why, std::string(mode) + ": attribute '" + name +
                                         "' is not a string, integer or boolean");
                }
                value.assign(body.substr(start, r.position() - start));
            }
            if (!valid_chars(name)) {
                return fail(why,
                            std::string(mode) + ": '" + name + "' is not a valid attribute name");
            }
            if (!a.set(name, value)) {
                return fail(why, std::string(mode) + ": attribute '" + name + "' given twice");
            }
        }
        r.skip_ws();
    }
    r.skip_ws();
    if (!r.at_end()) {
        return fail(why, std::string(mode) + ": bytes after the JSON object");
    }
    if (data && data_base64) {
        return fail(why, std::string(mode) + ": both data and data_base64");
    }
    const bool json_data = !a.datacontenttype || is_json_type(*a.datacontenttype);
    auto env = to_envelope(std::move(a), mode, "", topic, record_key, why);
    if (!env) {
        return env;
    }
    if (data_base64) {
        if (!base64_decode(*data_base64, env->payload)) {
            return fail(why, std::string(mode) + ": data_base64 is not base64");
        }
    } else if (data) {
        if (data_is_string && !json_data) {
            json_reader s{*data};
            [[maybe_unused]] const bool ok = s.string(env->payload);  // checked above
        } else {
            env->payload.assign(*data);
        }
    }
    return env;
}

}  // namespace

auto check(const envelope& env, std::string& why) -> std::error_code {
    const auto refuse = [&](std::string text) {
        why = std::move(text);
        return make_error_code(bus_errc::not_expressible);
    };
    if (env.type.empty()) {
        return refuse("CloudEvents requires a type: the envelope's type is empty");
    }
    if (!valid_utf8(env.type) || !valid_utf8(env.key)) {
        return refuse("the envelope's type or key is not UTF-8");
    }
    for (std::size_t i = 0; i < env.headers.size(); ++i) {
        const header& h = env.headers[i];
        if (!valid_name(h.name)) {
            return refuse("header '" + h.name +
                          "': a CloudEvents attribute name is 1 to 20 characters, lower-case "
                          "a-z and 0-9");
        }
        for (const std::string_view reserved : filled_by_envelope) {
            if (h.name == reserved) {
                return refuse("header '" + h.name +
                              "': the envelope's own fields fill that attribute");
            }
        }
        for (std::size_t k = 0; k < i; ++k) {
            if (env.headers[k].name == h.name) {
                return refuse("header '" + h.name + "' given twice (an attribute has one value)");
            }
        }
        if (!valid_utf8(h.value)) {
            return refuse("header '" + h.name + "': the value is not UTF-8");
        }
        if (h.name == "source" && h.value.empty()) {
            return refuse("header 'source': CloudEvents requires a non-empty source");
        }
    }
    return {};
}

void to_binary(const envelope& env,
               std::string_view default_source,
               binding b,
               std::vector<wire_header>& out,
               std::string& buffer) {
    const bool nats = b == binding::nats;
    // Names and values are written into `buffer` first and the views taken after the last
    // append, so that no view points into memory the buffer left when it grew.
    struct span {
        std::size_t name_at, name_len, value_at, value_len;
    };
    std::array<span, 32> fixed{};
    std::vector<span> more;
    std::size_t count = 0;
    buffer.clear();
    const auto add = [&](std::string_view prefix, std::string_view name, std::string_view v) {
        span sp{};
        sp.name_at = buffer.size();
        buffer.append(prefix);
        buffer.append(name);
        sp.name_len = buffer.size() - sp.name_at;
        buffer.push_back('\0');
        sp.value_at = buffer.size();
        if (nats) {
            encode_percent(v, buffer);
        } else {
            buffer.append(v);
        }
        sp.value_len = buffer.size() - sp.value_at;
        buffer.push_back('\0');
        if (count < fixed.size()) {
            fixed[count] = sp;
        } else {
            more.push_back(sp);
        }
        ++count;
    };
    const std::string_view p = nats ? "ce-" : "ce_";
    char id[id_text_size];
    id_text(env.id, id);
    std::string time;
    write_time(env.time, time);
    const header* source = env.find_header("source");
    add(p, "specversion", "1.0");
    add(p, "id", std::string_view(id, sizeof id));
    add(p, "source", source != nullptr ? std::string_view(source->value) : default_source);
    add(p, "type", env.type);
    add(p, "time", time);
    if (!env.key.empty()) {
        add(p, "subject", env.key);
    }
    for (const header& h : env.headers) {
        if (h.name == "source") {
            continue;
        }
        if (!nats && h.name == "datacontenttype") {
            add("", "content-type", h.value);  // the Kafka binding's one renamed attribute
        } else {
            add(p, h.name, h.value);
        }
    }
    out.clear();
    const std::string_view all = buffer;
    for (std::size_t i = 0; i < count; ++i) {
        const span& sp = i < fixed.size() ? fixed[i] : more[i - fixed.size()];
        out.push_back({all.substr(sp.name_at, sp.name_len), all.substr(sp.value_at, sp.value_len)});
    }
}

void to_structured(const envelope& env, std::string_view default_source, std::string& out) {
    out += "{\"specversion\":\"1.0\",\"id\":\"";
    out += env.id.to_string();
    out += "\",\"source\":";
    const header* source = env.find_header("source");
    append_json_string(out, source != nullptr ? std::string_view(source->value) : default_source);
    out += ",\"type\":";
    append_json_string(out, env.type);
    out += ",\"time\":\"";
    write_time(env.time, out);
    out += '"';
    if (!env.key.empty()) {
        out += ",\"subject\":";
        append_json_string(out, env.key);
    }
    for (const header& h : env.headers) {
        if (h.name == "source") {
            continue;
        }
        out += ",\"";
        out += h.name;  // a valid name needs no escaping
        out += "\":";
        append_json_string(out, h.value);
    }
    const header* ct = env.find_header("datacontenttype");
    json_reader whole{env.payload};
    // The payload goes in as JSON text, byte for byte, when the content type says JSON (or
    // none is given) and it is exactly one JSON value; otherwise base64.
    if ((ct == nullptr || is_json_type(ct->value)) && !env.payload.empty() && whole.skip_value() &&
        whole.at_end() && env.payload.front() != ' ' && valid_utf8(env.payload)) {
        out += ",\"data\":";
        out += env.payload;
    } else if (!env.payload.empty()) {
        out += ",\"data_base64\":\"";
        base64_encode(env.payload, out);
        out += '"';
    }
    out += '}';
}

auto read(std::span<const wire_header> headers,
          std::string_view body,
          std::string_view topic,
          std::string_view record_key,
          binding b,
          std::string& why) -> result<envelope> {
    const std::string_view prefix = b == binding::nats ? "ce-" : "ce_";
    bool binary = false;
    for (const wire_header& h : headers) {
        if (lower_equal(h.name, "content-type") &&
            starts_with_lower(h.value, structured_media_type)) {
            if (!starts_with_lower(h.value, structured_content_type)) {
                return fail(why, "CloudEvents structured: event format '" + std::string(h.value) +
                                     "' (this reader knows JSON)");
            }
            return read_structured(body, topic, record_key, why);
        }
        binary = binary || starts_with_lower(h.name, prefix);
    }
    if (binary) {
        return read_binary(headers, body, topic, record_key, b, why);
    }
    auto env = decode(body);
    if (!env) {
        why = "weft encoding (no CloudEvents headers): " + env.error().message();
    }
    return env;
}

void encode_percent(std::string_view in, std::string& out) {
    static constexpr char digits[] = "0123456789ABCDEF";
    for (const char c : in) {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x21 || u > 0x7E || c == '"' || c == '%') {
            out.push_back('%');
            out.push_back(digits[u >> 4]);
            out.push_back(digits[u & 0xF]);
        } else {
            out.push_back(c);
        }
    }
}

auto decode_percent(std::string_view in, std::string& out) -> bool {
    out.clear();
    std::string unquoted;
    if (in.size() >= 2 && in.front() == '"' && in.back() == '"') {
        // A quoted-string (RFC 7230 3.2.6), as older senders wrote: backslash escapes.
        in = in.substr(1, in.size() - 2);
        for (std::size_t i = 0; i < in.size(); ++i) {
            if (in[i] == '\\' && i + 1 < in.size()) {
                ++i;
            }
            unquoted.push_back(in[i]);
        }
        in = unquoted;
    }
    for (std::size_t i = 0; i < in.size(); ++i) {
        if (in[i] != '%') {
            out.push_back(in[i]);
            continue;
        }
        if (i + 2 >= in.size()) {
            return false;
        }
        const int hi = hex_value(in[i + 1]);
        const int lo = hex_value(in[i + 2]);
        if (hi < 0 || lo < 0) {
            return false;
        }
        out.push_back(static_cast<char>((hi << 4) | lo));
        i += 2;
    }
    return valid_utf8(out);
}

void write_time(std::chrono::system_clock::time_point t, std::string& out) {
    const std::int64_t ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
    std::int64_t secs = ns / 1'000'000'000;
    std::int64_t frac = ns % 1'000'000'000;
    if (frac < 0) {
        frac += 1'000'000'000;
        --secs;
    }
    const auto tt = static_cast<std::time_t>(secs);
    std::tm tm{};
    gmtime_r(&tt, &tm);
    char buf[48];
    const int n = std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%09lldZ",
                                tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                                tm.tm_sec, static_cast<long long>(frac));
    out.append(buf, static_cast<std::size_t>(n));
}

auto parse_time(std::string_view s, std::chrono::system_clock::time_point& t) -> bool {
    int year = 0;
    int month = 0;
    int day = 0;
    int hour = 0;
    int minute = 0;
    int second = 0;
    if (!fixed_digits(s, 0, 4, year) || s.size() < 20 || s[4] != '-' ||
        !fixed_digits(s, 5, 2, month) || s[7] != '-' || !fixed_digits(s, 8, 2, day) ||
        (s[10] != 'T' && s[10] != 't') || !fixed_digits(s, 11, 2, hour) || s[13] != ':' ||
        !fixed_digits(s, 14, 2, minute) || s[16] != ':' || !fixed_digits(s, 17, 2, second)) {
        return false;
    }
    static constexpr int month_days[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (month < 1 || month > 12 || day < 1 || day > month_days[month - 1] || hour > 23 ||
        minute > 59 || second > 60) {
        return false;
    }
    const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    if (month == 2 && day == 29 && !leap) {
        return false;
    }
    std::size_t i = 19;
    std::int64_t frac_ns = 0;
    if (i < s.size() && s[i] == '.') {
        ++i;
        int digits = 0;
        while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
            if (digits < 9) {
                frac_ns = frac_ns * 10 + (s[i] - '0');
            }
            ++digits;
            ++i;
        }
        if (digits == 0) {
            return false;
        }
        for (int k = digits; k < 9; ++k) {
            frac_ns *= 10;
        }
    }
    std::int64_t offset_s = 0;
    if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) {
        ++i;
    } else if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
        int oh = 0;
        int om = 0;
        if (!fixed_digits(s, i + 1, 2, oh) || s.size() < i + 6 || s[i + 3] != ':' ||
            !fixed_digits(s, i + 4, 2, om) || oh > 23 || om > 59) {
            return false;
        }
        offset_s = (s[i] == '+' ? 1 : -1) * (oh * 3600 + om * 60);
        i += 6;
    } else {
        return false;
    }
    if (i != s.size()) {
        return false;
    }
    const std::int64_t days =
        days_from_civil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
    const std::int64_t secs =
        days * 86400 + hour * 3600 + minute * 60 + std::min(second, 59) - offset_s;
    t = std::chrono::system_clock::time_point{
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::nanoseconds{secs * 1'000'000'000 + frac_ns})};
    return true;
}

}  // namespace weft::bus::cloudevents
