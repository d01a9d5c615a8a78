#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "weft/trace/otlp_json.hpp"
#include "weft/trace/tracer.hpp"

namespace {

using weft::trace::span_kind;

TEST(tracer, a_child_keeps_the_trace_and_names_its_parent) {
    weft::trace::tracer tr;
    const auto parent =
        *weft::trace::parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    auto s = tr.start("GET /items/{id}", span_kind::server, parent);
    ASSERT_TRUE(s.recording());
    EXPECT_EQ(s.context().trace, parent.trace);
    EXPECT_NE(s.context().span, parent.span);
    s.set_attribute("http.response.status_code", std::int64_t{200});
    s.end();
    s.end();  // once only
    std::vector<weft::trace::span_data> out;
    ASSERT_EQ(tr.take(out, 10), 1U);
    EXPECT_EQ(out[0].parent, parent.span);
    EXPECT_EQ(out[0].trace, parent.trace);
    EXPECT_EQ(out[0].name, "GET /items/{id}");
    EXPECT_EQ(out[0].kind, span_kind::server);
    EXPECT_LE(out[0].start_ns, out[0].end_ns);
    ASSERT_EQ(out[0].attributes.size(), 1U);
    EXPECT_EQ(tr.finished(), 1U);
}

TEST(tracer, without_a_parent_a_span_starts_a_trace) {
    weft::trace::tracer tr;
    auto s = tr.start("job", span_kind::internal);
    EXPECT_TRUE(s.context().valid());
    EXPECT_TRUE(s.context().sampled());
    s.end();
    std::vector<weft::trace::span_data> out;
    ASSERT_EQ(tr.take(out, 10), 1U);
    EXPECT_FALSE(out[0].parent.valid());
}

TEST(tracer, an_inert_span_records_nothing_and_passes_its_context_on) {
    weft::trace::span s;
    EXPECT_FALSE(s.recording());
    s.set_attribute("k", "v");
    s.end();
    EXPECT_FALSE(s.context().valid());
}

TEST(tracer, a_full_queue_drops_and_counts) {
    weft::trace::tracer tr{{.queue_spans = 2}};
    for (int i = 0; i < 5; ++i) {
        auto s = tr.start("s", span_kind::internal);
    }  // each ends in its destructor
    EXPECT_EQ(tr.finished(), 5U);
    EXPECT_EQ(tr.dropped(), 3U);
    EXPECT_EQ(tr.queued(), 2U);
    std::vector<weft::trace::span_data> out;
    EXPECT_EQ(tr.take(out, 1), 1U);
    EXPECT_EQ(tr.queued(), 1U);
}

TEST(tracer, a_moved_span_ends_once) {
    weft::trace::tracer tr;
    auto a = tr.start("a", span_kind::internal);
    weft::trace::span b = std::move(a);
    a.end();
    EXPECT_EQ(tr.finished(), 0U);
    b.end();
    EXPECT_EQ(tr.finished(), 1U);
}

TEST(otlp_json, ids_are_hex_and_64_bit_numbers_strings) {
    const auto ctx =
        *weft::trace::parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    weft::trace::span_data d;
    d.trace = ctx.trace;
    d.id = ctx.span;
    d.name = "say \"hi\"\n";
    d.kind = span_kind::server;
    d.start_ns = 1700000000000000000ULL;
    d.end_ns = 1700000000000000001ULL;
    d.attributes = {{"http.route", std::string("/a")},
                    {"http.response.status_code", std::int64_t{404}},
                    {"ok", true},
                    {"ratio", 0.5}};
    d.status = weft::trace::status_code::error;
    const std::string j = weft::trace::otlp_json({&d, 1}, "svc");
    EXPECT_EQ(
        j,
        R"({"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}}]},)"
        R"("scopeSpans":[{"scope":{"name":"weft"},"spans":[{"traceId":"4bf92f3577b34da6a3ce929d0e0e4736",)"
        R"("spanId":"00f067aa0ba902b7","name":"say \"hi\"\n","kind":2,)"
        R"("startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"1700000000000000001",)"
        R"("attributes":[{"key":"http.route","value":{"stringValue":"/a"}},)"
        R"({"key":"http.response.status_code","value":{"intValue":"404"}},)"
        R"({"key":"ok","value":{"boolValue":true}},{"key":"ratio","value":{"doubleValue":0.5}}],)"
        R"("status":{"code":2}}]}]}]})");
}

// A span whose strings are not UTF-8 (a request path sent with raw bytes) still exports as
// valid JSON: a collector refuses a whole batch for one malformed string. Such a string's bytes
// above 0x7F are written as \u00XX; well-formed UTF-8 passes as it is.
TEST(otlp_json, strings_that_are_not_utf8_are_escaped_byte_by_byte) {
    weft::trace::span_data d;
    d.name = "caf\xc3\xa9";
    d.kind = span_kind::server;
    d.attributes = {{"url.path", std::string("/\xff\xfe\xc3")}};
    const std::string j = weft::trace::otlp_json({&d, 1}, "svc");
    EXPECT_NE(j.find("\"name\":\"caf\xc3\xa9\""), std::string::npos) << j;
    EXPECT_NE(j.find("{\"stringValue\":\"/\\u00ff\\u00fe\\u00c3\"}"), std::string::npos) << j;
}

}  // namespace
