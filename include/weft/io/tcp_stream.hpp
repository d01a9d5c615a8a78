#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>

#include "weft/core/result.hpp"
#include "weft/core/task.hpp"
#include "weft/io/bytes.hpp"
#include "weft/io/error.hpp"
#include "weft/io/socket_address.hpp"

namespace weft {

namespace detail {
struct epoll_socket;  // per-socket reactor state (src/io)
struct epoll_socket_deleter {
    void operator()(epoll_socket* h) const noexcept;
};
class recv_queue;  // multishot receive on io_uring (src/io)
struct recv_queue_closer {
    void operator()(recv_queue* q) const noexcept;
};
}  // namespace detail

/// A connected TCP socket. Every operation runs on the reactor of the worker that awaits it,
/// observes the task's stop token (a cancelled operation ends with operation_canceled; on
/// io_uring it is cancelled in the kernel and its buffer stays untouched afterwards), and
/// reports failures as values: refused, reset, timed out, and `io_errc::eof` when the peer
/// closed. TCP_NODELAY is on by default.
///
/// One reader and one writer may use it at the same time (from any workers); two concurrent
/// reads (or writes) on one stream are not supported. It must not be destroyed while an
/// operation on it is pending. Move-only; closes on destruction.
///
///     auto s = (co_await weft::tcp_stream::connect(addr)).value();
///     co_await s.write_all(std::as_bytes(std::span{msg}));
///     auto n = co_await s.read_some(buf);   // result<size_t>; io_errc::eof at end
class tcp_stream {
public:
    tcp_stream() noexcept = default;
    /// Adopts a connected socket (made non-blocking here).
    explicit tcp_stream(int fd) noexcept;
    tcp_stream(tcp_stream&&) noexcept;
    auto operator=(tcp_stream&&) noexcept -> tcp_stream&;
    tcp_stream(const tcp_stream&) = delete;
    auto operator=(const tcp_stream&) -> tcp_stream& = delete;
    ~tcp_stream();

    [[nodiscard]] static auto connect(socket_address addr) -> task<result<tcp_stream>>;
    /// connect that gives up with `timed_out` after `timeout`.
    [[nodiscard]] static auto connect(socket_address addr, std::chrono::milliseconds timeout)
        -> task<result<tcp_stream>>;

    /// Reads what is available (at least 1 byte), up to buf.size().
    [[nodiscard]] auto read_some(std::span<std::byte> buf) -> task<result<std::size_t>>;
    /// Receives what is available (at least 1 byte, at most 4 KiB) into memory the reactor
    /// provides: on io_uring a buffer the kernel picks from the worker's provided-buffer ring
    /// when data arrives, so a connection waiting here holds no buffer at all. Zero-copy to
    /// pass on (bytes are shared, not copied). On io_uring the first receive arms a multishot
    /// receive that delivers every later chunk with no system call of its own; from then on
    /// read_some and read_exact read through it too (copying out of its buffers).
    [[nodiscard]] auto receive() -> task<result<bytes>>;
    /// Reads exactly buf.size() bytes (eof if the peer closes first).
    [[nodiscard]] auto read_exact(std::span<std::byte> buf) -> task<result<void>>;
    /// Writes all of `buf`, however many system calls it takes.
    [[nodiscard]] auto write_all(std::span<const std::byte> buf) -> task<result<void>>;
    /// Writes all of several buffers (vectored), in order.
    [[nodiscard]] auto write_all(std::span<const std::span<const std::byte>> bufs)
        -> task<result<void>>;

    /// Waits until the socket may take more bytes (or has failed), for writers that use their
    /// own system call on native_handle() - weft::send_file's sendfile(2). Added with file IO.
    [[nodiscard]] auto wait_writable() -> task<result<void>>;

    /// Half-close: no more writes; the peer reads eof.
    [[nodiscard]] auto shutdown_write() noexcept -> result<void>;
    void close() noexcept;
    [[nodiscard]] auto is_open() const noexcept -> bool { return fd_ >= 0; }
    [[nodiscard]] auto native_handle() const noexcept -> int { return fd_; }
    [[nodiscard]] auto peer_address() const -> result<socket_address>;

private:
    friend class tcp_listener;
    struct nonblocking_fd {};
    /// Adopts a socket the kernel made non-blocking already (accept4 with SOCK_NONBLOCK): no
    /// fcntl.
    tcp_stream(int fd, nonblocking_fd) noexcept : fd_(fd) {}

    int fd_ = -1;
    std::unique_ptr<detail::epoll_socket, detail::epoll_socket_deleter> h_;  // epoll
    std::unique_ptr<detail::recv_queue, detail::recv_queue_closer> rq_;      // io_uring receive
};

}  // namespace weft
