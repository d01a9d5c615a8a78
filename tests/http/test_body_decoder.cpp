#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "weft/http/body_decoder.hpp"

namespace weft::http::test {
namespace {

struct decoded {
    std::string body;
    std::vector<std::pair<std::string, std::string>> trailers;
    body_status end = body_status::need_more;  // done, error or need_more (input ran out)
    parse_error error = parse_error::none;
    std::string rest;  // bytes after the body, left unconsumed
    auto operator==(const decoded&) const -> bool = default;
};

// Decodes `in` arriving in pieces cut at `cuts`, as a server does (consumed bytes dropped).
auto decode_all(std::string_view in,
                body_framing framing,
                std::vector<std::size_t> cuts = {},
                const request_limits& limits = {}) -> decoded {
    decoded out;
    body_decoder d{framing, limits};
    std::string buf;
    std::size_t from = 0;
    cuts.push_back(in.size());
    for (std::size_t to : cuts) {
        buf.append(in.substr(from, to - from));
        from = to;
        for (;;) {
            const body_step s = d.decode(buf);
            if (s.status == body_status::data) {
                EXPECT_GE(s.data.data(), buf.data());
                out.body.append(s.data);
            } else if (s.status == body_status::trailer) {
                out.trailers.emplace_back(s.data, s.value);
            }
            buf.erase(0, s.consumed);
            if (s.status == body_status::done || s.status == body_status::error) {
                out.end = s.status;
                out.error = d.error();
                out.rest = buf + std::string(in.substr(from));
                return out;
            }
            if (s.status == body_status::need_more) {
                break;
            }
        }
    }
    out.rest = buf;
    return out;
}

constexpr body_framing chunked{body_kind::chunked, 0};

TEST(body_decoder, no_body_is_done_at_once) {
    body_decoder d;
    const body_step s = d.decode("GET / HTTP/1.1\r\n");
    EXPECT_EQ(s.status, body_status::done);
    EXPECT_EQ(s.consumed, 0U);
    EXPECT_TRUE(d.done());
}

TEST(body_decoder, content_length_in_pieces) {
    body_decoder d{{body_kind::content_length, 10}, {}};
    EXPECT_EQ(d.remaining(), 10U);
    body_step s = d.decode("0123");
    EXPECT_EQ(s.status, body_status::data);
    EXPECT_EQ(s.data, "0123");
    EXPECT_EQ(s.consumed, 4U);
    EXPECT_EQ(d.remaining(), 6U);
    EXPECT_EQ(d.decode("").status, body_status::need_more);
    s = d.decode("456789GET /next");
    EXPECT_EQ(s.data, "456789");
    EXPECT_EQ(s.consumed, 6U);  // the next request is not the body's
    EXPECT_EQ(d.remaining(), 0U);
    s = d.decode("GET /next");
    EXPECT_EQ(s.status, body_status::done);
    EXPECT_EQ(s.consumed, 0U);
    EXPECT_EQ(d.received(), 10U);
}

TEST(body_decoder, content_length_over_a_route_limit) {
    request_limits l;
    l.body = 5;
    body_decoder d{{body_kind::content_length, 6}, l};
    EXPECT_EQ(d.decode("123456").status, body_status::error);
    EXPECT_EQ(d.error(), parse_error::body_too_large);
}

TEST(body_decoder, chunked_split_at_every_byte) {
    const std::string in =
        "4\r\nWiki\r\n5;ext\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n000A\r\n0123456789\r\n0\r\n\r\n"
        "GET /next";
    const decoded whole = decode_all(in, chunked);
    EXPECT_EQ(whole.end, body_status::done);
    EXPECT_EQ(whole.body, "Wikipedia in\r\n\r\nchunks.0123456789");
    EXPECT_EQ(whole.rest, "GET /next");
    for (std::size_t cut = 1; cut < in.size(); ++cut) {
        ASSERT_EQ(decode_all(in, chunked, {cut}), whole) << cut;
    }
    std::vector<std::size_t> every;
    for (std::size_t i = 1; i < in.size(); ++i) {
        every.push_back(i);
    }
    EXPECT_EQ(decode_all(in, chunked, every), whole);
}

TEST(body_decoder, chunk_extensions) {
    for (const std::string ext : {";a", ";a=b", ";a=\"b c\"", ";a=\"q\\\"x\"", " ;a",
                                  "\t; a = b ;c", ";a;b;c=d", ";a=\"\"", ";a=b ;c"}) {
        const std::string in = "3" + ext + "\r\nabc\r\n0" + ext + "\r\n\r\n";
        const decoded d = decode_all(in, chunked);
        EXPECT_EQ(d.end, body_status::done) << ext << ": " << describe(d.error);
        EXPECT_EQ(d.body, "abc");
    }
    for (const std::string ext : {";", ";=b", "; a=", ";a=b c", ";a=\"b", ";a\"b\"",
                                  ";a =", ";a=\"\x01\"", ";a, b", " a"}) {
        const std::string in = "3" + ext + "\r\nabc\r\n0\r\n\r\n";
        const decoded d = decode_all(in, chunked);
        EXPECT_EQ(d.end, body_status::error) << ext;
        EXPECT_EQ(status_of(d.error), 400) << ext;
    }
}

TEST(body_decoder, chunk_extensions_limit_is_per_body) {
    request_limits l;
    l.chunk_extensions = 16;
    // 6 bytes per chunk: two chunks fit, the third goes over.
    const std::string in = "1;a=bcd\r\nx\r\n1;a=bcd\r\ny\r\n1;a=bcd\r\nz\r\n0\r\n\r\n";
    const decoded d = decode_all(in, chunked, {}, l);
    EXPECT_EQ(d.error, parse_error::chunk_extensions_too_large);
    EXPECT_EQ(d.body, "xy");
}

TEST(body_decoder, trailers_delivered_whole_at_any_split) {
    const std::string in = "3\r\nabc\r\n0\r\nX-Checksum: abc123 \r\nX-Other:\tv\r\n\r\nNEXT";
    const decoded whole = decode_all(in, chunked);
    EXPECT_EQ(whole.end, body_status::done);
    ASSERT_EQ(whole.trailers.size(), 2U);
    EXPECT_EQ(whole.trailers[0], (std::pair<std::string, std::string>{"X-Checksum", "abc123"}));
    EXPECT_EQ(whole.trailers[1], (std::pair<std::string, std::string>{"X-Other", "v"}));
    EXPECT_EQ(whole.rest, "NEXT");
    for (std::size_t cut = 1; cut < in.size(); ++cut) {
        ASSERT_EQ(decode_all(in, chunked, {cut}), whole) << cut;
    }
}

TEST(body_decoder, trailer_line_kept_unconsumed_until_whole) {
    body_decoder d{chunked, {}};
    body_step s = d.decode("0\r\nX-A: 1");
    EXPECT_EQ(s.status, body_status::need_more);
    EXPECT_EQ(s.consumed, 3U);  // the size line; the partial trailer stays
    s = d.decode("X-A: 12\r\n\r\n");
    ASSERT_EQ(s.status, body_status::trailer);
    EXPECT_EQ(s.data, "X-A");
    EXPECT_EQ(s.value, "12");
    EXPECT_EQ(s.consumed, 9U);
    s = d.decode("\r\n");
    EXPECT_EQ(s.status, body_status::done);
    EXPECT_EQ(s.consumed, 2U);
}

TEST(body_decoder, a_trailer_line_given_shorter_is_an_error_not_a_read) {
    body_decoder d{chunked, {}};
    ASSERT_EQ(d.decode("0\r\nX-Long-Trailer: 1").status, body_status::need_more);
    const body_step s = d.decode("X-");  // fewer bytes than were examined of the line
    EXPECT_EQ(s.status, body_status::error);
    EXPECT_EQ(d.error(), parse_error::input_shrank);
}

TEST(body_decoder, sizes_against_the_limit) {
    request_limits l;
    l.body = 16;
    EXPECT_EQ(decode_all("10\r\n0123456789abcdef\r\n0\r\n\r\n", chunked, {}, l).end,
              body_status::done);
    const decoded over =
        decode_all("10\r\n0123456789abcdef\r\n1\r\nx\r\n0\r\n\r\n", chunked, {}, l);
    EXPECT_EQ(over.error, parse_error::body_too_large);
    EXPECT_EQ(over.body, "0123456789abcdef") << "rejected before the chunk's data";
    // 2^64 - 1 is a size (then over the limit); 2^64 overflows.
    EXPECT_EQ(decode_all("FFFFFFFFFFFFFFFF\r\n", chunked).error, parse_error::body_too_large);
    EXPECT_EQ(decode_all("10000000000000000\r\n", chunked).error, parse_error::chunk_size_overflow);
    EXPECT_EQ(decode_all("0000000000000000000000001\r\nx\r\n0\r\n\r\n", chunked).end,
              body_status::done);
}

TEST(body_decoder, remaining_tracks_the_current_chunk) {
    body_decoder d{chunked, {}};
    body_step s = d.decode("a\r\n0123");
    EXPECT_EQ(s.status, body_status::data);
    EXPECT_EQ(s.data, "0123");
    EXPECT_EQ(d.remaining(), 6U);
    EXPECT_EQ(d.received(), 4U);
}

TEST(body_decoder, errors_are_sticky) {
    body_decoder d{chunked, {}};
    EXPECT_EQ(d.decode("x\r\n").status, body_status::error);
    EXPECT_EQ(d.decode("0\r\n\r\n").status, body_status::error);
    EXPECT_EQ(d.error(), parse_error::bad_chunk_size);
}

}  // namespace
}  // namespace weft::http::test
