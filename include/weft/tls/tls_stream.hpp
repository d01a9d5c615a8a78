#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string_view>

#include "weft/core/result.hpp"
#include "weft/core/task.hpp"
#include "weft/io/bytes.hpp"
#include "weft/io/error.hpp"
#include "weft/io/tcp_stream.hpp"
#include "weft/tls/error.hpp"
#include "weft/tls/tls_context.hpp"

namespace weft {

namespace detail {
struct tls_session;  // src/tls/tls_stream.cpp
struct tls_session_deleter {
    void operator()(tls_session* s) const noexcept;
};
}  // namespace detail

/// A TLS connection over a tcp_stream (OpenSSL 3). OpenSSL never touches the socket: it reads
/// ciphertext from and writes it to memory (a BIO over the session's buffers), and the
/// tcp_stream's own receive and write_all move those bytes, so no worker ever blocks in OpenSSL
/// and both IO backends carry it unchanged.
///
/// Errors are values, as on tcp_stream: the socket's own (reset, io_errc::eof during the
/// handshake), `io_errc::eof` once the peer's close_notify has been read, `tls_errc::truncated`
/// when the peer closed without one, a certificate the client refuses as
/// x509_verify_category() ("certificate has expired", "hostname mismatch"), any other TLS
/// failure as openssl_category() naming OpenSSL's reason. A failed operation leaves the stream
/// unusable (later ones report it), except a cancelled read.
///
/// Cancellation: every operation observes the task's stop token at each suspension (it waits
/// only in the tcp_stream's receive and write_all, or in a pacer's wait_for_room) and ends
/// with operation_canceled. A
/// cancelled read loses nothing: the stream stays usable and the next read continues. A
/// cancelled write, handshake or shutdown may have sent part of a record: the stream is then
/// unusable (tls_errc::unusable).
///
/// Threads: one operation at a time, from any worker. Unlike tcp_stream, a reader and a writer
/// may not run at once: OpenSSL's session state is not thread-safe and a read may itself need
/// to write (a TLS 1.3 key update). It must not be destroyed while an operation is pending.
/// Move-only; destruction closes the socket without a close_notify (call shutdown first).
///
///     auto ctx = weft::tls_context::client();               // system trust store
///     auto tcp = (co_await weft::tcp_stream::connect(addr)).value();
///     auto s = (co_await weft::tls_stream::connect(std::move(tcp), ctx, "example.com")).value();
///     co_await s.write_all(std::as_bytes(std::span{request}));
///     auto n = co_await s.read_some(buf);                   // io_errc::eof after close_notify
class tls_stream {
public:
    /// A writer that bounds each wait for the socket itself (write_all with a pacer): the
    /// stream sends ciphertext without waiting and, when the socket is full, awaits
    /// wait_for_room() instead of waiting on its own, so the caller can hold the peer to a
    /// progress timeout and a minimum rate rather than a deadline for the whole write.
    class pacer {
    public:
        /// The socket took `n` more bytes of ciphertext.
        virtual void sent(std::size_t n) noexcept = 0;
        /// The socket is full: completes once it has room, or with the error that ends the
        /// write (the stream is then unusable).
        [[nodiscard]] virtual auto wait_for_room() -> task<result<void>> = 0;

    protected:
        pacer() = default;
        pacer(const pacer&) = default;
        auto operator=(const pacer&) -> pacer& = default;
        ~pacer() = default;
    };

    tls_stream() noexcept;
    tls_stream(tls_stream&&) noexcept;
    auto operator=(tls_stream&&) noexcept -> tls_stream&;
    tls_stream(const tls_stream&) = delete;
    auto operator=(const tls_stream&) -> tls_stream& = delete;
    ~tls_stream();

    /// The server's handshake on an accepted socket, bounded by ctx.handshake_timeout()
    /// (timed_out when it runs out). `ctx` must be a server context.
    [[nodiscard]] static auto accept(tcp_stream s, const tls_context& ctx)
        -> task<result<tls_stream>>;
    /// The client's handshake: sends `host` as SNI (unless it is an IP address) and, when ctx
    /// verifies peers, checks the chain and that the certificate is for `host` (a DNS name or an
    /// IP address). Bounded by ctx.handshake_timeout().
    [[nodiscard]] static auto connect(tcp_stream s, const tls_context& ctx, std::string_view host)
        -> task<result<tls_stream>>;

    /// Reads what is available (at least 1 byte), up to buf.size().
    [[nodiscard]] auto read_some(std::span<std::byte> buf) -> task<result<std::size_t>>;
    /// Reads what is available (at least 1 byte, at most one record: 16 KiB) into a new block.
    [[nodiscard]] auto receive() -> task<result<bytes>>;
    /// Writes all of `buf`: records of up to 16 KiB, sent 64 KiB at a time.
    [[nodiscard]] auto write_all(std::span<const std::byte> buf) -> task<result<void>>;
    /// Writes several buffers in order; small ones are gathered into shared records.
    [[nodiscard]] auto write_all(std::span<const std::span<const std::byte>> bufs)
        -> task<result<void>>;
    /// As write_all, with the waits for room left to `p` (which must outlive the write).
    [[nodiscard]] auto write_all(std::span<const std::span<const std::byte>> bufs, pacer& p)
        -> task<result<void>>;
    /// Sends close_notify and half-closes the socket. The peer's close_notify is not awaited:
    /// read until io_errc::eof for it.
    [[nodiscard]] auto shutdown() -> task<result<void>>;
    /// shutdown() without waiting: the close_notify goes out only if the socket takes it at
    /// once (a few dozen bytes: nearly always), then the socket is half-closed.
    [[nodiscard]] auto shutdown_write() noexcept -> result<void>;
    void close() noexcept;

    [[nodiscard]] auto is_open() const noexcept -> bool;
    /// The protocol ALPN agreed on ("http/1.1"); empty when none was.
    [[nodiscard]] auto alpn() const noexcept -> std::string_view;
    /// "TLSv1.3", "TLSv1.2".
    [[nodiscard]] auto version() const noexcept -> std::string_view;
    /// The SNI name the client sent (server side); empty when none.
    [[nodiscard]] auto server_name() const noexcept -> std::string_view;
    /// Whether the handshake resumed an earlier session (a ticket).
    [[nodiscard]] auto resumed() const noexcept -> bool;
    /// The socket underneath: for its address and descriptor. Reading or writing it directly
    /// breaks the record stream.
    [[nodiscard]] auto tcp() noexcept -> tcp_stream&;
    [[nodiscard]] auto peer_address() const -> result<socket_address>;

private:
    explicit tls_stream(
        std::unique_ptr<detail::tls_session, detail::tls_session_deleter> s) noexcept;

    std::unique_ptr<detail::tls_session, detail::tls_session_deleter> s_;
};

}  // namespace weft
