// The Kafka backend over TLS: the conformance suite once more, against the fixture's broker on
// its SSL listener, which requires a client certificate (scripts/brokers.sh: the port after the
// controller's, WEFT_KAFKA_TLS_BROKERS), and the client's refusal of a broker it does not trust.
// No broker-outage cases here (they report skipped): test_bus_kafka runs them in plain text.

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "broker_tls_files.hpp"
#include "conformance.hpp"
#include "weft/bus/kafka_backend.hpp"
#include "weft/io/reactor.hpp"

namespace {

using namespace weft::bus;
using namespace std::chrono_literals;
using weft::bus::test::bus_conformance;

auto kafka_tls_options(broker_tls tls) -> kafka_backend_options {
    const char* b = std::getenv("WEFT_KAFKA_TLS_BROKERS");
    kafka_backend_options o;
    o.brokers = b != nullptr ? b : "127.0.0.1:19094";
    o.linger = 1ms;
    o.tls = std::move(tls);
    return o;
}

INSTANTIATE_TEST_SUITE_P(
    kafka_tls,
    bus_conformance,
    ::testing::Values(test::backend_factory{
        .make = []() -> std::unique_ptr<backend> {
            return std::make_unique<kafka_backend>(kafka_tls_options(test::broker_tls_files()));
        },
        .pause = {},
        .resume = {},
        .runtime_for = [](unsigned workers) { return weft::io_runtime_options(workers); },
        .topic_prefix = "weft-test-"}),
    [](const auto&) { return std::string("librdkafka_ssl"); });

// The client verifies the broker's chain: with a CA that did not issue it, start fails.
TEST(kafka_tls, client_refuses_a_broker_it_does_not_trust) {
    auto tls = test::broker_tls_files();
    tls.ca_file = test::unrelated_ca_file();
    auto o = kafka_tls_options(tls);
    o.admin_timeout = 3s;
    EXPECT_THROW(kafka_backend{o}, std::system_error);
}

}  // namespace
