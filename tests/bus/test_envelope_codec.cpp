#include <gtest/gtest.h>

#include <string>

#include "weft/bus/envelope_codec.hpp"
#include "weft/bus/errc.hpp"

namespace {

using namespace weft::bus;

auto sample() -> envelope {
    envelope e;
    e.id = message_id::generate();
    e.topic = "orders";
    e.key = "order-42";
    e.type = "order.placed";
    e.headers = {{"trace", "abc"}, {"trace", "def"}, {"", ""}};
    e.payload = std::string("{\"total\": 12}\0\xff binary", 22);
    e.time =
        std::chrono::system_clock::time_point{std::chrono::nanoseconds{1'700'000'000'123'456'789}};
    return e;
}

TEST(envelope_codec, round_trip) {
    const envelope e = sample();
    const std::string bytes = encode(e);
    EXPECT_EQ(static_cast<std::uint8_t>(bytes[0]), envelope_codec_version);
    auto back = decode(bytes);
    ASSERT_TRUE(back) << back.error().message();
    EXPECT_EQ(*back, e);
}

TEST(envelope_codec, round_trip_empty_and_large) {
    envelope empty;
    auto back = decode(encode(empty));
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, empty);

    envelope big = sample();
    big.payload.assign(300'000, 'x');  // a 3-byte varint length
    big.headers.assign(200, header{"h", std::string(130, 'v')});
    back = decode(encode(big));
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, big);
}

TEST(envelope_codec, every_truncation_is_an_error) {
    const std::string bytes = encode(sample());
    for (std::size_t n = 0; n < bytes.size(); ++n) {
        auto r = decode(std::string_view(bytes).substr(0, n));
        ASSERT_FALSE(r) << n;
        EXPECT_EQ(r.error(), bus_errc::malformed_envelope) << n;
    }
}

TEST(envelope_codec, trailing_bytes_are_an_error) {
    std::string bytes = encode(sample());
    bytes.push_back('\0');
    EXPECT_EQ(decode(bytes).error(), bus_errc::malformed_envelope);
}

TEST(envelope_codec, unknown_version) {
    std::string bytes = encode(sample());
    bytes[0] = 2;
    EXPECT_EQ(decode(bytes).error(), bus_errc::unsupported_version);
}

TEST(envelope_codec, lengths_past_the_end_and_oversized_varints) {
    std::string head(1, static_cast<char>(envelope_codec_version));
    head.append(24, '\0');  // id and time
    // A topic length of 2^63: rejected without reading or reserving.
    std::string bytes = head + std::string("\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", 10);
    EXPECT_EQ(decode(bytes).error(), bus_errc::malformed_envelope);
    // An 11-byte varint and a 10th byte beyond 64 bits.
    bytes = head + std::string(10, '\x80') + '\x01';
    EXPECT_EQ(decode(bytes).error(), bus_errc::malformed_envelope);
    bytes = head + std::string(9, '\xff') + '\x02';
    EXPECT_EQ(decode(bytes).error(), bus_errc::malformed_envelope);
    // An overlong length (0 written in two bytes): one encoding per envelope.
    bytes = head + std::string("\x80\x00", 2) + std::string(4, '\0');
    EXPECT_EQ(decode(bytes).error(), bus_errc::malformed_envelope);
    bytes = head + std::string(5, '\0');  // the same, minimal
    EXPECT_TRUE(decode(bytes));
    // A header count larger than the input could hold.
    bytes = head + std::string("\0\0\0\xff\xff\x03", 6);
    EXPECT_EQ(decode(bytes).error(), bus_errc::malformed_envelope);
}

TEST(envelope_codec, decode_routing_agrees_with_decode) {
    envelope big = sample();
    big.headers.assign(3, header{"h", std::string(130, 'v')});
    for (const envelope& e : {sample(), envelope{}, big}) {
        const std::string bytes = encode(e);
        auto r = decode_routing(bytes);
        ASSERT_TRUE(r) << r.error().message();
        EXPECT_EQ(r->id, e.id);
        EXPECT_EQ(r->topic, e.topic);
        EXPECT_EQ(r->key, e.key);
        EXPECT_EQ(r->bytes.data(), bytes.data());  // views, not copies
        EXPECT_EQ(r->bytes.size(), bytes.size());
        // Every truncation, a trailing byte and another version fail as decode fails.
        for (std::size_t n = 0; n < bytes.size(); ++n) {
            const std::string_view cut = std::string_view(bytes).substr(0, n);
            auto a = decode_routing(cut);
            ASSERT_FALSE(a) << n;
            ASSERT_EQ(a.error(), decode(cut).error()) << n;
        }
        EXPECT_EQ(decode_routing(bytes + '\0').error(), bus_errc::malformed_envelope);
        std::string other = bytes;
        other[0] = 2;
        EXPECT_EQ(decode_routing(other).error(), bus_errc::unsupported_version);
    }
    std::string head(1, static_cast<char>(envelope_codec_version));
    head.append(24, '\0');
    EXPECT_EQ(decode_routing(head + std::string("\0\0\0\xff\xff\x03", 6)).error(),
              bus_errc::malformed_envelope);  // a header count beyond the input
    EXPECT_EQ(decode_routing(head + std::string("\x80\x00", 2) + std::string(4, '\0')).error(),
              bus_errc::malformed_envelope);  // an overlong length
    EXPECT_TRUE(decode_routing(head + std::string(5, '\0')));
}

TEST(envelope_codec, json_form) {
    envelope e = sample();
    e.payload = "line\n\"quoted\" \x01";
    e.headers = {{"k", "v"}};
    const std::string j = to_json(e);
    EXPECT_EQ(j, "{\"id\":\"" + e.id.to_string() +
                     "\",\"topic\":\"orders\",\"key\":\"order-42\",\"type\":\"order.placed\","
                     "\"time\":\"2023-11-14T22:13:20.123456789Z\",\"headers\":[[\"k\",\"v\"]],"
                     "\"payload\":\"line\\n\\\"quoted\\\" \\u0001\"}");
    e.payload = std::string("\xff\x00\x01", 3);
    EXPECT_NE(to_json(e).find("\"payload_base64\":\"/wAB\""), std::string::npos);
    e.key = "caf\xe9";  // Latin-1, not UTF-8: escaped, so the JSON stays valid
    EXPECT_NE(to_json(e).find("\"key\":\"caf\\u00e9\""), std::string::npos);
}

}  // namespace
