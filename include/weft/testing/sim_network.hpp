#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "weft/core/result.hpp"
#include "weft/core/task.hpp"
#include "weft/io/byte_listener.hpp"
#include "weft/io/byte_stream.hpp"
#include "weft/io/socket_address.hpp"

namespace weft::testing {

struct sim_network_options {
    /// One-way delay of every write (and of a half-close), on the runtime's clock: bytes
    /// written at t are readable at t + latency, in the order written.
    std::chrono::milliseconds latency{0};
    /// Every receive (and read_some) takes one byte: a peer sees a message cut at every
    /// possible place.
    bool byte_by_byte = false;
};

namespace detail {
struct sim_net_state;
}

/// An in-memory network of named hosts for tests: listeners and connected byte_streams
/// (weft::http::server::serve and weft::http::client run on them as on TCP), with a one-way
/// latency on the runtime's clock, partitions between hosts (bytes across a partition wait in
/// flight until it heals, as TCP retransmits them), connection resets, half-close and a
/// byte-by-byte delivery mode. Nothing touches the kernel: on a seeded runtime
/// (weft::testing::seeded_runtime) a run is a function of its seed, and trace() is the same
/// list of events for the same seed.
///
/// Flow control is not modelled: a write never waits for the reader (wait_writable() is always
/// ready), so a server's send timeout never fires on it. Connecting across a partition fails at
/// once with `network_unreachable` (TCP's SYN retries are not modelled); a connection already
/// open across it stalls instead.
///
/// Use it from the tasks of one runtime (its operations read that runtime's clock). Streams and
/// listeners share the network's state: either may outlive the sim_network object.
///
///     weft::testing::sim_network net{{.latency = 5ms}};
///     auto l = net.listen("server", 80);
///     co_await with_scope([&](weft::scope& s) -> weft::task<void> { s.spawn(srv.serve(*l)); ...
///     weft::http::client c{(co_await net.connect("client", "server", 80)).value()};
class sim_network {
public:
    explicit sim_network(sim_network_options o = {});
    sim_network(const sim_network&) = delete;
    auto operator=(const sim_network&) -> sim_network& = delete;
    ~sim_network();

    /// A listener on host:port. Throws std::system_error (address_in_use) if one is there.
    [[nodiscard]] auto listen(std::string_view host, std::uint16_t port)
        -> std::unique_ptr<byte_listener>;
    /// A connection from host `from` to the listener on host:port: connection_refused when
    /// none listens, network_unreachable across a partition. Completes after one round trip
    /// (2 x latency); the listener's accept() sees the other end at once.
    [[nodiscard]] auto connect(std::string_view from, std::string_view host, std::uint16_t port)
        -> task<result<std::unique_ptr<byte_stream>>>;

    /// From now on, bytes between hosts `a` and `b` (both ways) stay in flight.
    void partition(std::string_view a, std::string_view b);
    /// Ends the partition between `a` and `b`: what waited in flight arrives (in order).
    void heal(std::string_view a, std::string_view b);
    /// Resets every open connection between `a` and `b`: both ends' pending and later reads
    /// and writes fail with connection_reset; bytes in flight are lost.
    void reset(std::string_view a, std::string_view b);
    void set_latency(std::chrono::milliseconds d);
    void set_byte_by_byte(bool on);

    /// The address a host's streams report (peer_address): 10.0.x.y, in order of first use.
    [[nodiscard]] auto address_of(std::string_view host) -> socket_address;
    /// What happened, one line per event in the order it happened, with the time since the
    /// network's first event: "12ms #3 client>server send 5", "... recv 1", "... fin",
    /// "... eof", "... reset", "partition a|b", and so on.
    [[nodiscard]] auto trace() const -> std::vector<std::string>;

private:
    std::shared_ptr<detail::sim_net_state> st_;
};

}  // namespace weft::testing
