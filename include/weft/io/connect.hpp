#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "weft/core/result.hpp"
#include "weft/core/task.hpp"
#include "weft/io/resolve.hpp"
#include "weft/io/tcp_stream.hpp"

namespace weft {

/// How connect(host, port) tries the addresses of a host.
struct connect_options {
    /// How the host is resolved.
    resolve_options resolve{};
    /// One connection attempt to one address: then it counts as failed (`timed_out`).
    std::chrono::milliseconds attempt_timeout{10000};
    /// Where the host has both IPv6 and IPv4 addresses, the next attempt starts this long after
    /// the previous one began, or as soon as it fails, while the earlier ones go on (RFC 8305's
    /// Connection Attempt Delay; 250 ms is its recommended value).
    std::chrono::milliseconds attempt_delay{250};
};

/// Resolves `host` (weft::resolve) and connects to its addresses, IPv6 first and the families
/// interleaved (RFC 8305 §4). With one family the addresses are tried in turn, each for at most
/// `attempt_timeout`; with both, attempts are staggered by `attempt_delay` and the first
/// connection made wins, the others cancelled and closed. A numeric host is connected to as is.
///
/// Errors: the resolve error (resolve_category()) when there is no address; the last attempt's
/// error (refused, unreachable, `timed_out`) when every attempt failed; `operation_canceled`
/// when the task's stop is requested, every attempt in flight then cancelled. May be called
/// from any task on a weft runtime.
///
/// The task owns copies of its arguments.
///
///     auto s = co_await weft::connect("example.com", 80);   // result<tcp_stream>
[[nodiscard]] auto connect(std::string host, std::uint16_t port, connect_options options)
    -> task<result<tcp_stream>>;

/// connect with the default options (an overload: see resolve).
[[nodiscard]] inline auto connect(std::string host, std::uint16_t port)
    -> task<result<tcp_stream>> {
    return connect(std::move(host), port, connect_options{});
}

/// connect's attempts over addresses already resolved, in the order given (the interleaving and
/// staggering as above).
[[nodiscard]] auto connect(std::vector<socket_address> addresses, connect_options options)
    -> task<result<tcp_stream>>;

}  // namespace weft
