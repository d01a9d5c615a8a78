#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "weft/core/task.hpp"
#include "weft/io/socket_address.hpp"

namespace weft {

/// Why a name did not resolve (resolve_category()).
enum class resolve_errc {
    not_found = 1,   ///< the name does not exist (NXDOMAIN)
    no_address,      ///< the name exists but has no address of the family asked for
    timed_out,       ///< no server answered within resolve_options::timeout
    server_failure,  ///< the server answered SERVFAIL or REFUSED, or sent a malformed answer
    bad_name,        ///< the name is empty or malformed
    bad_servers,     ///< resolve_options::servers does not parse
};

[[nodiscard]] auto resolve_category() noexcept -> const std::error_category&;

[[nodiscard]] inline auto make_error_code(resolve_errc e) noexcept -> std::error_code {
    return {static_cast<int>(e), resolve_category()};
}

/// How resolve() asks. The defaults read the system's configuration (/etc/resolv.conf,
/// /etc/hosts).
struct resolve_options {
    /// Servers to ask instead of the system's, "ip:port,ip:port" ("127.0.0.1:5353",
    /// "[::1]:53"); empty: the system's.
    std::string servers{};
    /// The whole resolution, every server and retry included: then `timed_out`.
    std::chrono::milliseconds timeout{5000};
    /// One query to one server before it is retried (to the next server, if any).
    std::chrono::milliseconds attempt_timeout{1000};
    /// AF_INET, AF_INET6 or AF_UNSPEC (both).
    int family = AF_UNSPEC;
    /// Answers are kept for their DNS TTL, at most `max_ttl`; 0 s keeps nothing.
    std::chrono::seconds max_ttl{300};
};

/// The addresses of a host, or why there are none; the error names the host. value() throws
/// std::system_error whose what() names the host and the reason.
class [[nodiscard]] resolve_result {
public:
    resolve_result(std::string host, std::vector<socket_address> addresses)
        : host_(std::move(host)), addresses_(std::move(addresses)) {}
    resolve_result(std::string host, std::error_code ec) : host_(std::move(host)), error_(ec) {}

    [[nodiscard]] auto has_value() const noexcept -> bool { return !error_; }
    explicit operator bool() const noexcept { return has_value(); }
    [[nodiscard]] auto error() const noexcept -> std::error_code { return error_; }
    /// The name asked for.
    [[nodiscard]] auto host() const noexcept -> const std::string& { return host_; }
    /// "resolve example.invalid: host not found"; "" when resolved.
    [[nodiscard]] auto message() const -> std::string;
    auto value() const& -> const std::vector<socket_address>&;
    auto value() && -> std::vector<socket_address>;
    auto operator*() const& -> const std::vector<socket_address>& { return value(); }
    auto operator->() const -> const std::vector<socket_address>* { return &value(); }

private:
    std::string host_;
    std::vector<socket_address> addresses_;
    std::error_code error_;
};

/// The addresses of `host` with `port` set, IPv6 and IPv4 in the order the resolver gave. A
/// numeric address ("10.0.0.1", "::1", "[::1]") is returned as it is, with no lookup at all;
/// "localhost" and names under ".localhost" are the loopback addresses (RFC 6761), never asked
/// of a server. Other names go to c-ares, whose sockets the awaiting worker's reactor watches
/// (fd_wait): no worker and no blocking-pool thread ever waits on a name server.
///
/// Answers are cached process-wide for their TTL (at most `max_ttl`), keyed by host, family and
/// servers; failures are not cached.
///
/// Errors (resolve_category() unless noted): not_found, no_address, timed_out,
/// server_failure, bad_name, bad_servers; `operation_canceled` when the task's stop is requested,
/// and then the queries in flight are abandoned and their sockets closed before it returns.
/// May be called from any task on a weft runtime.
///
///     auto r = co_await weft::resolve("example.com", 443);
///     if (!r) { log(r.message()); }          // "resolve example.com: host not found"
///     for (const auto& a : *r) { ... }
///
/// The task owns copies of its arguments: it may be awaited after they are gone.
[[nodiscard]] auto resolve(std::string host, std::uint16_t port, resolve_options options)
    -> task<resolve_result>;

/// resolve with the default options. (An overload, not a default argument: g++ 12 mishandles
/// a default argument of class type passed to a coroutine.)
[[nodiscard]] inline auto resolve(std::string host, std::uint16_t port) -> task<resolve_result> {
    return resolve(std::move(host), port, resolve_options{});
}

}  // namespace weft

template <>
struct std::is_error_code_enum<weft::resolve_errc> : std::true_type {};
