#pragma once

// One HTTP/2 connection of client_pool, on nghttp2's client session: requests go out as
// streams, concurrently, and each request's task awaits its own stream.
//
// Threads: the session is used only by the connection's reader task (run()), spawned when the
// connection opens and ended when it closes. A request's task (any worker) reaches the session
// only through the queue of actions (under mu_), after which it sets wake_: the reader takes
// the actions, applies them to the session and writes. The reader waits either for bytes or
// for a wake-up (the other wait cancelled), keeping one operation at a time on the
// tls_stream, which it requires.
//
// Lifetime: the reader holds the connection (shared_ptr) until it ends; a request holds its
// stream and the connection while it runs, so either may outlive the pool's reference.

#include <nghttp2/nghttp2.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "response_reader.hpp"
#include "weft/core/result.hpp"
#include "weft/core/task.hpp"
#include "weft/http/client.hpp"
#include "weft/io/bytes.hpp"
#include "weft/sync/event.hpp"
#include "weft/tls/tls_stream.hpp"

namespace weft::http::detail {

class h2_client_connection;

/// One request's stream. [mu] fields are read and written under the connection's mu_;
/// [reader] ones only by the reader.
struct h2_client_stream {
    // The request, set before it is posted, read by the reader once when it submits.
    std::vector<std::pair<std::string, std::string>> fields;  // pseudo-headers first
    bool has_body = false;

    std::int32_t id = 0;         // [reader] 0 until submitted
    std::uint64_t received = 0;  // [reader] body bytes, against the limit

    // [mu] The response.
    client_response head;
    bool head_done = false;
    std::deque<std::string> in;  // body pieces not read yet
    /// The piece read() returned last (the request's task only): apart from `out`, which the
    /// reader may still be sending from when a response came before the whole request body.
    std::string reading;
    bool in_end = false;
    bool closed = false;
    /// Why the stream failed: connection_reset (reset by the server), message_size, the
    /// transport's; client_errc::unprocessed when the server did not process it (REFUSED_STREAM,
    /// or above a GOAWAY's last stream).
    std::error_code error;

    // [mu] The request body: the piece given to nghttp2 and how much of it it took.
    std::string out;
    std::size_t out_taken = 0;
    bool out_end = false;

    /// Set on every change the request's task may wait for (one waiter: that task).
    event changed{event::reset_mode::automatic};
};

class h2_client_connection : public std::enable_shared_from_this<h2_client_connection> {
public:
    struct settings {
        response_limits limits;
        std::chrono::milliseconds read_timeout{};
        std::chrono::milliseconds idle_timeout{};
    };

    h2_client_connection(tls_stream s, settings o);
    ~h2_client_connection();
    h2_client_connection(const h2_client_connection&) = delete;
    auto operator=(const h2_client_connection&) -> h2_client_connection& = delete;

    /// Spawns the reader (on the calling worker's runtime).
    void start();
    /// False once the connection is closing (GOAWAY either way, an error, close()): new
    /// requests go to another connection.
    [[nodiscard]] auto usable() const -> bool;
    /// Ends the connection: GOAWAY, then the reader ends; requests in flight fail.
    void close();

    /// Sends a request (fields: pseudo-headers first); `body`, if set, is produced piece by
    /// piece into the stream as the windows take it. Returns once the response head came.
    [[nodiscard]] auto exchange(std::shared_ptr<h2_client_stream> s,
                                const std::function<task<result<std::string_view>>()>* body)
        -> task<result<void>>;
    /// The next piece of the response body (empty at the end), within read_timeout.
    [[nodiscard]] auto read(const std::shared_ptr<h2_client_stream>& s)
        -> task<result<std::string_view>>;
    /// The request is over (read to its end or abandoned): reset if still open.
    void finish(const std::shared_ptr<h2_client_stream>& s);

    // nghttp2's callbacks (the reader only).
    auto on_begin_headers(const nghttp2_frame& f) -> int;
    auto on_header(const nghttp2_frame& f, std::string_view name, std::string_view value) -> int;
    auto on_frame_recv(const nghttp2_frame& f) -> int;
    auto on_data_chunk(std::int32_t id, std::string_view data) -> int;
    auto on_stream_close(std::int32_t id, std::uint32_t code) -> int;
    auto read_body(std::int32_t id, std::uint8_t* buf, std::size_t len, std::uint32_t* flags)
        -> ssize_t;

private:
    struct action {
        enum class kind : std::uint8_t { submit, resume, consumed, cancel, close } what;
        std::shared_ptr<h2_client_stream> s;
        std::size_t n = 0;
    };

    void post(action a);
    void apply(std::vector<action>& acts);
    void submit(const std::shared_ptr<h2_client_stream>& s);
    void fail(h2_client_stream& s, std::error_code ec);
    auto flush() -> task<bool>;
    auto wait_input() -> task<std::optional<result<bytes>>>;
    auto run(std::shared_ptr<h2_client_connection> self) -> task<void>;
    auto wait_change(h2_client_stream& s) -> task<result<void>>;

    tls_stream s_;
    settings o_;
    nghttp2_session* session_ = nullptr;
    std::string outbuf_;                                                           // [reader]
    std::unordered_map<std::int32_t, std::shared_ptr<h2_client_stream>> streams_;  // [reader]
    std::vector<std::shared_ptr<h2_client_stream>> waiting_;  // [reader] until SETTINGS came
    bool settings_seen_ = false;                              // [reader]
    std::error_code closed_with_;                             // [reader] why the connection ended

    mutable std::mutex mu_;  // guards actions_, usable_ and the [mu] fields of the streams
    std::vector<action> actions_;
    bool usable_ = true;
    bool ended_ = false;  // the reader ended: nothing posted is applied
    event wake_{event::reset_mode::automatic};
};

}  // namespace weft::http::detail
