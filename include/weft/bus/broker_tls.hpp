#pragma once

#include <string>

namespace weft::bus {

/// TLS to a broker, spoken by the broker's client library itself (cnats, librdkafka, each on
/// OpenSSL): files in PEM. The broker's chain and name are verified against `ca_file`.
///
///     o.tls = {.enabled = true, .ca_file = "ca.pem",
///              .cert_file = "client.pem", .key_file = "client.key"};
struct broker_tls {
    bool enabled = false;
    /// The roots the broker's certificate must chain to; empty: the system trust store.
    std::string ca_file{};
    /// A client certificate (chain, leaf first) and its unencrypted key, for brokers that ask
    /// for one (mutual TLS); both or neither.
    std::string cert_file{};
    std::string key_file{};
};

}  // namespace weft::bus
