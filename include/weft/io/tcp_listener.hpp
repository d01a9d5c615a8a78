#pragma once

#include <memory>

#include "weft/core/result.hpp"
#include "weft/core/task.hpp"
#include "weft/io/socket_address.hpp"
#include "weft/io/tcp_stream.hpp"

namespace weft {

struct listen_options {
    int backlog = 4096;
    /// SO_REUSEPORT: several listeners (one per worker, thread-per-core) share the port and the
    /// kernel spreads connections among them.
    bool reuse_port = false;
};

/// A listening TCP socket (IPv4 or IPv6). `accept` runs on the awaiting worker's reactor and
/// observes cancellation. When the process runs out of file descriptors (EMFILE/ENFILE),
/// accept waits and retries with a growing back-off (5 ms .. 1 s) instead of failing or
/// spinning; the pending connection stays in the backlog.
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
    std::unique_ptr<detail::io_handle, detail::io_handle_deleter> h_;
};

}  // namespace weft
