// The schema header (envelope_schema.hpp): CloudEvents' dataschema, as it travels in the
// binary mode of each binding and back.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cloudevents.hpp"
#include "weft/bus/envelope_schema.hpp"

namespace {

using namespace weft::bus;

TEST(envelope_schema, set_replaces_and_schema_of_reads) {
    envelope e;
    EXPECT_EQ(schema_of(e), "");
    set_schema(e, "urn:acme:order.placed:1");
    set_schema(e, "urn:acme:order.placed:2");
    ASSERT_EQ(e.headers.size(), 1U);
    EXPECT_EQ(schema_of(e), "urn:acme:order.placed:2");
}

TEST(envelope_schema, is_the_cloudevents_dataschema_attribute_in_both_bindings) {
    envelope e;
    e.id = message_id::generate();
    e.topic = "orders";
    e.type = "order.placed";
    e.payload = "{}";
    set_schema(e, "urn:acme:order.placed:2");
    std::string why;
    ASSERT_FALSE(cloudevents::check(e, why)) << why;
    for (const auto b : {cloudevents::binding::nats, cloudevents::binding::kafka}) {
        std::vector<cloudevents::wire_header> headers;
        std::string buffer;
        cloudevents::to_binary(e, "weft-test", b, headers, buffer);
        const std::string name =
            b == cloudevents::binding::nats ? "ce-dataschema" : "ce_dataschema";
        bool seen = false;
        for (const auto& h : headers) {
            seen = seen || h.name == name;
        }
        EXPECT_TRUE(seen) << name;
        auto back = cloudevents::read(headers, e.payload, "orders", "", b, why);
        ASSERT_TRUE(back) << why;
        EXPECT_EQ(schema_of(*back), "urn:acme:order.placed:2");
    }
}

}  // namespace
