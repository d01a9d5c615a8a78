#pragma once

#include <string>

namespace weft::bus {

/// How a backend that crosses a process boundary (NATS, Kafka) puts an envelope on the wire.
/// A subscriber reads all three whatever its own setting (the message's headers say which it
/// is), so publishers can move from one to another while subscribers run.
enum class wire_mode {
    /// CloudEvents 1.0 binary content mode, per the NATS and Kafka protocol bindings: the
    /// attributes in message headers (`ce-` on NATS, values percent-encoded; `ce_` on Kafka,
    /// with `content-type` = datacontenttype), the payload as the message body unchanged.
    /// Any client with headers reads it, with or without a CloudEvents SDK.
    binary,
    /// CloudEvents JSON event format in the body (content-type
    /// `application/cloudevents+json`): the payload as `data` when it is a JSON value and
    /// datacontenttype says JSON, else as `data_base64`.
    structured,
    /// weft's own binary envelope encoding (envelope_codec.hpp) in the body: for systems
    /// where only weft reads the broker.
    weft,
};

/// The wire settings of a backend (nats_backend_options::wire, kafka_backend_options::wire).
struct wire_options {
    wire_mode mode = wire_mode::binary;
    /// The CloudEvents `source` of an envelope without a `source` header: a URI-reference
    /// naming the producing service ("/orders-service", "urn:acme:orders"). The default
    /// names weft, so that every event has the required attribute; set it per service.
    std::string source = "/weft";
};

}  // namespace weft::bus
