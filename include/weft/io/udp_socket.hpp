#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <utility>

#include "weft/core/result.hpp"
#include "weft/core/task.hpp"
#include "weft/io/socket_address.hpp"
#include "weft/io/tcp_stream.hpp"

namespace weft {

/// What recv_from gives back: how many bytes arrived and from where.
struct datagram_info {
    std::size_t size;
    socket_address from;
};

/// A UDP socket (IPv4 or IPv6) bound to a local address. Operations run on the awaiting
/// worker's reactor and observe cancellation like tcp_stream's. One sender and one receiver
/// may use it at the same time.
///
///     auto s = weft::udp_socket::bind(weft::socket_address::parse("127.0.0.1", 0).value());
///     co_await s->send_to(data, peer);
///     auto [n, from] = (co_await s->recv_from(buf)).value();
class udp_socket {
public:
    udp_socket() noexcept = default;
    udp_socket(udp_socket&&) noexcept;
    auto operator=(udp_socket&&) noexcept -> udp_socket&;
    udp_socket(const udp_socket&) = delete;
    auto operator=(const udp_socket&) -> udp_socket& = delete;
    ~udp_socket();

    [[nodiscard]] static auto bind(socket_address addr) -> result<udp_socket>;

    /// Sends one datagram (all of `data` or an error: a datagram is never split).
    [[nodiscard]] auto send_to(std::span<const std::byte> data, socket_address to)
        -> task<result<std::size_t>>;
    /// Receives one datagram into `buf` (truncated to buf.size() if larger).
    [[nodiscard]] auto recv_from(std::span<std::byte> buf) -> task<result<datagram_info>>;

    [[nodiscard]] auto local_address() const -> result<socket_address>;
    void close() noexcept;
    [[nodiscard]] auto native_handle() const noexcept -> int { return fd_; }

private:
    int fd_ = -1;
    std::unique_ptr<detail::epoll_socket, detail::epoll_socket_deleter> h_;
};

}  // namespace weft
