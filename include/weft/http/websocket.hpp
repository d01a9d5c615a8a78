#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "weft/core/result.hpp"
#include "weft/core/task.hpp"
#include "weft/io/byte_stream.hpp"
#include "weft/io/socket_address.hpp"
#include "weft/tls/tls_context.hpp"

namespace weft::http {

/// The close codes of RFC 6455 7.4.1 that weft itself sends.
namespace close_code {
inline constexpr std::uint16_t normal = 1000;          ///< done
inline constexpr std::uint16_t going_away = 1001;      ///< the server drains (shutdown)
inline constexpr std::uint16_t protocol_error = 1002;  ///< a frame broke RFC 6455
inline constexpr std::uint16_t unsupported = 1003;     ///< a kind of data the endpoint refuses
inline constexpr std::uint16_t no_status = 1005;       ///< (received) a close without a code
inline constexpr std::uint16_t invalid_data = 1007;    ///< a text message that is not UTF-8
inline constexpr std::uint16_t policy = 1008;          ///< refused by policy
inline constexpr std::uint16_t too_big = 1009;         ///< over the frame or message limit
inline constexpr std::uint16_t internal_error = 1011;  ///< the handler failed (threw)
}  // namespace close_code

/// Why a WebSocket operation failed, beside the transport's own errors (reset, eof,
/// operation_canceled, timed_out).
enum class websocket_errc : int {
    closed = 1,        ///< the close handshake happened (websocket::close_code() says how)
    protocol_error,    ///< the peer broke RFC 6455 (a close 1002, 1007 or 1009 was sent)
    handshake_failed,  ///< connect(): the server refused the upgrade or answered wrongly
};
[[nodiscard]] auto websocket_category() noexcept -> const std::error_category&;
[[nodiscard]] inline auto make_error_code(websocket_errc e) noexcept -> std::error_code {
    return {static_cast<int>(e), websocket_category()};
}

/// permessage-deflate (RFC 7692): each data message compressed with zlib's raw deflate, RSV1
/// set on its first frame. Off unless `enabled` (docs/design/decisions.md: CPU per message,
/// and a compressed length can leak a secret sent beside attacker-chosen bytes).
///
/// Memory: without context takeover (the default, both ways) a message is compressed, and a
/// received one inflated, by zlib states each worker thread keeps (about 2^(send_window_bits+2)
/// + 2^(mem_level+9) bytes to compress, 7 KiB + 32 KiB to inflate): an idle connection holds
/// none. Context takeover keeps those states per connection for its lifetime, created by its
/// first compressed message (with the defaults about 262 KiB to send, 39 KiB to receive).
/// A received message is inflated only up to websocket_options::max_message (then close 1009).
struct websocket_deflate_options {
    /// Server: accept a client's offer (the first acceptable one); client: offer it.
    bool enabled = false;
    /// Our compressor keeps its window between the messages we send (better ratios for
    /// similar small messages, a compressor state held per connection). Off: we announce
    /// server_no_context_takeover (server) or client_no_context_takeover (client).
    bool send_context_takeover = false;
    /// The peer may keep its window between messages (we then keep an inflate state per
    /// connection). Off: the server answers client_no_context_takeover; the client offers
    /// server_no_context_takeover, which the server must accept.
    bool receive_context_takeover = false;
    /// Our compressor's window, 2^bits bytes, 9..15 (zlib has no raw 8-bit window): the peer
    /// may ask for less with *_max_window_bits, never for more.
    int send_window_bits = 15;
    /// The largest window the peer may compress with, 8..15: asked of it (client_max_window_bits
    /// from a server, when the client offered that parameter; server_max_window_bits from a
    /// client).
    int receive_window_bits = 15;
    /// zlib's memLevel (1..9) of our compressor: its hash tables take 2^(mem_level+9) bytes.
    int mem_level = 8;
};

/// Limits and timeouts of one WebSocket connection, server or client side. Defaults: a frame
/// of 1 MiB, a message of 16 MiB (the 1009 close above either), a ping after 30 s without a
/// byte from the peer and a close after 60 s (idle_timeout), 30 s for the peer to take a frame
/// (send_timeout, progress per frame) and 5 s for the peer's close once ours is sent.
struct websocket_options {
    /// A frame whose payload is longer is refused with close 1009 before it is read.
    std::uint64_t max_frame = 1 << 20;
    /// A message (all its fragments) longer than this is refused with close 1009.
    std::uint64_t max_message = 16 << 20;
    /// Server: a ping is sent once the peer has been silent this long (0: never).
    std::chrono::milliseconds ping_interval{std::chrono::seconds{30}};
    /// Server: a peer silent this long (no frame, no pong to our pings) is dropped.
    std::chrono::milliseconds idle_timeout{std::chrono::seconds{60}};
    /// The longest a frame may wait for the peer to take it; a peer that stops reading is
    /// dropped after it.
    std::chrono::milliseconds send_timeout{std::chrono::seconds{30}};
    /// After our close frame, the longest wait for the peer's (a drain's 1001 included); then
    /// the connection is dropped. Keep it below server_options::drain_timeout.
    std::chrono::milliseconds close_timeout{std::chrono::seconds{5}};
    /// Server: the subprotocols offered, in preference order; the first one the client also
    /// lists is selected. Empty: no Sec-WebSocket-Protocol is answered.
    std::vector<std::string> subprotocols{};
    /// Server: called with the Origin field (empty if none); false refuses the upgrade (403).
    /// Unset: every origin is accepted (browsers send Origin; other clients need not).
    std::function<bool(std::string_view)> check_origin{};
    /// permessage-deflate (RFC 7692): off unless deflate.enabled.
    websocket_deflate_options deflate{};
    /// Client: wss, a client context (weft::tls_context::client) and the name it checks.
    std::optional<tls_context> tls{};
};

/// One received message: its payload (UTF-8 checked when `text`), whole.
struct websocket_message {
    bool text = false;
    std::string data;
};

/// A WebSocket connection (RFC 6455) at message level: fragments are joined, pings answered,
/// UTF-8 of text messages checked, the close handshake done. A server handler gets one for the
/// connection it upgraded (server::websocket); a client gets one from connect().
///
/// Threads: one task may receive while others send: sends are serialised by an async lock
/// (each frame goes out whole), from any worker. receive() must not be called by two tasks at
/// once. On the server the object belongs to the handler's call: it must not be used after the
/// handler returned.
///
/// Errors: every operation returns the transport's error (operation_canceled when the task is
/// stopped, timed_out for a send past send_timeout) or a websocket_errc. After the first
/// failure the connection is done: later calls fail at once.
///
///     srv.websocket("/echo", [](weft::http::websocket& ws) -> weft::task<void> {
///         for (;;) {
///             auto m = co_await ws.receive();
///             if (!m) co_return;                  // closed, or failed
///             (void)co_await ws.send(m->data, m->text);
///         }
///     });
class websocket {
public:
    struct impl;  // src/http/websocket.cpp

    /// Connects to `addr`, upgrading a GET of `path` (`host` for Host, SNI and the TLS name
    /// check; wss when o.tls is set). `protocols`: Sec-WebSocket-Protocol offered, if any.
    [[nodiscard]] static auto connect(socket_address addr,
                                      std::string host,
                                      std::string path,
                                      websocket_options o = {},
                                      std::vector<std::string> protocols = {})
        -> task<result<websocket>>;
    /// connect() over a connected byte_stream (weft::testing's simulated network): the same
    /// handshake and session; `host` is the Host field as sent (with a port, if any) and, with
    /// o.tls, the SNI and TLS name.
    [[nodiscard]] static auto connect(std::unique_ptr<byte_stream> s,
                                      std::string host,
                                      std::string path,
                                      websocket_options o = {},
                                      std::vector<std::string> protocols = {})
        -> task<result<websocket>>;

    explicit websocket(std::unique_ptr<impl> p) noexcept;
    websocket(websocket&&) noexcept;
    auto operator=(websocket&&) noexcept -> websocket&;
    websocket(const websocket&) = delete;
    auto operator=(const websocket&) -> websocket& = delete;
    ~websocket();

    /// The next data message. Pings are answered and pongs taken on the way. A close from the
    /// peer is answered and ends with websocket_errc::closed; a frame that breaks the protocol
    /// or a limit is answered with its close code and ends with protocol_error. Cancel safety:
    /// a cancelled receive ends the connection (bytes may have been taken off the socket).
    [[nodiscard]] auto receive() -> task<result<websocket_message>>;
    /// Sends one message, text (`data` must be UTF-8: not checked) or binary, as one frame
    /// (compressed when permessage-deflate was agreed).
    [[nodiscard]] auto send(std::string_view data, bool text = true) -> task<result<void>>;
    [[nodiscard]] auto send_binary(std::span<const std::byte> data) -> task<result<void>>;
    /// A ping with `payload` (at most 125 bytes).
    [[nodiscard]] auto ping(std::string_view payload = {}) -> task<result<void>>;
    /// Starts the close handshake: our close frame with `code` and `reason` (at most 123
    /// bytes). receive() then ends with `closed` once the peer's close arrives; on the server,
    /// returning from the handler completes it.
    [[nodiscard]] auto close(std::uint16_t code = close_code::normal, std::string_view reason = {})
        -> task<result<void>>;

    /// The code of the peer's close frame (1005 when it had none), once received; else 0.
    [[nodiscard]] auto close_code() const noexcept -> std::uint16_t;
    [[nodiscard]] auto close_reason() const noexcept -> std::string_view;
    /// The subprotocol agreed in the handshake ("" when none).
    [[nodiscard]] auto subprotocol() const noexcept -> std::string_view;
    /// True when the handshake agreed on permessage-deflate.
    [[nodiscard]] auto compressed() const noexcept -> bool;

private:
    std::unique_ptr<impl> p_;
};

/// A WebSocket route's handler: runs for one upgraded connection, in its task, until it
/// returns (the server then completes the close handshake). An exception ends the connection
/// with close 1011.
using websocket_handler = std::function<task<void>(websocket&)>;

}  // namespace weft::http

template <>
struct std::is_error_code_enum<weft::http::websocket_errc> : std::true_type {};
