// The envelope <-> CloudEvent mapping of the NATS and Kafka backends (src/bus/cloudevents.hpp),
// without a broker: what is refused at publish, what a reader makes of each mode, and which
// defect it names when a message is malformed.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cloudevents.hpp"
#include "weft/bus/envelope_codec.hpp"
#include "weft/bus/errc.hpp"

namespace {

using namespace weft::bus;
namespace ce = weft::bus::cloudevents;

auto sample() -> envelope {
    envelope e;
    e.id = *message_id::parse("0190f5c4-7a3e-7b21-9c4d-5e6f7a8b9c0d");
    e.topic = "orders";
    e.key = "order 42 \xe2\x82\xac";  // space and a euro sign: percent-encoded on NATS
    e.type = "order.placed";
    e.headers = {{"traceparent", "00-abc-01"}, {"tenant", "acme \"x\" 100%"}};
    e.payload = std::string("{\"total\": 12}\0\xff binary", 22);
    e.time =
        std::chrono::system_clock::time_point{std::chrono::nanoseconds{1'700'000'000'123'456'789}};
    return e;
}

/// The headers as a received message has them: copies the views point into.
struct message {
    std::vector<std::pair<std::string, std::string>> owned;
    std::vector<ce::wire_header> headers;
    void add(std::string name, std::string value) {
        owned.emplace_back(std::move(name), std::move(value));
        rebuild();
    }
    void rebuild() {
        headers.clear();
        for (const auto& [n, v] : owned) {
            headers.push_back({n, v});
        }
    }
    void erase(std::string_view name) {
        std::erase_if(owned, [&](const auto& h) { return h.first == name; });
        rebuild();
    }
    void set(std::string_view name, std::string value) {
        for (auto& h : owned) {
            if (h.first == name) {
                h.second = std::move(value);
            }
        }
        rebuild();
    }
};

auto binary_message(const envelope& e, ce::binding b) -> message {
    std::vector<ce::wire_header> hs;
    std::string buffer;
    ce::to_binary(e, "/svc", b, hs, buffer);
    message m;
    for (const auto& h : hs) {
        m.owned.emplace_back(std::string(h.name), std::string(h.value));
    }
    m.rebuild();
    return m;
}

auto value_of(const message& m, std::string_view name) -> std::string {
    for (const auto& [n, v] : m.owned) {
        if (n == name) {
            return v;
        }
    }
    return "<absent>";
}

TEST(cloudevents, header_names_a_cloudevent_cannot_carry_are_refused_not_renamed) {
    for (const char* bad : {"Trace-Id", "trace_id", "weft-dead-letter", "", "UPPER", "a.b",
                            "abcdefghijklmnopqrstu" /* 21 */, "id", "type", "time", "subject",
                            "specversion", "data"}) {
        envelope e = sample();
        e.headers.push_back({bad, "v"});
        std::string why;
        const std::error_code ec = ce::check(e, why);
        EXPECT_EQ(ec, bus_errc::not_expressible) << bad;
        EXPECT_NE(why.find(std::string("'") + bad + "'"), std::string::npos) << why;
        EXPECT_NE(ec.message().find("attribute name"), std::string::npos);
    }
    envelope twice = sample();
    twice.headers.push_back({"tenant", "again"});
    std::string why;
    EXPECT_EQ(ce::check(twice, why), bus_errc::not_expressible);
    EXPECT_NE(why.find("twice"), std::string::npos);
    envelope untyped = sample();
    untyped.type.clear();
    EXPECT_EQ(ce::check(untyped, why), bus_errc::not_expressible);
    envelope not_utf8 = sample();
    not_utf8.headers[0].value = "\xff";
    EXPECT_EQ(ce::check(not_utf8, why), bus_errc::not_expressible);
    // 20 characters (the spec's SHOULD bound), digits, and the attributes a header may set.
    envelope fine = sample();
    fine.headers.push_back({"abcdefghijklmnopqrst", "v"});
    fine.headers.push_back({"b3", "v"});
    fine.headers.push_back({"source", "/elsewhere"});
    fine.headers.push_back({"datacontenttype", "application/json"});
    EXPECT_FALSE(ce::check(fine, why)) << why;
}

TEST(cloudevents, nats_binary_headers_follow_the_binding) {
    const envelope e = sample();
    const message m = binary_message(e, ce::binding::nats);
    EXPECT_EQ(value_of(m, "ce-specversion"), "1.0");
    EXPECT_EQ(value_of(m, "ce-id"), "0190f5c4-7a3e-7b21-9c4d-5e6f7a8b9c0d");
    EXPECT_EQ(value_of(m, "ce-source"), "/svc");
    EXPECT_EQ(value_of(m, "ce-type"), "order.placed");
    EXPECT_EQ(value_of(m, "ce-time"), "2023-11-14T22:13:20.123456789Z");
    EXPECT_EQ(value_of(m, "ce-subject"), "order%2042%20%E2%82%AC");  // the binding's example form
    EXPECT_EQ(value_of(m, "ce-traceparent"), "00-abc-01");
    EXPECT_EQ(value_of(m, "ce-tenant"), "acme%20%22x%22%20100%25");
    EXPECT_EQ(m.owned.size(), 8U);
}

TEST(cloudevents, kafka_binary_headers_follow_the_binding) {
    envelope e = sample();
    e.headers.push_back({"datacontenttype", "application/json"});
    const message m = binary_message(e, ce::binding::kafka);
    EXPECT_EQ(value_of(m, "ce_specversion"), "1.0");
    EXPECT_EQ(value_of(m, "ce_id"), "0190f5c4-7a3e-7b21-9c4d-5e6f7a8b9c0d");
    EXPECT_EQ(value_of(m, "ce_subject"), e.key);  // UTF-8 as it is
    EXPECT_EQ(value_of(m, "ce_tenant"), "acme \"x\" 100%");
    EXPECT_EQ(value_of(m, "content-type"), "application/json");
    EXPECT_EQ(value_of(m, "ce_datacontenttype"), "<absent>");
}

TEST(cloudevents, binary_round_trip_keeps_every_field_and_the_payload_bytes) {
    for (const auto b : {ce::binding::nats, ce::binding::kafka}) {
        envelope e = sample();
        e.headers.push_back({"datacontenttype", "application/octet-stream"});
        const message m = binary_message(e, b);
        std::string why;
        auto back = ce::read(m.headers, e.payload, "orders", "ignored-record-key", b, why);
        ASSERT_TRUE(back) << why;
        EXPECT_EQ(back->id, e.id);
        EXPECT_EQ(back->topic, "orders");
        EXPECT_EQ(back->key, e.key);
        EXPECT_EQ(back->type, e.type);
        EXPECT_EQ(back->time, e.time);
        EXPECT_EQ(back->payload, e.payload);
        ASSERT_NE(back->find_header("source"), nullptr);
        EXPECT_EQ(back->find_header("source")->value, "/svc");
        EXPECT_EQ(back->find_header("tenant")->value, "acme \"x\" 100%");
        EXPECT_EQ(back->find_header("traceparent")->value, "00-abc-01");
        EXPECT_EQ(back->find_header("datacontenttype")->value, "application/octet-stream");
        // Published again, the received envelope sends the same attributes.
        std::string again;
        EXPECT_FALSE(ce::check(*back, again)) << again;
    }
}

TEST(cloudevents, kafka_record_key_is_the_key_when_there_is_no_subject) {
    envelope e = sample();
    e.key.clear();
    message m = binary_message(e, ce::binding::kafka);
    EXPECT_EQ(value_of(m, "ce_subject"), "<absent>");
    std::string why;
    auto back = ce::read(m.headers, e.payload, "orders", "rk", ce::binding::kafka, why);
    ASSERT_TRUE(back) << why;
    EXPECT_EQ(back->key, "rk");
}

TEST(cloudevents, malformed_binary_events_name_the_mode_and_the_defect) {
    struct defect {
        const char* header;
        const char* value;  // nullptr: removed
        const char* named;
    };
    const defect defects[] = {
        {"ce_specversion", nullptr, "no ce_specversion header"},
        {"ce_id", nullptr, "no ce_id header"},
        {"ce_source", nullptr, "no ce_source header"},
        {"ce_type", nullptr, "no ce_type header"},
        {"ce_specversion", "0.3", "specversion '0.3'"},
        {"ce_id", "order-1", "id 'order-1' is not a UUID"},
        {"ce_time", "yesterday", "time 'yesterday' is not an RFC 3339 timestamp"},
        {"ce_time", "2023-02-29T00:00:00Z", "is not an RFC 3339"},
        {"ce_time", "2023-11-14T22:13:20", "is not an RFC 3339"},
        {"ce_tenant", "\xff", "'ce_tenant' is not UTF-8"},
    };
    const envelope e = sample();
    for (const defect& d : defects) {
        message m = binary_message(e, ce::binding::kafka);
        if (d.value == nullptr) {
            m.erase(d.header);
        } else {
            m.set(d.header, d.value);
        }
        std::string why;
        auto r = ce::read(m.headers, e.payload, "orders", "", ce::binding::kafka, why);
        ASSERT_FALSE(r) << d.header;
        EXPECT_EQ(r.error(), bus_errc::malformed_event);
        EXPECT_EQ(why.rfind("CloudEvents binary: ", 0), 0U) << why;
        EXPECT_NE(why.find(d.named), std::string::npos) << why;
    }
    message bad_escape = binary_message(e, ce::binding::nats);
    bad_escape.set("ce-tenant", "%C0%A0");  // overlong: the binding says reject
    std::string why;
    EXPECT_FALSE(ce::read(bad_escape.headers, "", "o", "", ce::binding::nats, why));
    EXPECT_NE(why.find("ce-tenant"), std::string::npos) << why;
}

TEST(cloudevents, nats_reader_takes_any_case_and_quoted_values) {
    message m;
    m.add("CE-SpecVersion", "1.0");
    m.add("Ce-Id", "0190f5c4-7a3e-7b21-9c4d-5e6f7a8b9c0d");
    m.add("ce-source", "\"/a \\\"b\\\"\"");
    m.add("ce-type", "t");
    m.add("ce-time", "2023-11-14T23:13:20.5+01:00");
    m.add("Nats-Msg-Id", "not an attribute");
    std::string why;
    auto r = ce::read(m.headers, "body", "orders", "", ce::binding::nats, why);
    ASSERT_TRUE(r) << why;
    EXPECT_EQ(r->find_header("source")->value, "/a \"b\"");
    EXPECT_EQ(r->time,
              std::chrono::system_clock::time_point{std::chrono::milliseconds{1'700'000'000'500}});
    EXPECT_EQ(r->headers.size(), 1U);  // source only: Nats-Msg-Id is the transport's
    EXPECT_EQ(r->key, "");
}

TEST(cloudevents, structured_round_trip_json_and_binary_payloads) {
    envelope json = sample();
    json.payload = R"({"total": 12, "items": ["a\u00e9", 1.5e3, true, null]})";
    envelope bytes = sample();  // not JSON: data_base64
    for (const envelope& e : {json, bytes}) {
        std::string body;
        ce::to_structured(e, "/svc", body);
        message m;
        m.add("content-type", "application/cloudevents+json; charset=UTF-8");
        std::string why;
        auto back = ce::read(m.headers, body, "orders", "", ce::binding::kafka, why);
        ASSERT_TRUE(back) << why << "\n" << body;
        EXPECT_EQ(back->payload, e.payload);
        EXPECT_EQ(back->id, e.id);
        EXPECT_EQ(back->key, e.key);
        EXPECT_EQ(back->time, e.time);
        EXPECT_EQ(back->find_header("tenant")->value, "acme \"x\" 100%");
    }
    std::string body;
    ce::to_structured(json, "/svc", body);
    EXPECT_NE(body.find(",\"data\":{\"total\": 12"), std::string::npos) << body;
}

TEST(cloudevents, malformed_structured_events_name_the_mode_and_the_defect) {
    message m;
    m.add("content-type", "application/cloudevents+json");
    const std::pair<const char*, const char*> cases[] = {
        {"not json", "not a JSON object"},
        {R"({"id":"0190f5c4-7a3e-7b21-9c4d-5e6f7a8b9c0d","source":"/s","type":"t"})",
         "no specversion attribute"},
        {R"({"specversion":"1.0","source":"/s","type":"t"})", "no id attribute"},
        {R"({"specversion":"1.0","id":"0190f5c4-7a3e-7b21-9c4d-5e6f7a8b9c0d","source":"/s",)"
         R"("type":"t","time":"soon"})",
         "time 'soon'"},
        {R"({"specversion":"1.0","id":"0190f5c4-7a3e-7b21-9c4d-5e6f7a8b9c0d","source":"/s",)"
         R"("type":"t","data":{"a":})",
         "bad or repeated data"},
    };
    for (const auto& [body, named] : cases) {
        std::string why;
        auto r = ce::read(m.headers, body, "orders", "", ce::binding::nats, why);
        ASSERT_FALSE(r) << body;
        EXPECT_EQ(r.error(), bus_errc::malformed_event);
        EXPECT_EQ(why.rfind("CloudEvents structured: ", 0), 0U) << why;
        EXPECT_NE(why.find(named), std::string::npos) << why;
    }
    message avro;
    avro.add("content-type", "application/cloudevents+avro");
    std::string why;
    EXPECT_FALSE(ce::read(avro.headers, "x", "o", "", ce::binding::kafka, why));
    EXPECT_NE(why.find("avro"), std::string::npos) << why;
}

TEST(cloudevents, a_message_without_cloudevents_headers_is_read_as_weft_encoding) {
    // What weft published before (and what an outbox relay or wire_mode::weft sends).
    const envelope e = sample();
    std::string why;
    auto back = ce::read({}, encode(e), "orders", "", ce::binding::nats, why);
    ASSERT_TRUE(back) << why;
    EXPECT_EQ(*back, e);
    auto bad = ce::read({}, "plain text", "orders", "", ce::binding::nats, why);
    ASSERT_FALSE(bad);
    EXPECT_EQ(why.rfind("weft encoding", 0), 0U) << why;
}

TEST(cloudevents, time_text_round_trips_to_the_nanosecond) {
    for (const std::int64_t ns :
         {std::int64_t{0}, std::int64_t{1'700'000'000'123'456'789}, std::int64_t{-1}}) {
        const std::chrono::system_clock::time_point t{
            std::chrono::duration_cast<std::chrono::system_clock::duration>(
                std::chrono::nanoseconds{ns})};
        std::string s;
        ce::write_time(t, s);
        std::chrono::system_clock::time_point back{};
        ASSERT_TRUE(ce::parse_time(s, back)) << s;
        EXPECT_EQ(back, t) << s;
    }
}

}  // namespace
