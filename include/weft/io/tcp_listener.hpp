#pragma once

#include <chrono>
#include <memory>

#include "weft/core/result.hpp"
#include "weft/core/task.hpp"
#include "weft/io/socket_address.hpp"
#include "weft/io/tcp_stream.hpp"

namespace weft {

namespace detail {
class accept_queue;  // multishot accept on io_uring (src/io)
struct accept_queue_closer {
    void operator()(accept_queue* q) const noexcept;
};
}  // namespace detail

struct listen_options {
    int backlog = 4096;
    /// SO_REUSEPORT: several listeners (one per worker, thread-per-core) share the port and the
    /// kernel spreads connections among them.
    bool reuse_port = false;
    /// TCP_DEFER_ACCEPT: a connection is handed to accept only once its first bytes have
    /// arrived (or, from a client that sends nothing, after about this long), for protocols in
    /// which the client speaks first (HTTP): the server's first read of it then finds data
    /// instead of waiting for it, one wake-up less per connection. 0: off.
    std::chrono::seconds defer_accept{0};
};

/// A listening TCP socket (IPv4 or IPv6). `accept` observes cancellation. On io_uring the
/// listener arms one multishot accept on the ring of the worker that first accepts, and the
/// kernel posts every new connection to it: no system call per connection (on kernels without
/// multishot accept, one accept operation per call). Several tasks may accept at once; they
/// are served in order. When the process runs out of file descriptors (EMFILE/ENFILE), accept
/// waits and retries with a growing back-off (5 ms .. 1 s) instead of failing or spinning;
/// the pending connection stays in the backlog. To stop accepting, cancel the accepting task;
/// like a tcp_stream, a listener must not be closed while an accept on it is pending.
///
///     auto l = weft::tcp_listener::bind(weft::socket_address::parse("127.0.0.1", 0).value());
///     auto conn = co_await l->accept();   // result<tcp_stream>
class tcp_listener {
public:
    tcp_listener() noexcept = default;
    tcp_listener(tcp_listener&&) noexcept;
    auto operator=(tcp_listener&&) noexcept -> tcp_listener&;
    tcp_listener(const tcp_listener&) = delete;
    auto operator=(const tcp_listener&) -> tcp_listener& = delete;
    ~tcp_listener();

    [[nodiscard]] static auto bind(socket_address addr, listen_options opts = {})
        -> result<tcp_listener>;

    [[nodiscard]] auto accept() -> task<result<tcp_stream>>;
    [[nodiscard]] auto local_address() const -> result<socket_address>;
    void close() noexcept;
    [[nodiscard]] auto native_handle() const noexcept -> int { return fd_; }

private:
    int fd_ = -1;
    std::unique_ptr<detail::epoll_socket, detail::epoll_socket_deleter> h_;  // epoll
    std::unique_ptr<detail::accept_queue, detail::accept_queue_closer> q_;   // io_uring
};

}  // namespace weft
