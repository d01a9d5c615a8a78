#pragma once

// What a connection reads and writes through: the accepted tcp_stream, or a tls_stream over
// it. A plain function per operation, no virtual call and no coroutine frame of its own: each
// returns the chosen stream's task, so plain TCP costs one predictable branch.

#include <span>

#include "weft/core/result.hpp"
#include "weft/core/task.hpp"
#include "weft/io/bytes.hpp"
#include "weft/io/tcp_stream.hpp"
#include "weft/tls/tls_stream.hpp"

namespace weft::http::detail {

class transport {
public:
    explicit transport(tcp_stream& tcp) noexcept : tcp_(tcp) {}
    explicit transport(tls_stream& tls) noexcept : tcp_(tls.tcp()), tls_(&tls) {}

    /// True over TLS: every byte must go through the record layer, so the connection's
    /// direct system calls on the socket (recv, sendmsg, sendfile) are not used.
    [[nodiscard]] auto encrypted() const noexcept -> bool { return tls_ != nullptr; }
    /// The socket, for those system calls (plain TCP only).
    [[nodiscard]] auto native_handle() const noexcept -> int { return tcp_.native_handle(); }

    [[nodiscard]] auto receive() -> task<result<bytes>> {
        return tls_ != nullptr ? tls_->receive() : tcp_.receive();
    }
    [[nodiscard]] auto write_all(std::span<const std::byte> buf) -> task<result<void>> {
        return tls_ != nullptr ? tls_->write_all(buf) : tcp_.write_all(buf);
    }
    [[nodiscard]] auto write_all(std::span<const std::span<const std::byte>> bufs)
        -> task<result<void>> {
        return tls_ != nullptr ? tls_->write_all(bufs) : tcp_.write_all(bufs);
    }
    /// Over TLS only: write_all with each wait for room left to `p` (plain TCP paces its own
    /// sendmsg calls).
    [[nodiscard]] auto write_all_paced(std::span<const std::span<const std::byte>> bufs,
                                       tls_stream::pacer& p) -> task<result<void>> {
        return tls_->write_all(bufs, p);
    }
    [[nodiscard]] auto wait_writable() -> task<result<void>> { return tcp_.wait_writable(); }
    /// Over TLS, close_notify first (if the socket takes it at once).
    [[nodiscard]] auto shutdown_write() noexcept -> result<void> {
        return tls_ != nullptr ? tls_->shutdown_write() : tcp_.shutdown_write();
    }
    [[nodiscard]] auto peer_address() const -> result<socket_address> {
        return tcp_.peer_address();
    }

private:
    tcp_stream& tcp_;
    tls_stream* tls_ = nullptr;
};

}  // namespace weft::http::detail
