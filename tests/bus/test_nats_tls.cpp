// The NATS JetStream backend over TLS: the conformance suite once more, against a nats-server
// that speaks TLS only and requires a client certificate (CTest's fixture: scripts/brokers.sh
// start nats-tls on a private port, WEFT_NATS_TLS_URL), and the refusals on either side.

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "broker_tls_files.hpp"
#include "conformance.hpp"
#include "weft/bus/nats_backend.hpp"
#include "weft/io/reactor.hpp"

namespace {

using namespace weft::bus;
using namespace std::chrono_literals;
using weft::bus::test::bus_conformance;

auto nats_tls_url() -> std::string {
    const char* u = std::getenv("WEFT_NATS_TLS_URL");
    return u != nullptr ? u : "tls://127.0.0.1:14232";
}

auto tls_options(broker_tls tls) -> nats_backend_options {
    nats_backend_options o;
    o.url = nats_tls_url();
    o.tls = std::move(tls);
    o.connect_timeout = 2s;
    o.streams = {nats_stream_config{
        .name = "WEFT_TEST", .subjects = {"weft.test.>"}, .storage = nats_storage::memory}};
    return o;
}

INSTANTIATE_TEST_SUITE_P(
    nats_tls,
    bus_conformance,
    ::testing::Values(test::backend_factory{
        .make = []() -> std::unique_ptr<backend> {
            return std::make_unique<nats_backend>(tls_options(test::broker_tls_files()));
        },
        .pause = {},
        .resume = {},
        .runtime_for = [](unsigned workers) { return weft::io_runtime_options(workers); },
        .topic_prefix = "weft.test."}),
    [](const auto&) { return std::string("jetstream_tls"); });

// The server requires a client certificate: a client with none is not let in.
TEST(nats_tls, server_refuses_a_client_without_a_certificate) {
    EXPECT_THROW(nats_backend{tls_options(test::broker_tls_files(false))}, std::system_error);
}

// The client verifies the server's chain: a server its CA did not issue is not connected to.
TEST(nats_tls, client_refuses_a_server_it_does_not_trust) {
    auto tls = test::broker_tls_files();
    tls.ca_file = test::unrelated_ca_file();
    try {
        nats_backend b{tls_options(tls)};
        FAIL() << "connected to a server it does not trust";
    } catch (const std::system_error& e) {
        EXPECT_NE(std::string(e.what()).find(nats_tls_url()), std::string::npos) << e.what();
    }
}

// The control for both: the same options with the right CA and certificate connect.
TEST(nats_tls, connects_with_the_ca_and_a_client_certificate) {
    EXPECT_NO_THROW(nats_backend{tls_options(test::broker_tls_files())});
}

}  // namespace
