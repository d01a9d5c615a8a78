#pragma once

// What a connection reads and writes through: the accepted tcp_stream, a tls_stream over it,
// or a byte_stream (a stream that is not a kernel socket: weft::testing's simulated network).
// A plain function per operation, no coroutine frame of its own: each returns the chosen
// stream's task. Plain TCP costs one predictable branch and no indirect call; only a
// byte_stream goes through its virtual interface.

#include <cstdint>
#include <span>

#include "weft/core/result.hpp"
#include "weft/core/task.hpp"
#include "weft/io/byte_stream.hpp"
#include "weft/io/bytes.hpp"
#include "weft/io/tcp_stream.hpp"
#include "weft/tls/tls_stream.hpp"

namespace weft::http::detail {

class transport {
public:
    explicit transport(tcp_stream& tcp) noexcept : tcp_(&tcp) {}
    explicit transport(tls_stream& tls) noexcept : kind_(kind::tls), tcp_(&tls.tcp()), tls_(&tls) {}
    explicit transport(byte_stream& s) noexcept : kind_(kind::stream), stream_(&s) {}

    /// True on plain TCP only: the connection may then make its own system calls on the
    /// socket (recv, sendmsg, setsockopt, sendfile). Over TLS every byte must go through the
    /// record layer, and a byte_stream has no socket: both take the stream's operations.
    [[nodiscard]] auto kernel_socket() const noexcept -> bool { return kind_ == kind::tcp; }
    /// True over TLS: writes go through the record layer, paced by the connection
    /// (write_all_paced).
    [[nodiscard]] auto encrypted() const noexcept -> bool { return kind_ == kind::tls; }
    /// True on TCP and TLS, which have a kernel socket under them: its options
    /// (TCP_NOTSENT_LOWAT) and its readiness are the connection's to use.
    [[nodiscard]] auto has_socket() const noexcept -> bool { return kind_ != kind::stream; }
    /// The socket, for those system calls (has_socket() only).
    [[nodiscard]] auto native_handle() const noexcept -> int { return tcp_->native_handle(); }

    [[nodiscard]] auto receive() -> task<result<bytes>> {
        if (kind_ == kind::tcp) [[likely]] {
            return tcp_->receive();
        }
        return kind_ == kind::tls ? tls_->receive() : stream_->receive();
    }
    [[nodiscard]] auto write_all(std::span<const std::byte> buf) -> task<result<void>> {
        if (kind_ == kind::tcp) [[likely]] {
            return tcp_->write_all(buf);
        }
        return kind_ == kind::tls ? tls_->write_all(buf) : stream_->write_all(buf);
    }
    [[nodiscard]] auto write_all(std::span<const std::span<const std::byte>> bufs)
        -> task<result<void>> {
        if (kind_ == kind::tcp) [[likely]] {
            return tcp_->write_all(bufs);
        }
        return kind_ == kind::tls ? tls_->write_all(bufs) : stream_->write_all(bufs);
    }
    [[nodiscard]] auto wait_writable() -> task<result<void>> {
        return kind_ == kind::stream ? stream_->wait_writable() : tcp_->wait_writable();
    }
    /// Over TLS only: write_all with each wait for room left to `p` (plain TCP paces its own
    /// sendmsg calls).
    [[nodiscard]] auto write_all_paced(std::span<const std::span<const std::byte>> bufs,
                                       tls_stream::pacer& p) -> task<result<void>> {
        return tls_->write_all(bufs, p);
    }
    /// Over TLS, close_notify first (if the socket takes it at once).
    [[nodiscard]] auto shutdown_write() noexcept -> result<void> {
        if (kind_ == kind::tcp) [[likely]] {
            return tcp_->shutdown_write();
        }
        return kind_ == kind::tls ? tls_->shutdown_write() : stream_->shutdown_write();
    }
    [[nodiscard]] auto peer_address() const -> result<socket_address> {
        return kind_ == kind::stream ? stream_->peer_address() : tcp_->peer_address();
    }

private:
    enum class kind : std::uint8_t { tcp, tls, stream };

    kind kind_ = kind::tcp;
    tcp_stream* tcp_ = nullptr;      // tcp and tls
    tls_stream* tls_ = nullptr;      // tls
    byte_stream* stream_ = nullptr;  // stream
};

}  // namespace weft::http::detail
