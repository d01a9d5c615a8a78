#pragma once

// One HTTP/1.1 connection: receive, parse, route, run the handler, write. Internal to
// weft::http (server.cpp spawns one per accepted socket).

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "request_state.hpp"
#include "transport.hpp"
#include "weft/core/result.hpp"
#include "weft/core/stop.hpp"
#include "weft/core/task.hpp"
#include "weft/http/body_decoder.hpp"
#include "weft/http/request.hpp"
#include "weft/http/request_parser.hpp"
#include "weft/http/response.hpp"
#include "weft/http/server.hpp"
#include "weft/io/byte_stream.hpp"
#include "weft/io/bytes.hpp"
#include "weft/io/socket_address.hpp"
#include "weft/io/tcp_stream.hpp"
#include "weft/sched/timer.hpp"
#include "weft/sync/event.hpp"

namespace weft::http::detail {

class h2_connection;

/// Test hook: what connections take into their request buffers, counted for tests that must
/// know where the server's receives begin and end (tests/http/paced_sender.hpp sends each piece
/// of a stream only once the server has taken the previous one, so every piece is a receive of
/// its own). Null outside those tests: a connection then pays one relaxed load of the pointer
/// per receive. Set it before a server starts and clear it after the server has ended.
///
/// Relaxed throughout: a count only says that fill() got past the receive that it counts, and
/// a reader acts on the count alone (it publishes no other data).
struct receive_counts {
    std::atomic<std::uint64_t> receives{0};  ///< receives fill() took
    std::atomic<std::uint64_t> bytes{0};     ///< the bytes of those receives
    std::atomic<std::uint64_t> carried{0};   ///< of those, appended to a carry buffer
    /// request_states held by connections now: taken when a request's first bytes arrive,
    /// given back when the connection goes idle (an idle connection holds none).
    std::atomic<std::int64_t> states_held{0};
};
inline std::atomic<receive_counts*> receive_counts_for_test{nullptr};

class connection {
public:
    enum class phase : std::uint8_t { busy, idle, closing };

    /// Serves an accepted socket until it closes; never throws. With the server's TLS option,
    /// the TLS handshake comes first (a failed one ends it). The connection and its loop live
    /// in one frame with the stream (run()).
    static auto serve_socket(std::shared_ptr<server::state> st, tcp_stream s) -> task<void>;
    /// serve_socket over a byte_stream (with the TLS option, TLS over it first).
    static auto serve_stream(std::shared_ptr<server::state> st, std::unique_ptr<byte_stream> s)
        -> task<void>;

    /// `s`'s stream must outlive the connection. `parent`: the stop of the task that serves it
    /// (the server's), which stops the connection too.
    connection(server::state& st, transport s, stop_state* parent) noexcept;
    connection(const connection&) = delete;
    auto operator=(const connection&) -> connection& = delete;
    ~connection();

    // For body_reader.
    auto body_read() -> task<result<std::string_view>>;
    auto body_read_all() -> task<result<std::string>>;
    [[nodiscard]] auto body_received() const noexcept -> std::uint64_t {
        return rs_->body.received();
    }
    [[nodiscard]] auto body_done() const noexcept -> bool { return rs_->body.done(); }
    /// The client's address, asked of the kernel when a handler first wants it (getpeername):
    /// most never do, and a connection that serves one request would spend a system call on
    /// it. An address the kernel cannot give (the client gone) is the empty socket_address.
    auto peer() noexcept -> const socket_address&;

    // What the drain and the watchdog cancel the connection through, linked to the stop of the
    // task that serves it: every operation of the connection and its watchdog are cancelled
    // through it. A member, so it lives for as long as the connection is registered with the
    // server.
    linked_stop_state stop;
    connection* prev = nullptr;
    connection* next = nullptr;
    // Set while the connection speaks HTTP/2 (h2_connection.cpp): the drain sets the event
    // (under the server's lock) instead of closing the connection, which then sends GOAWAY.
    std::atomic<event*> drain_wake{nullptr};

private:
    friend class h2_connection;  // takes the connection over (run()), with its deadline

    // -- input: the received bytes of the current request --------------------------------
    // A request that arrives in one receive is parsed and served from that `bytes` block, with
    // no copy. One that spans receives is gathered in rs_->carry[carry_] (which the parser
    // limits keep small): from `mark_`, the request's first byte, to the end. Offsets into the
    // storage in use: mark_ <= head_end_ <= pos_ <= size. in_carry_ implies rs_ != nullptr.
    //
    // Once a head is parsed, the handler holds views of it (fields, path parameters) until the
    // request ends, so its bytes never move: when the body needs another receive, what is left
    // of the body is gathered in the other carry buffer and the head stays where it is, in
    // rs_->head_block (the block it arrived in) or in the carry buffer it was gathered in
    // (head_apart_; mark_ == head_end_ == 0 then). The next request releases it.
    [[nodiscard]] auto storage() const noexcept -> std::string_view {
        return in_carry_
                   ? std::string_view{rs_->carry[carry_]}
                   : std::string_view{reinterpret_cast<const char*>(block_.data()), block_.size()};
    }
    auto fill() -> task<result<void>>;
    void release_input() noexcept;  // drops the held bytes (block, carry, a held-apart head)

    // -- output: responses waiting for one vectored write (rs_->out, rs_->segs) -----------
    void add_out(std::string_view body);  // copied when small, else sent from where it is
    // The pending output, written under the send timeout and min_rate (`flags`: MSG_MORE).
    auto flush(int flags = 0) -> task<result<void>>;
    // `small_body` (at most inline_body_max bytes) is copied right after the head.
    void write_head(const response& r,
                    std::uint64_t length,
                    bool chunked,
                    bool keep,
                    std::string_view small_body = {});

public:
    /// Writes all of `pieces` to the client, in order, under send_timeout and min_rate, paced
    /// by `pace` (the response's waiting so far). For flush() and a stream body's writer.
    auto write_paced(std::span<const std::span<const std::byte>> pieces,
                     int flags,
                     transfer_pace& pace) -> task<result<void>>;

private:
    // serve_socket's TLS connections: the handshake, then run() over the TLS stream.
    static auto serve_tls(std::shared_ptr<server::state> st, tcp_stream s) -> task<void>;
    static auto serve_stream_tls(std::shared_ptr<server::state> st, std::unique_ptr<byte_stream> s)
        -> task<void>;
    // The connection over `s` (tcp_stream, tls_stream or a byte_stream), from its registration
    // with the server to its end: one frame holds the stream, the connection and its loop.
    template <typename Stream>
    static auto run(std::shared_ptr<server::state> st, Stream s, bool h2, bool close_notify = false)
        -> task<void>;
    [[nodiscard]] auto go_idle() noexcept -> bool;
    [[nodiscard]] auto wake(const result<bytes>& got) noexcept -> bool;
    auto start(bytes& got) -> task<bool>;
    // HTTP/2 from `first` (the first bytes received) to the end (h2_connection.cpp).
    auto serve_h2(bytes first) -> task<void>;
    auto serve_request() -> task<bool>;
    void give_back_state() noexcept;  // rs_ back to the thread's cache; rs_ = nullptr
    auto finish_body() -> task<bool>;
    void queue(response& r, bool keep);               // a body in memory (or none)
    auto send(response& r, bool keep) -> task<bool>;  // a file or stream body
    auto receive_first() -> std::optional<result<bytes>>;
    auto send_file(file_body& f) -> task<result<void>>;
    // Waits until the socket takes more, under the send deadlines of `pace` (see write_paced).
    auto wait_for_room(transfer_pace& pace) -> task<result<void>>;
    void limit_unsent() noexcept;  // TCP_NOTSENT_LOWAT, once (see connection.cpp)
    auto send_stream(stream_body& body, bool chunked) -> task<bool>;
    auto reject(int status, std::string_view why) -> task<void>;
    /// A staged close: half-close, then read and drop what the client still sends (at most
    /// linger_timeout and 64 KiB), so that it reads what was sent rather than a reset.
    auto linger_close() -> task<void>;
    auto watchdog() -> task<void>;
    // The shortest timeout: the watchdog's longest wait.
    [[nodiscard]] auto watch_period() const noexcept -> std::chrono::milliseconds;
    void set_deadline(std::chrono::milliseconds d) noexcept;
    void clear_deadline() noexcept;
    // The deadline of the next wait on the client within a transfer paced by `pace`: `progress`
    // from now, or sooner where min_rate would be broken.
    void set_paced_deadline(std::chrono::milliseconds progress, const transfer_pace& pace) noexcept;

    server::state& st_;
    transport s_;
    // Asked of the kernel and kept when a handler first wants it (see peer()): most connections
    // never ask, and an address held in every connection would add its 136 bytes to each
    // idle connection.
    std::unique_ptr<socket_address> peer_;
    deadline_timer deadline_;

    request_state* rs_ = nullptr;  // held while bytes of a request are (see request_state)
    bytes block_;
    std::size_t mark_ = 0;
    std::size_t head_end_ = 0;
    std::size_t pos_ = 0;

    bool in_carry_ = false;
    bool head_apart_ = false;  // the current head is no longer in storage() (see storage())
    std::uint8_t carry_ = 0;   // the carry buffer in use
    bool fresh_ = true;        // nothing received yet
    // s_.receive() called: on io_uring the ring then holds the socket until its cancelled
    // multishot receive is reaped, so close() alone does not send the FIN at once
    bool receive_armed_ = false;
    bool low_water_set_ = false;     // TCP_NOTSENT_LOWAT set (see limit_unsent)
    bool continue_pending_ = false;  // 100 Continue owed before the first body read
    bool head_request_ = false;
    bool close_ = false;      // close after the current response
    bool lingering_ = false;  // the deadline now is the linger after an error
    bool h2_ = false;         // the TLS client chose "h2" by ALPN
    std::uint8_t version_minor_ = 1;

public:
    // For the server's drain (under the server's lock). Declared beside the flags above, in
    // their word: elsewhere it would pad a word of its own in every idle connection's frame.
    std::atomic<phase> state{phase::busy};

private:
    std::uint32_t pending_ = 0;  // responses in rs_->out / rs_->segs (at most max_pipelined)
};

}  // namespace weft::http::detail
