#include <gtest/gtest.h>

#include <set>
#include <string>

#include "weft/trace/context.hpp"

namespace {

using weft::trace::extract;
using weft::trace::parse_traceparent;
using weft::trace::valid_tracestate;

constexpr const char* good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST(trace_context, parses_the_spec_example) {
    const auto c = parse_traceparent(good);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->trace.hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
    EXPECT_EQ(c->span.hex(), "00f067aa0ba902b7");
    EXPECT_TRUE(c->sampled());
    EXPECT_EQ(weft::trace::traceparent(*c), good);
}

TEST(trace_context, refuses_every_malformed_version_00) {
    const std::string g = good;
    std::vector<std::string> bad = {
        "",
        "00",
        g.substr(0, 54),                                            // one short
        g + "-",                                                    // version 00 is exactly 55
        g + "0",                                                    // trailing byte
        " " + g,                                                    // leading blank
        g + " ",                                                    // trailing blank
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  // upper-case trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01",  // upper-case parent id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0A",  // upper-case flags
        "0A-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // upper-case version
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  // all-zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  // all-zero parent id
        "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // separators
        "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01",
        "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",  // field widths shifted
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-701",
        "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",  // not hex
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bz-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x",
        "0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // version ff is invalid
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",   // short flags
        "00-+bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        std::string(g).replace(10, 1, "\0", 1),  // NUL inside
    };
    for (const auto& b : bad) {
        EXPECT_FALSE(parse_traceparent(b)) << b;
    }
}

TEST(trace_context, higher_versions_follow_the_forward_compatibility_rule) {
    // A future version: the first 55 characters in the 00 layout, then the end or `-`.
    const auto v = parse_traceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    ASSERT_TRUE(v);
    EXPECT_EQ(weft::trace::traceparent(*v), good);  // propagated as version 00
    EXPECT_TRUE(parse_traceparent(
        "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds"));
    EXPECT_FALSE(parse_traceparent(
        "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01.what-the-future-holds"));
    EXPECT_FALSE(parse_traceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0"));
    EXPECT_FALSE(parse_traceparent("cc-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"));
    EXPECT_FALSE(parse_traceparent("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x"));
}

TEST(trace_context, keeps_only_the_sampled_flag) {
    const auto c = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff");
    ASSERT_TRUE(c);
    EXPECT_EQ(c->flags, 1);
    const auto u = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-fe");
    ASSERT_TRUE(u);
    EXPECT_FALSE(u->sampled());
    EXPECT_EQ(weft::trace::traceparent(*u).substr(53), "00");
}

TEST(trace_context, tracestate_grammar) {
    EXPECT_TRUE(valid_tracestate(""));
    EXPECT_TRUE(valid_tracestate("rojo=00f067aa0ba902b7"));
    EXPECT_TRUE(valid_tracestate("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"));
    EXPECT_TRUE(valid_tracestate("rojo=1 ,\t congo=2"));
    EXPECT_TRUE(valid_tracestate("rojo=1,,congo=2"));  // empty members are allowed
    EXPECT_TRUE(valid_tracestate("fw529a3039@dt=ok,a_-*/9=v"));
    EXPECT_TRUE(valid_tracestate("0tenant@sys=v"));
    EXPECT_TRUE(valid_tracestate("k=a b"));  // an inner space is a chr

    EXPECT_FALSE(valid_tracestate("Rojo=1"));         // upper-case key
    EXPECT_FALSE(valid_tracestate("1rojo=1"));        // a simple key starts with a letter
    EXPECT_FALSE(valid_tracestate("rojo"));           // no '='
    EXPECT_FALSE(valid_tracestate("rojo="));          // empty value
    EXPECT_FALSE(valid_tracestate("=1"));             // empty key
    EXPECT_FALSE(valid_tracestate("rojo=a,b"));       // ',' ends a member: "b" has no '='
    EXPECT_FALSE(valid_tracestate("rojo=a=b"));       // '=' in the value
    EXPECT_FALSE(valid_tracestate("rojo=1,rojo=2"));  // a key twice
    EXPECT_FALSE(valid_tracestate("rojo=\x01"));
    EXPECT_FALSE(valid_tracestate("rojo=caf\xc3\xa9"));  // not ASCII
    EXPECT_FALSE(valid_tracestate("a@b@c=1"));
    EXPECT_FALSE(valid_tracestate("t@1sys=1"));             // a system id starts with a letter
    EXPECT_FALSE(valid_tracestate("t@systemidtoolong=1"));  // 15 > 14
    EXPECT_FALSE(valid_tracestate("@sys=1"));
    EXPECT_FALSE(valid_tracestate("t@=1"));
    EXPECT_FALSE(valid_tracestate("r=" + std::string(257, 'v')));
    EXPECT_TRUE(valid_tracestate("r=" + std::string(256, 'v')));
    EXPECT_FALSE(valid_tracestate("r" + std::string(256, 'k') + "=v"));
    EXPECT_TRUE(valid_tracestate("r" + std::string(255, 'k') + "=v"));
}

TEST(trace_context, tracestate_holds_32_members_at_most) {
    std::string s;
    for (int i = 0; i < 32; ++i) {
        s += (i != 0 ? "," : "") + std::string("k") + std::to_string(i) + "=v";
    }
    EXPECT_TRUE(valid_tracestate(s));
    EXPECT_TRUE(valid_tracestate(s + ", ,"));  // empty members do not count
    EXPECT_FALSE(valid_tracestate(s + ",k32=v"));
}

TEST(trace_context, extract_keeps_tracestate_verbatim_only_when_valid) {
    const auto c = extract(good, std::string_view(" rojo=1 ,congo=2\t"));
    ASSERT_TRUE(c.valid());
    EXPECT_EQ(c.state, "rojo=1 ,congo=2");
    EXPECT_TRUE(extract(good, std::string_view("Bad=1")).state.empty());
    EXPECT_TRUE(extract(good, std::string_view("Bad=1")).valid());
    // An invalid traceparent: no context at all, tracestate ignored.
    const auto none = extract(std::string_view("00-zz"), std::string_view("rojo=1"));
    EXPECT_FALSE(none.valid());
    EXPECT_TRUE(none.state.empty());
    EXPECT_FALSE(extract(std::nullopt, std::string_view("rojo=1")).valid());
}

TEST(trace_context, random_ids_are_valid_and_distinct) {
    std::set<std::string> seen;
    for (int i = 0; i < 1000; ++i) {
        const auto t = weft::trace::random_trace_id();
        const auto s = weft::trace::random_span_id();
        ASSERT_TRUE(t.valid());
        ASSERT_TRUE(s.valid());
        seen.insert(t.hex());
        seen.insert(s.hex());
    }
    EXPECT_EQ(seen.size(), 2000U);
}

}  // namespace
