#pragma once

// One HTTP/2 connection on nghttp2: frames in, requests to the server's handlers, responses
// out. Internal to weft::http: connection.cpp hands a connection over to it when the client
// chose HTTP/2 (the h2c preface, or "h2" by ALPN), and it runs inside that connection's task,
// under its deadline and drain registration.
//
// Threads: nghttp2's session is used only by the connection's own loop (serve()). Each
// request's handler is a task of its own (in the connection's scope, on any worker); it
// reaches the session only through the connection's queue of actions (under mu_), after
// which it sets wake_: the loop takes the actions, applies them to the session, and writes.
// One loop that either waits for bytes or for a wake-up (the other wait cancelled) keeps one
// operation at a time on the transport, which tls_stream requires.

#include <nghttp2/nghttp2.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "weft/core/result.hpp"
#include "weft/core/scope.hpp"
#include "weft/core/task.hpp"
#include "weft/http/request.hpp"
#include "weft/http/request_parser.hpp"
#include "weft/http/response.hpp"
#include "weft/http/router.hpp"
#include "weft/io/bytes.hpp"
#include "weft/sync/event.hpp"

namespace weft::http::detail {

class connection;
class h2_connection;

/// True when `first` (a connection's first receive) starts with the HTTP/2 client preface's
/// first four bytes, "PRI " (RFC 9113 3.4): a method no HTTP/1.1 client sends.
[[nodiscard]] auto h2_preface_start(std::string_view first) noexcept -> bool;
/// True while a connection's first bytes are too few to tell (fewer than 4, all of them the
/// preface's: "P", "PR", "PRI"): receive more before deciding, since a client may send the
/// preface in pieces of any size.
[[nodiscard]] auto h2_preface_undecided(std::string_view first) noexcept -> bool;

/// One request stream. Shared by the loop (which holds it while nghttp2 has the stream open)
/// and its handler task (while that runs): the last of the two frees it. Fields marked
/// [mu] are read and written under the connection's mu_; [loop] only by the loop; [task] only
/// by the handler task; [once] written by the loop before the handler starts, read-only after.
struct h2_stream : std::enable_shared_from_this<h2_stream> {
    h2_stream(h2_connection& c, std::int32_t id, const request_limits& limits)
        : conn(c), id(id), parser(limits) {}

    h2_connection& conn;
    const std::int32_t id;

    // The request as received: pseudo-header fields apart, the others as HTTP/1.1 lines,
    // then the whole head rendered as HTTP/1.1 text and parsed by request_parser, so that a
    // handler sees the same request_head on both protocols. [loop], then [once]
    std::string method, path, authority, fields, text;
    std::size_t list_size = 0;  // decoded header list (RFC 9113 6.5.2 accounting)
    bool over_list = false;     // past max_header_list_size: 431, no handler
    bool has_host = false;
    request_parser parser;
    std::unique_ptr<request> req;  // over parser's head; its body reads this stream [once]
    router::match route;           // [once]
    std::uint64_t body_limit = 0;  // [loop]

    // Request body: DATA received and not yet read by the handler. Bounded by the stream's
    // flow-control window: WINDOW_UPDATE follows the handler's reads. in[in_next..] is
    // unread; a vector, since a deque allocates even empty, on every stream. [mu]
    std::vector<std::string> in;
    std::size_t in_next = 0;
    std::string reading;          // the piece read() returned last (its view's storage) [task]
    std::uint64_t delivered = 0;  // body bytes read() returned [task]
    bool read_end = false;        // read() returned the end [task]
    std::uint64_t in_total = 0;   // [loop]
    bool in_end = false;          // END_STREAM received [mu]
    bool in_failed = false;       // the stream closed before its body ended [mu]
    bool in_too_large = false;    // past body_limit: 413 [mu]
    bool reader_waiting = false;  // the handler waits for DATA [mu]
    event in_ready{event::reset_mode::automatic};

    // Response. [mu] until response_ready is posted, then [loop].
    response resp;
    std::uint64_t sent = 0;    // body bytes given to nghttp2 (text, bytes, file) [loop]
    bool submitted = false;    // HEADERS submitted [loop]
    bool stream_body = false;  // a producer writes the body through out [once after post]
    bool bodiless = false;     // HEAD, 204, 304 [loop]
    // A streamed body's next piece, taken by nghttp2 as the window allows. [mu]
    std::string out;
    std::size_t out_taken = 0;
    bool out_end = false;
    event out_room{event::reset_mode::automatic};

    bool closed = false;        // nghttp2 closed the stream (ended or reset) [mu]
    bool handler_done = false;  // [mu]
};

/// The memory of a connection's streams, kept for the next ones: a stream with its shared_ptr
/// count is larger than malloc's per-thread cache takes (1,032 bytes in glibc), so each new
/// one went through malloc's bins and each free through its coalescing. Keeps at most
/// `kept_max` blocks (about 21 KB a connection) of the one size it serves. Any thread may give a
/// block back: the last holder of a stream may be its handler task, on another worker. Outlives the
/// streams.
class h2_stream_pool {
public:
    h2_stream_pool() = default;
    h2_stream_pool(const h2_stream_pool&) = delete;
    auto operator=(const h2_stream_pool&) -> h2_stream_pool& = delete;
    ~h2_stream_pool();

    [[nodiscard]] auto take(std::size_t n) -> void*;
    void give(void* p, std::size_t n) noexcept;

    /// An allocator over the pool, for std::allocate_shared.
    template <typename T>
    struct allocator {
        using value_type = T;
        h2_stream_pool* pool;
        explicit allocator(h2_stream_pool& p) noexcept : pool(&p) {}
        // Implicit: allocate_shared rebinds the allocator to its control block's type.
        template <typename U>
        allocator(const allocator<U>& o) noexcept : pool(o.pool) {}
        [[nodiscard]] auto allocate(std::size_t n) -> T* {
            return static_cast<T*>(pool->take(n * sizeof(T)));
        }
        void deallocate(T* p, std::size_t n) noexcept { pool->give(p, n * sizeof(T)); }
        friend auto operator==(const allocator& a, const allocator& b) noexcept -> bool {
            return a.pool == b.pool;
        }
    };

private:
    static constexpr std::size_t kept_max = 16;
    std::mutex mu_;            // guards the fields below
    std::size_t size_ = 0;     // of every block kept; set by the first take
    std::vector<void*> kept_;  // capacity kept_max from the first take: give never allocates
};

/// The HTTP/2 side of a connection (see the file comment). Serves until the session ends: both
/// sides done after a GOAWAY, a protocol error, the client gone, or the connection's deadline.
class h2_connection {
public:
    /// `c` is the HTTP/1.1 connection being handed over (its deadline, watchdog, drain
    /// registration and transport stay in use); `first` the bytes it received already.
    h2_connection(connection& c, bytes first);
    h2_connection(const h2_connection&) = delete;
    auto operator=(const h2_connection&) -> h2_connection& = delete;
    ~h2_connection();

    /// Never throws.
    auto serve() -> task<void>;
    /// The session ended by its own rules (both sides done after a GOAWAY, or a GOAWAY for an
    /// error) rather than by the client leaving or the deadline: the close is staged.
    [[nodiscard]] auto ended_by_goaway() const noexcept -> bool { return ended_by_goaway_; }

    // For body_reader (from the handler's task).
    auto body_read(h2_stream& s) -> task<result<std::string_view>>;
    auto body_read_all(h2_stream& s) -> task<result<std::string>>;

    /// Set by the server's drain (under the server's lock): wakes the loop to send GOAWAY.
    event wake_{event::reset_mode::automatic};

    // nghttp2's callbacks (h2_connection.cpp), on the loop.
    auto on_begin_frame(const nghttp2_frame_hd& hd) -> int;
    auto on_begin_headers(const nghttp2_frame& f) -> int;
    auto on_header(const nghttp2_frame& f, std::string_view name, std::string_view value) -> int;
    auto on_frame_recv(const nghttp2_frame& f) -> int;
    auto on_data_chunk(std::int32_t id, std::string_view data) -> int;
    auto on_stream_close(std::int32_t id, std::uint32_t code) -> int;
    auto read_body(std::int32_t id, std::uint8_t* buf, std::size_t len, std::uint32_t* flags)
        -> ssize_t;

private:
    friend class h2_body_writer;

    // What a handler task asks of the loop.
    struct action {
        enum class kind : std::uint8_t { respond, consumed, resume, done, waiting } what;
        std::shared_ptr<h2_stream> s;
        std::size_t n = 0;
    };
    void post(action a);  // queues it and wakes the loop (any thread)

    auto run_stream(std::shared_ptr<h2_stream> s) -> task<void>;
    void start(const std::shared_ptr<h2_stream>& s);
    void apply(std::vector<action>& acts);
    void submit(h2_stream& s);
    void answer(h2_stream& s, int status, std::string_view why);
    /// Nobody reads `s`'s body from now on (its handler ended, or it never had one): what
    /// came is given back to the window, what comes is dropped as it arrives.
    void discard_body(h2_stream& s);
    auto flush() -> task<bool>;
    auto wait_input() -> task<std::optional<result<bytes>>>;
    void set_timeouts();
    void drain_check();

    connection& c_;
    bytes first_;
    nghttp2_session* session_ = nullptr;
    const socket_address* peer_ = nullptr;

    h2_stream_pool stream_pool_;  // before every holder of a stream: destroyed after them
    std::unordered_map<std::int32_t, std::shared_ptr<h2_stream>> streams_;  // open in nghttp2
    std::vector<std::shared_ptr<h2_stream>> to_start_;  // requests complete in this receive
    std::uint32_t running_ = 0;                         // handler tasks not yet done
    std::string outbuf_;

    std::int32_t max_request_id_ = 0;     // the highest stream id of a HEADERS frame
    std::deque<std::int32_t> reset_ids_;  // streams reset lately (see on_begin_frame)
    // RST_STREAM token bucket (http2_options::reset_burst, resets_per_second).
    double reset_tokens_;
    std::chrono::steady_clock::time_point reset_refilled_;
    bool goaway_ = false;  // a GOAWAY submitted (drain or an attack)
    bool ended_by_goaway_ = false;
    bool idle_ = false;          // no stream open, no handler running: keep_alive_timeout runs
    bool stalled_ = false;       // output waits for the client's window: send_timeout runs
    bool body_waiting_ = false;  // a handler waits for DATA: body_timeout runs

    std::mutex mu_;  // guards actions_ and the [mu] fields of the streams
    std::vector<action> actions_;
    scope* scope_ = nullptr;  // the handlers' scope, while serve() runs
};

}  // namespace weft::http::detail
