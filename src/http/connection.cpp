#include "connection.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>

#include "h2_connection.hpp"
#include "request_state.hpp"
#include "response_head.hpp"
#include "server_state.hpp"
#include "websocket_route.hpp"
#include "weft/core/join_handle.hpp"
#include "weft/io/buffer.hpp"
#include "weft/io/error.hpp"
#include "weft/io/file.hpp"
#include "weft/io/reactor.hpp"
#include "weft/tls/tls_byte_stream.hpp"

// NOTE: every co_await here is a statement of its own, its result named, never inside an `if`
// or `while` condition: built by g++ 12.2, the watchdog's `if (!co_await deadline_.wait(...))`
// never ends when its wait is cancelled (test_http_server hangs in its first shutdown); the
// statement form works.

namespace weft::http::detail {

namespace {

constexpr std::size_t inline_body_max = 4096;          // smaller bodies are copied into out
constexpr std::uint64_t discard_max = 256 * 1024;      // unread body drained to keep the conn
constexpr std::uint64_t linger_bytes_max = 64 * 1024;  // read after an error, then close
constexpr std::uint64_t file_chunk = 1024 * 1024;
constexpr std::size_t unsent_low_water = 64 * 1024;  // see connection::limit_unsent

// Whether a response with `status` may carry a body: not 1xx, 204 or 304 (RFC 9110 6.4.1).
constexpr auto status_has_body(int status) noexcept -> bool {
    return status >= 200 && status != 204 && status != 304;
}

auto as_bytes(std::string_view s) -> std::span<const std::byte> {
    return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

// A handler that throws is answered 500 and the connection closed (a stream body's producer
// that throws, after the head went out, ends the connection); what it threw goes to stderr, as
// Go's net/http logs a handler's panic: never dropped silently. `who`: "handler", "stream body".
void report_failure(const char* who, const request_head& head, const std::exception_ptr& e) {
    std::string what = "an exception not derived from std::exception";
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& ex) {
        what = ex.what();
    } catch (...) {
    }
    std::fprintf(stderr, "weft::http: the %s of %.*s %.*s failed: %s\n", who,
                 static_cast<int>(head.method_name().size()), head.method_name().data(),
                 static_cast<int>(std::min<std::size_t>(head.path().size(), 200)),
                 head.path().data(), what.c_str());
}

}  // namespace

auto connection::serve_socket(std::shared_ptr<server::state> st, tcp_stream s) -> task<void> {
    if (st->opts.tls) {
        return serve_tls(std::move(st), std::move(s));
    }
    return run(std::move(st), std::move(s), false);
}

// NOTE: never inlined, and its own coroutine: a frame holds every local of every branch of its
// body (g++ 12 gives each its own slot), so a plaintext connection's frame, which lives as long
// as the connection, would otherwise carry the handshake's locals unused.
[[gnu::noinline]] auto connection::serve_tls(std::shared_ptr<server::state> st, tcp_stream s)
    -> task<void> {
    auto t = co_await tls_stream::accept(std::move(s), *st->opts.tls);
    if (!t) {
        st->tls_failed.fetch_add(1, std::memory_order_relaxed);
        st->leave(nullptr);  // ended before it was registered
        co_return;
    }
    const bool h2 = t->alpn() == "h2";  // chosen by the client: HTTP/2 from the first byte
    if (h2 && !st->opts.http2.enabled) {
        st->leave(nullptr);  // a context that offers h2 to a server that does not speak it
        co_return;
    }
    co_await run(std::move(st), std::move(*t), h2);
}

auto connection::serve_stream(std::shared_ptr<server::state> st, std::unique_ptr<byte_stream> s)
    -> task<void> {
    if (st->opts.tls) {
        return serve_stream_tls(std::move(st), std::move(s));
    }
    return run(std::move(st), std::move(s), false);
}

// serve_tls over a byte_stream: the connection takes the TLS stream as a byte_stream of
// plaintext (no socket to pace: the send timeout bounds each write, as on any byte_stream),
// HTTP/1.1 or h2 as ALPN chose. NOTE: never inlined, as serve_tls.
[[gnu::noinline]] auto connection::serve_stream_tls(std::shared_ptr<server::state> st,
                                                    std::unique_ptr<byte_stream> s) -> task<void> {
    auto t = co_await tls_stream::accept(std::move(s), *st->opts.tls);
    if (!t) {
        st->tls_failed.fetch_add(1, std::memory_order_relaxed);
        st->leave(nullptr);  // ended before it was registered
        co_return;
    }
    const bool h2 = t->alpn() == "h2";
    if (h2 && !st->opts.http2.enabled) {
        st->leave(nullptr);  // a context that offers h2 to a server that does not speak it
        co_return;
    }
    std::unique_ptr<byte_stream> plain = std::make_unique<tls_byte_stream>(std::move(*t));
    co_await run(std::move(st), std::move(plain), h2, true);
}

namespace {

// Makes the awaiting coroutine's stop `s`: what every operation it awaits from then on is
// cancelled through (a task's stop is otherwise the one its awaiter or scope gave it).
struct use_stop {
    stop_state* s;
    auto await_ready() noexcept -> bool { return false; }
    template <typename P>
    auto await_suspend(std::coroutine_handle<P> h) noexcept -> bool {
        h.promise().stop_ = s;
        return false;
    }
    void await_resume() noexcept {}
};

// A connection's first bytes `held`, with more received until there are enough to tell HTTP/2's
// preface from an HTTP/1.1 request (see h2_preface_undecided).
[[gnu::noinline]] auto receive_preface_start(transport& s, bytes held, receive_counts* counts)
    -> task<result<bytes>> {
    std::string start{reinterpret_cast<const char*>(held.data()), held.size()};
    while (h2_preface_undecided(start)) {
        auto more = co_await s.receive();
        if (!more) {
            co_return more.error();
        }
        if (counts != nullptr) {
            counts->receives.fetch_add(1, std::memory_order_relaxed);
            counts->bytes.fetch_add(more->size(), std::memory_order_relaxed);
        }
        start.append(reinterpret_cast<const char*>(more->data()), more->size());
    }
    co_return bytes::copy_of(std::as_bytes(std::span{start}));
}

auto transport_of(tcp_stream& s) noexcept -> transport { return transport{s}; }
auto transport_of(tls_stream& s) noexcept -> transport { return transport{s}; }
auto transport_of(std::unique_ptr<byte_stream>& s) noexcept -> transport { return transport{*s}; }

}  // namespace

// The connection's one coroutine, whatever its stream: its frame holds the stream, the
// connection and the loop that waits, idle, for a request's first bytes, then serves requests
// for as long as bytes of one are held. Only this frame, the watchdog's and the receive's live
// across the idle wait: a request's own work is in serve_request(), whose frame (with those of
// the coroutines it awaits, which the compiler may place inside it) exists only while a
// request is served, and request_state is given back before the wait. `close_notify`: shut
// the stream down for writing at the end (TLS over a byte_stream; a tls_stream always is).
template <typename Stream>
auto connection::run(std::shared_ptr<server::state> st, Stream s, bool h2, bool close_notify)
    -> task<void> {
    stop_state* const parent = co_await weft::detail::current_stop{};
    connection c{*st, transport_of(s), parent};
    c.h2_ = h2;
    // Everything this coroutine awaits from here, and the watchdog, is cancelled through the
    // connection's stop (linked to the server's).
    co_await use_stop{&c.stop};
    if (st->enter(&c)) {
        join_handle<void> watching;
        bool watched = false;
        try {
            watching = co_await fork(c.watchdog());
            watched = true;
            for (;;) {
                if (c.pos_ == c.storage().size()) {
                    if (!c.go_idle()) {
                        break;  // draining
                    }
                    std::optional<result<bytes>> got;
                    const bool first = c.fresh_;
                    if (first) {
                        c.fresh_ = false;
                        got = c.receive_first();
                    }
                    if (!got) {  // (no co_await in a conditional expression: g++ 12 loses it)
                        c.receive_armed_ = true;
                        got = co_await c.s_.receive();
                    }
                    if (!c.wake(*got)) {
                        break;  // drained while idle, or closed by the client, reset, timeout
                    }
                    if (first && (c.h2_ || st->opts.http2.enabled)) {
                        const bool http1 = co_await c.start(**got);
                        if (!http1) {
                            break;  // served as HTTP/2, or failed before it was decided
                        }
                    } else {
                        c.block_ = std::move(**got);
                        c.rs_ = take_request_state(st->head_limits);
                    }
                }
                const auto more = co_await c.serve_request();
                if (!more) {
                    break;
                }
            }
        } catch (...) {
            // A failure of this connection (out of memory, a bug in a handler that escaped
            // handle()) ends it alone, never the server's other connections.
        }
        c.stop.request_stop();  // ends the watchdog
        if (watched) {
            co_await std::move(watching);
        }
    }
    st->leave(&c);
    co_await use_stop{parent};  // the connection's stop ends with it, here
    if constexpr (std::is_same_v<Stream, tls_stream>) {
        (void)s.shutdown_write();  // close_notify, so the client reads a clean end
    } else if constexpr (std::is_same_v<Stream, std::unique_ptr<byte_stream>>) {
        if (close_notify) {
            (void)s->shutdown_write();
        }
    }
}

connection::connection(server::state& st, transport s, stop_state* parent) noexcept
    : stop(parent), st_(st), s_(s) {}

connection::~connection() {
    if (rs_ != nullptr) {
        give_back_state();
    }
}

void connection::give_back_state() noexcept {
    give_back_request_state(rs_);
    rs_ = nullptr;
    if (receive_counts* const counts = receive_counts_for_test.load(std::memory_order_relaxed)) {
        counts->states_held.fetch_sub(1, std::memory_order_relaxed);
    }
}

auto connection::peer() noexcept -> const socket_address& {
    if (!peer_) {
        auto a = s_.peer_address();
        peer_.reset(new (std::nothrow) socket_address(a ? *a : socket_address{}));
        if (!peer_) {
            static const socket_address unknown;  // no memory to keep it: asked again next time
            return unknown;
        }
    }
    return *peer_;
}

void connection::set_deadline(std::chrono::milliseconds d) noexcept { deadline_.expires_after(d); }

void connection::clear_deadline() noexcept {
    deadline_.expires_at(deadline_timer::clock::time_point::max());  // a store: moves later
}

void connection::set_paced_deadline(std::chrono::milliseconds progress,
                                    const transfer_pace& pace) noexcept {
    using std::chrono::nanoseconds;
    const server_options& o = st_.opts;
    nanoseconds wait = progress;
    // Beyond a billion seconds of allowance the rate cannot bind (and would overflow).
    constexpr std::uint64_t allowance_max_s = 1'000'000'000;
    if (o.min_rate != 0 && pace.bytes / o.min_rate < allowance_max_s) {
        const nanoseconds earned =
            std::chrono::seconds{pace.bytes / o.min_rate} +
            nanoseconds{(pace.bytes % o.min_rate) * 1'000'000'000 / o.min_rate};
        const nanoseconds left = o.min_rate_grace + earned - pace.waited;
        wait = std::clamp(left, nanoseconds{0}, wait);
    }
    deadline_.expires_at(deadline_timer::clock::now() + wait);
}

auto connection::watch_period() const noexcept -> std::chrono::milliseconds {
    const server_options& o = st_.opts;
    return std::max(std::chrono::milliseconds{1}, std::min({o.header_timeout, o.body_timeout,
                                                            o.send_timeout, o.keep_alive_timeout}));
}

auto connection::watchdog() -> task<void> {
    for (;;) {
        // Capped at the shortest timeout from now, the wait is never armed past a deadline set
        // later, so every move of the deadline is a plain store (deadline_timer::wait).
        const auto woke = co_await deadline_.wait(deadline_timer::clock::now() + watch_period());
        if (!woke) {
            co_return;  // cancelled: the connection ended first
        }
        if (deadline_.expired()) {
            if (!lingering_) {
                st_.timed_out.fetch_add(1, std::memory_order_relaxed);
            }
            stop.request_stop();  // fails the connection's pending read or write
            co_return;
        }
        // moved later since it was armed: wait again for the new deadline
    }
}

auto connection::fill() -> task<result<void>> {
    receive_armed_ = true;
    auto got = co_await s_.receive();
    if (!got) {
        co_return got.error();
    }
    receive_counts* const counts = receive_counts_for_test.load(std::memory_order_relaxed);
    if (counts != nullptr) {
        counts->receives.fetch_add(1, std::memory_order_relaxed);
        counts->bytes.fetch_add(got->size(), std::memory_order_relaxed);
    }
    if (!in_carry_ && block_.empty()) {
        block_ = std::move(*got);  // the usual case: the request is served from this block
        co_return result<void>{};
    }
    if (counts != nullptr) {
        counts->carried.fetch_add(1, std::memory_order_relaxed);
    }
    if (head_end_ > mark_) {
        // The first receive of a body past a parsed head: the head stays where it is (see
        // storage()); the rest of the body is gathered apart from it.
        const std::string_view rest = storage().substr(pos_);
        if (in_carry_) {
            rs_->carry[carry_ ^ 1].assign(rest);
            carry_ ^= 1;
        } else {
            rs_->carry[carry_].assign(rest);
            rs_->head_block = std::move(block_);
            block_ = bytes{};
            in_carry_ = true;
        }
        mark_ = head_end_ = pos_ = 0;
        head_apart_ = true;
    } else if (!in_carry_) {
        rs_->carry[carry_].assign(storage().substr(mark_));
        pos_ -= mark_;
        head_end_ -= mark_;
        mark_ = 0;
        in_carry_ = true;
        block_ = bytes{};
    } else {
        std::string& carry = rs_->carry[carry_];
        if (pos_ > head_end_) {  // body bytes already handed out
            carry.erase(head_end_, pos_ - head_end_);
            pos_ = head_end_;
        }
        if (mark_ > 0) {
            carry.erase(0, mark_);
            pos_ -= mark_;
            head_end_ -= mark_;
            mark_ = 0;
        }
    }
    rs_->carry[carry_].append(reinterpret_cast<const char*>(got->data()), got->size());
    co_return result<void>{};
}

void connection::release_input() noexcept {
    block_ = bytes{};
    if (rs_ != nullptr) {
        rs_->head_block = bytes{};
    }
    in_carry_ = false;
    head_apart_ = false;
}

// A new connection's first bytes, read at once on io_uring when they are already there (a
// client that sends its request as it connects: ab, curl, a browser; by the time the worker
// runs the new connection they have mostly arrived). nullopt: nothing yet, wait in receive().
// A connection that gets its one request this way and closes after the response never arms
// the stream's multishot receive (a poll in the kernel, and on close a cancel and a completion
// to reap before the socket is released). On epoll, receive() reads first anyway.
auto connection::receive_first() -> std::optional<result<bytes>> {
    if (current_io_backend() != io_backend::io_uring || !s_.kernel_socket()) {
        return std::nullopt;
    }
    constexpr std::size_t chunk = 4096;  // what a receive() gives at most
    buffer b{chunk};
    for (;;) {
        const ssize_t n = ::recv(s_.native_handle(), b.prepare(chunk).data(), chunk, MSG_DONTWAIT);
        if (n > 0) {
            b.commit(static_cast<std::size_t>(n));
            return result<bytes>(std::move(b).freeze());
        }
        if (n == 0) {
            return result<bytes>(make_error_code(io_errc::eof));
        }
        if (errno == EINTR) {
            continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            return std::nullopt;
        }
        return result<bytes>(std::error_code(errno, std::system_category()));
    }
}

void connection::add_out(std::string_view s) {
    if (s.size() <= inline_body_max) {
        if (!rs_->segs.empty() && rs_->segs.back().ptr == nullptr) {
            rs_->segs.back().len += s.size();
        } else {
            rs_->segs.push_back({nullptr, rs_->out.size(), s.size()});
        }
        rs_->out.append(s);
    } else {
        rs_->segs.push_back({s.data(), 0, s.size()});
    }
}

auto connection::flush(int flags) -> task<result<void>> {
    if (rs_->segs.empty()) {
        co_return result<void>{};
    }
    // Up to 16 pieces on the stack; a longer list (many large pipelined bodies) allocates.
    std::span<const std::byte> small[16];
    std::vector<std::span<const std::byte>> large;
    std::span<std::span<const std::byte>> pieces;
    if (rs_->segs.size() <= std::size(small)) {
        pieces = {small, rs_->segs.size()};
    } else {
        large.resize(rs_->segs.size());
        pieces = large;
    }
    for (std::size_t i = 0; i < rs_->segs.size(); ++i) {
        const out_segment& g = rs_->segs[i];
        const char* p = g.ptr != nullptr ? g.ptr : rs_->out.data() + g.off;
        pieces[i] = as_bytes({p, g.len});
    }
    transfer_pace pace;
    const result<void> r = co_await write_paced(pieces, flags, pace);
    st_.writes.fetch_add(1, std::memory_order_relaxed);
    rs_->out.clear();
    rs_->segs.clear();
    rs_->held.clear();
    pending_ = 0;
    co_return r;
}

// Each sendmsg goes from here, without waiting, and takes what the socket has room for (nearly
// always all of a response); only a full socket waits, for room. Each wait is the client's:
// it gets send_timeout to take more, and the waits of one transfer together keep min_rate.
auto connection::write_paced(std::span<const std::span<const std::byte>> pieces,
                             int flags,
                             transfer_pace& pace) -> task<result<void>> {
    if (s_.encrypted()) {
        // tls_stream sends the records without waiting and leaves each wait for room to this
        // pacer: the same progress timeout and minimum rate as the sendmsg calls below, counted
        // in ciphertext bytes the socket took.
        class room_pacer final : public tls_stream::pacer {
        public:
            room_pacer(connection& c, transfer_pace& pace) noexcept : c_(c), pace_(pace) {}
            void sent(std::size_t n) noexcept override { pace_.bytes += n; }
            auto wait_for_room() -> task<result<void>> override { return c_.wait_for_room(pace_); }

        private:
            connection& c_;
            transfer_pace& pace_;
        };
        std::size_t total = 0;
        for (const auto& piece : pieces) {
            total += piece.size();
        }
        if (total > unsent_low_water) {
            limit_unsent();  // before the first send, as below: see limit_unsent
        }
        room_pacer p{*this, pace};
        co_return co_await s_.write_all_paced(pieces, p);
    }
    if (!s_.kernel_socket()) {
        // A byte_stream (no socket to wait on) writes by itself: the send timeout bounds the
        // whole write.
        std::size_t total = 0;
        for (const auto& piece : pieces) {
            total += piece.size();
        }
        set_deadline(st_.opts.send_timeout);
        auto r = co_await s_.write_all(pieces);
        clear_deadline();
        if (r) {
            pace.bytes += total;
        }
        co_return r;
    }
    // Up to 16 pieces on the stack; a longer list (many large pipelined bodies) allocates.
    iovec small[16];
    std::vector<iovec> large;
    std::span<iovec> iov;
    if (pieces.size() <= std::size(small)) {
        iov = {small, pieces.size()};
    } else {
        large.resize(pieces.size());
        iov = large;
    }
    std::size_t n = 0;
    std::size_t total = 0;
    for (const auto& p : pieces) {
        if (!p.empty()) {
            iov[n++] = iovec{const_cast<std::byte*>(p.data()), p.size()};
            total += p.size();
        }
    }
    if (total > unsent_low_water) {
        limit_unsent();
    }
    std::size_t first = 0;
    while (first < n) {
        msghdr msg{};
        msg.msg_iov = iov.data() + first;
        msg.msg_iovlen = std::min<std::size_t>(n - first, IOV_MAX);
        const ssize_t sent =
            ::sendmsg(s_.native_handle(), &msg, flags | MSG_DONTWAIT | MSG_NOSIGNAL);
        if (sent > 0) {
            pace.bytes += static_cast<std::uint64_t>(sent);
            auto left = static_cast<std::size_t>(sent);
            while (left > 0 && left >= iov[first].iov_len) {
                left -= iov[first].iov_len;
                ++first;
            }
            if (left > 0) {
                iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
                iov[first].iov_len -= left;
            }
            continue;
        }
        if (sent < 0 && errno == EINTR) {
            continue;
        }
        if (sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            co_return std::error_code{errno, std::system_category()};
        }
        const auto room = co_await wait_for_room(pace);
        if (!room) {
            co_return room.error();
        }
    }
    co_return result<void>{};
}

// A full socket reports room again only once a large part of its buffer (half of it, some MiB
// once autotuned) has drained: a slow but steady reader would look idle for longer than the
// send timeout between wake-ups, and the bytes the kernel took would overstate what the client
// read by as much. So before a write larger than unsent_low_water (and before any wait), the
// socket is told to report room as soon as its unsent bytes fall below unsent_low_water
// (TCP_NOTSENT_LOWAT): each bit the client takes is then seen as progress, and the kernel holds
// little more than that of a response unsent. One setsockopt per connection that needs it;
// none for small responses.
void connection::limit_unsent() noexcept {
    if (!low_water_set_ && s_.has_socket()) {
        low_water_set_ = true;
        const int low_water = static_cast<int>(unsent_low_water);
        (void)::setsockopt(s_.native_handle(), IPPROTO_TCP, TCP_NOTSENT_LOWAT, &low_water,
                           sizeof low_water);
    }
}

auto connection::wait_for_room(transfer_pace& pace) -> task<result<void>> {
    limit_unsent();
    set_paced_deadline(st_.opts.send_timeout, pace);
    const auto since = deadline_timer::clock::now();
    const auto room = co_await s_.wait_writable();
    pace.waited += deadline_timer::clock::now() - since;
    clear_deadline();
    co_return room;
}

void connection::write_head(
    const response& r, std::uint64_t length, bool chunked, bool keep, std::string_view small_body) {
    const std::size_t start = rs_->out.size();
    const std::size_t len = append_response_head(rs_->out, r, st_.opts.server_name,
                                                 {.length = length,
                                                  .chunked = chunked,
                                                  .keep = keep,
                                                  .head_request = head_request_,
                                                  .version_minor = version_minor_},
                                                 small_body);
    if (!rs_->segs.empty() && rs_->segs.back().ptr == nullptr) {
        rs_->segs.back().len += len;
    } else {
        rs_->segs.push_back({nullptr, start, len});
    }
}

auto connection::body_read() -> task<result<std::string_view>> {
    if (rs_->body.done()) {
        co_return std::string_view{};
    }
    if (rs_->body.error() != parse_error::none) {
        co_return std::error_code{rs_->body.error()};
    }
    if (continue_pending_) {
        continue_pending_ = false;
        add_out("HTTP/1.1 100 Continue\r\n\r\n");  // after the responses still pending
        if (auto r = co_await flush(); !r) {
            co_return r.error();
        }
    }
    for (;;) {
        const body_step s = rs_->body.decode(storage().substr(pos_));
        pos_ += s.consumed;
        switch (s.status) {
            case body_status::data:
                co_return s.data;
            case body_status::trailer:
                continue;  // trailers are read and dropped: nothing in weft uses them
            case body_status::done:
                co_return std::string_view{};
            case body_status::error:
                co_return std::error_code{rs_->body.error()};
            case body_status::need_more:
                break;
        }
        rs_->body_pace.bytes = rs_->body.received();
        set_paced_deadline(st_.opts.body_timeout, rs_->body_pace);
        const auto since = deadline_timer::clock::now();
        const auto got = co_await fill();
        rs_->body_pace.waited += deadline_timer::clock::now() - since;
        clear_deadline();  // the handler's own time is not limited
        if (!got) {
            co_return got.error();
        }
    }
}

// Grows with the bytes as they arrive: never by the length the client announced, which a
// client may announce and never send.
auto connection::body_read_all() -> task<result<std::string>> {
    std::string all;
    for (;;) {
        auto piece = co_await body_read();
        if (!piece) {
            co_return piece.error();
        }
        if (piece->empty()) {
            co_return all;
        }
        all.append(*piece);
    }
}

// After the handler: the rest of the body is read and dropped, so that the next request on
// the connection starts where it should. False: the connection must close instead (a body
// the client was told to hold back, a large remainder, a framing error, a dead socket).
[[gnu::noinline]] auto connection::finish_body() -> task<bool> {
    if (rs_->body.done()) {
        co_return true;
    }
    if (continue_pending_) {
        co_return false;  // the client waits for 100 Continue: it has not sent the body
    }
    while (!rs_->body.done()) {
        if (rs_->body.received() > discard_max || rs_->body.error() != parse_error::none) {
            co_return false;
        }
        auto piece = co_await body_read();
        if (!piece) {
            co_return false;
        }
    }
    co_return true;
}

[[gnu::noinline]] auto connection::send_file(file_body& f) -> task<result<void>> {
    // The head with MSG_MORE: it leaves in the first segment of the file's data instead of a
    // segment of its own that the client wakes up for (nginx gets the same with tcp_nopush).
    if (auto r = co_await flush(f.length > 0 ? MSG_MORE : 0); !r) {
        co_return r;
    }
    if (f.length > unsent_low_water) {
        limit_unsent();
    }
    transfer_pace pace;
    std::uint64_t left = f.length;
    auto off = static_cast<off_t>(f.offset);
    if (!s_.kernel_socket()) {
        // No sendfile over TLS (kTLS is not used) or a byte_stream: read a chunk, write it.
        std::vector<std::byte> chunk(std::min<std::uint64_t>(left, 64 * 1024));
        while (left > 0) {
            const ssize_t n =
                ::pread(f.fd, chunk.data(), std::min<std::size_t>(chunk.size(), left), off);
            if (n <= 0) {
                co_return std::error_code{n == 0 ? EIO : errno, std::system_category()};
            }
            const std::span<const std::byte> piece[] = {
                std::span{chunk.data(), static_cast<std::size_t>(n)}};
            auto r = co_await write_paced(piece, 0, pace);
            if (!r) {
                co_return r;
            }
            left -= static_cast<std::uint64_t>(n);
            off += n;
        }
        co_return result<void>{};
    }
    while (left > 0) {
        const ssize_t n = weft::detail::sendfile_quiet(
            s_.native_handle(), f.fd, &off, static_cast<std::size_t>(std::min(left, file_chunk)));
        if (n > 0) {
            left -= static_cast<std::uint64_t>(n);
            pace.bytes += static_cast<std::uint64_t>(n);
            continue;
        }
        if (n == 0) {
            co_return std::error_code{EIO, std::system_category()};  // the file is shorter
        }
        if (errno == EINTR) {
            continue;
        }
        if (errno != EAGAIN) {
            co_return std::error_code{errno, std::system_category()};
        }
        const auto room = co_await wait_for_room(pace);
        if (!room) {
            co_return room;
        }
    }
    co_return result<void>{};
}

namespace {

// Writes a streamed body: chunked framing when the length is unknown (HTTP/1.1). The writes of
// one body are one transfer for the send timeouts (connection::write_paced).
class stream_writer final : public body_writer {
public:
    stream_writer(connection& c, bool chunked) : c_(c), chunked_(chunked) {}
    auto write(std::string_view data) -> task<result<void>> override {
        if (data.empty()) {
            co_return result<void>{};
        }
        if (!chunked_) {
            const std::span<const std::byte> pieces[] = {as_bytes(data)};
            co_return co_await c_.write_paced(pieces, 0, pace_);
        }
        char size[24];
        char* p = std::to_chars(size, size + 20, data.size(), 16).ptr;
        *p++ = '\r';
        *p++ = '\n';
        const std::span<const std::byte> pieces[] = {
            as_bytes({size, static_cast<std::size_t>(p - size)}), as_bytes(data), as_bytes("\r\n")};
        co_return co_await c_.write_paced(pieces, 0, pace_);
    }
    auto end() -> task<result<void>> {
        const std::span<const std::byte> pieces[] = {as_bytes("0\r\n\r\n")};
        co_return co_await c_.write_paced(pieces, 0, pace_);
    }

private:
    connection& c_;
    bool chunked_;
    transfer_pace pace_;
};

}  // namespace

// Sends the pending output, then a streamed body. False: the connection is done. A producer
// that throws is reported as a throwing handler is; its body is left unfinished (a chunked one
// unterminated, a sized one short), which tells the client.
[[gnu::noinline]] auto connection::send_stream(stream_body& body, bool chunked) -> task<bool> {
    const auto head_sent = co_await flush();
    if (!head_sent) {
        co_return false;
    }
    stream_writer w{*this, chunked};
    result<void> produced;
    std::exception_ptr failure;
    try {
        produced = co_await body.fn(w);
    } catch (...) {
        failure = std::current_exception();  // reported below (no co_await in a handler block)
    }
    if (failure) {
        if (!stop.stop_requested()) {
            report_failure("stream body", rs_->parser.head(), failure);
        }
        co_return false;
    }
    if (!produced) {
        co_return false;  // a chunked body left unterminated tells the client
    }
    if (chunked) {
        const auto ended = co_await w.end();
        if (!ended) {
            co_return false;
        }
    }
    co_return true;
}

// Adds a response whose body is in memory (none, a string, bytes) to the pending output: a
// plain function, as nearly every response is one of these (no coroutine frame per response).
void connection::queue(response& r, bool keep) {
    st_.requests.fetch_add(1, std::memory_order_relaxed);
    // No body bytes after the head of a 1xx, 204 or 304 or of an answer to HEAD: the next
    // response on the connection starts right after it.
    const bool bodiless = head_request_ || !status_has_body(r.status());
    bool hold = false;
    if (r.form() == body_form::text) {
        const std::string& s = r.body_text();
        if (bodiless) {
            write_head(r, s.size(), false, keep);
        } else if (s.size() <= inline_body_max) {
            write_head(r, s.size(), false, keep, s);  // copied after the head
        } else {
            write_head(r, s.size(), false, keep);
            add_out(s);
            hold = true;
        }
    } else if (r.form() == body_form::bytes) {
        const bytes& b = r.body_bytes();
        write_head(r, b.size(), false, keep);
        if (!bodiless) {
            add_out({reinterpret_cast<const char*>(b.data()), b.size()});
            hold = b.size() > inline_body_max;
        }
    } else {  // body_form::none
        write_head(r, 0, false, keep);
    }
    ++pending_;
    if (hold) {
        rs_->held.push_back(std::move(r));  // a large body is sent from where it is: keep it
    }
}

// Sends a response with a file or stream body: the pending output, then the body. False: the
// connection is done (a failed write, or a body that could only be delimited by closing).
[[gnu::noinline]] auto connection::send(response& r, bool keep) -> task<bool> {
    st_.requests.fetch_add(1, std::memory_order_relaxed);
    const bool bodiless = head_request_ || !status_has_body(r.status());  // as in queue()
    if (r.form() == body_form::file) {
        file_body& f = r.body_file();
        write_head(r, f.length, false, keep);
        if (!bodiless) {
            const auto file_sent = co_await send_file(f);
            if (!file_sent) {
                co_return false;
            }
        }
    } else {  // body_form::stream
        if (continue_pending_) {
            // The producer may read the body, which the client holds back until told: the
            // interim response goes before the final one, whether or not it reads.
            continue_pending_ = false;
            add_out("HTTP/1.1 100 Continue\r\n\r\n");
        }
        stream_body& sb = r.body_stream();
        const bool chunked = !sb.length && version_minor_ == 1;
        if (!sb.length && !chunked && !bodiless) {
            keep = false;  // HTTP/1.0 without a length: the close ends the body
        }
        write_head(r, sb.length.value_or(UINT64_MAX), chunked, keep);
        if (!bodiless) {  // the producer is not run for a body that is not sent
            const auto stream_sent = co_await send_stream(sb, chunked);
            if (!stream_sent) {
                co_return false;
            }
        }
    }
    ++pending_;
    co_return keep;
}

[[gnu::noinline]] auto connection::reject(int status, std::string_view why) -> task<void> {
    st_.rejected.fetch_add(1, std::memory_order_relaxed);
    std::string body{why};
    body += '\n';
    response r = response::text(std::move(body), status);
    queue(r, false);
    const auto sent = co_await flush();
    if (!sent) {
        co_return;
    }
    co_await linger_close();
}

auto connection::linger_close() -> task<void> {
    // Closing with unread bytes in the socket sends RST, which may destroy what was sent in
    // the client's buffer: half-close, then read and drop for a moment.
    (void)s_.shutdown_write();
    lingering_ = true;
    set_deadline(st_.opts.linger_timeout);
    release_input();
    std::uint64_t dropped = 0;
    while (dropped < linger_bytes_max) {
        auto got = co_await s_.receive();
        if (!got) {
            break;
        }
        dropped += got->size();
    }
}

// Nothing of a request is held, nothing is left to write (serve_request flushed when it
// consumed the last byte): drops the buffers and the request state, and marks the connection
// idle under the keep-alive timeout. False: the server is draining (the connection ends).
auto connection::go_idle() noexcept -> bool {
    release_input();
    mark_ = head_end_ = pos_ = 0;
    if (rs_ != nullptr) {
        give_back_state();
    }
    set_deadline(st_.opts.keep_alive_timeout);
    // seq_cst, with shutdown()'s store of draining before it looks at the states: either it
    // sees this connection idle and closes it, or this sees draining.
    state.store(phase::idle, std::memory_order_seq_cst);
    return !st_.draining.load(std::memory_order_seq_cst);
}

// The idle wait ended with `got`: the connection is busy again, and a receive is counted as
// it arrives (a test paces its writes by these counts). False: it ends (the drain closed it
// while it was idle; the client closed it between requests, reset it, or it timed out).
auto connection::wake(const result<bytes>& got) noexcept -> bool {
    phase expected = phase::idle;
    if (!state.compare_exchange_strong(expected, phase::busy, std::memory_order_seq_cst)) {
        return false;
    }
    if (!got) {
        return false;
    }
    if (receive_counts* const counts = receive_counts_for_test.load(std::memory_order_relaxed)) {
        counts->receives.fetch_add(1, std::memory_order_relaxed);
        counts->bytes.fetch_add(got->size(), std::memory_order_relaxed);
        counts->states_held.fetch_add(1, std::memory_order_relaxed);
    }
    return true;
}

// A connection's first bytes `got` (taken from the caller) where it may speak HTTP/2 (chosen by
// ALPN, or the server takes HTTP/2 by its preface): serves it as HTTP/2 to its end (false), or
// holds the bytes as an HTTP/1.1 request's (true). NOTE: never inlined, and a coroutine of its
// own, so that run()'s frame, which lives as long as the connection, holds none of its locals.
[[gnu::noinline]] auto connection::start(bytes& got) -> task<bool> {
    if (!h2_ && h2_preface_undecided({reinterpret_cast<const char*>(got.data()), got.size()})) {
        set_deadline(st_.opts.header_timeout);  // a request's first bytes are held
        receive_counts* const counts = receive_counts_for_test.load(std::memory_order_relaxed);
        auto more = co_await receive_preface_start(s_, std::move(got), counts);
        if (!more) {
            if (counts != nullptr) {
                counts->states_held.fetch_sub(1, std::memory_order_relaxed);
            }
            co_return false;
        }
        got = std::move(*more);
    }
    if (h2_ || h2_preface_start({reinterpret_cast<const char*>(got.data()), got.size()})) {
        co_await serve_h2(std::move(got));
        co_return false;
    }
    block_ = std::move(got);
    rs_ = take_request_state(st_.head_limits);
    co_return true;
}

// One request, from bytes of it held at pos_: the head, the handler, the response. False:
// the connection is done. NOTE: never inlined, so that its frame is never placed inside
// run()'s, which lives across the idle wait (clang's coroutine elision would).
[[gnu::noinline]] auto connection::serve_request() -> task<bool> {
    const server_options& o = st_.opts;
    rs_->parser.reset();
    if (head_apart_) {  // the previous request's head, held apart while it was served
        rs_->head_block = bytes{};
        head_apart_ = false;
    }
    mark_ = head_end_ = pos_;
    // From the request's first byte (held now) until its head is complete, whatever is written
    // meanwhile: each wait for more of the head is under this one deadline.
    rs_->header_deadline = deadline_timer::clock::now() + o.header_timeout;
    for (;;) {
        const parse_status ps = rs_->parser.parse(storage().substr(mark_));
        if (ps == parse_status::complete) {
            break;
        }
        if (ps == parse_status::error) {
            version_minor_ = 1;
            co_await reject(status_of(rs_->parser.error()), describe(rs_->parser.error()));
            co_return false;
        }
        const auto answered = co_await flush();
        if (!answered) {  // answer pipelined requests before waiting for more
            co_return false;
        }
        deadline_.expires_at(rs_->header_deadline);
        auto got = co_await fill();
        if (!got) {
            co_return false;  // closed by the client within a request, reset, timeout
        }
    }
    request_head& head = rs_->parser.head();
    head_end_ = mark_ + head.size();
    pos_ = head_end_;
    version_minor_ = static_cast<std::uint8_t>(head.version_minor());
    head_request_ = head.method() == method::head;
    if (head.method() == method::connect) {
        // No handler can take a tunnel (weft has no API for one), and a 2xx would keep the
        // connection as HTTP while the client starts its tunnel (RFC 9110 9.3.6): refused and
        // closed, so bytes the client sent for the tunnel are never read as requests.
        co_await reject(501, "CONNECT is not supported");
        co_return false;
    }

    // ---- route, body framing, handler ---------------------------------------------
    request req{&head, nullptr, this};  // peer(): asked of the connection when wanted
    const router::match m = st_.routes.find(head.method_name(), head.path(), req);
    rs_->body_limits = o.limits;
    if (m.options != nullptr && m.options->body_limit) {
        rs_->body_limits.body = *m.options->body_limit;
    }
    const body_framing framing = head.framing();
    if (framing.kind == body_kind::content_length && framing.length > rs_->body_limits.body) {
        co_await reject(413, describe(parse_error::body_too_large));
        co_return false;
    }
    rs_->body =
        framing.kind == body_kind::none ? body_decoder{} : body_decoder{framing, rs_->body_limits};
    continue_pending_ = head.expect_continue() && framing.kind != body_kind::none;
    rs_->body_pace = {};
    close_ = !head.keep_alive();
    const bool client_closes = close_;  // HTTP/1.0 without keep-alive, or Connection: close

    clear_deadline();
    const auto started = st_.request_started();
    trace::span span = st_.request_span(m.route, head);
    if (span.recording()) {
        req.trace_ = &span.context();
    }
    response r;
    bool failed = false;
    std::exception_ptr failure;
    if (m.status == 404) {
        r = response::text("Not Found\n", 404);
    } else if (m.status == 405) {
        r = response::text("Method Not Allowed\n", 405);
        r.set_header("Allow", m.allow);
    } else {
        try {
            r = co_await st_.call(req, *m.h);
        } catch (...) {
            failed = true;  // answered below (no co_await in a handler block)
            failure = std::current_exception();
        }
    }
    if (!failed && r.status() == 101 && m.h->target<websocket_route>() != nullptr) {
        // A WebSocket route's 101: the socket is the route's from here (websocket_route.hpp).
        const auto ok10 = co_await flush();  // the answers to requests pipelined before it
        if (ok10) {
            co_await m.h->target<websocket_route>()->serve(st_, r, s_, storage().substr(pos_));
        }
        co_return false;
    }
    if (!failed && (r.status() < 200 || r.status() > 999)) {
        // A 1xx is interim: the client would take the next response for this one's.
        failed = true;
        failure = std::make_exception_ptr(std::logic_error("status " + std::to_string(r.status()) +
                                                           " is not a final response status"));
    }
    if (failed && rs_->body.error() == parse_error::none) {
        if (stop.stop_requested()) {
            co_return false;  // timed out or drained: the socket is not ours to answer on
        }
        report_failure("handler", head, failure);
        r = response::text("Internal Server Error\n", 500);
        close_ = true;
    }
    if (rs_->body.error() != parse_error::none) {
        co_await reject(status_of(rs_->body.error()), describe(rs_->body.error()));
        co_return false;
    }
    st_.request_done(m.route, head, r.status(), started);
    server::state::end_request_span(span, r.status());
    // A stream's producer may read the body as it sends: what it leaves is skipped after it.
    const bool streamed = r.form() == body_form::stream;
    if (!streamed && !rs_->body.done()) {  // the usual case (no body, all of it read): no wait
        const auto body_drained = co_await finish_body();
        if (!body_drained) {
            close_ = true;
        }
    }
    if (r.closes_connection()) {
        close_ = true;  // the handler's Connection: close (response.hpp)
    }
    const bool keep = !close_ && !st_.draining.load(std::memory_order_acquire);
    bool stays_open = keep;
    if (r.form() == body_form::file || streamed) {
        stays_open = co_await send(r, keep);
    } else {
        queue(r, keep);
    }
    if (stays_open && streamed && !rs_->body.done()) {
        stays_open = co_await finish_body();  // false: closed after a complete response
    }
    if (!stays_open) {
        // The last response: sent at once (a fresh socket takes a few hundred bytes whole),
        // and closed without a shutdown first: with nothing left unread, close sends the FIN
        // (and with bytes unread it resets, shutdown or not). When the client asked for the
        // close and sent nothing past this request, the response goes with MSG_MORE: TCP holds
        // it until the close sets FIN on it, so response and FIN leave as one segment instead
        // of two (and the client acknowledges both at once). Not when the server chose the
        // close (an unread body, a drain): the client may still be sending, and a close with
        // bytes unread resets, which would discard a held response. The hold is short: the
        // socket is closed as soon as this returns, or shut down for writing first where a
        // close would wait for the ring (and TCP's probe timer would send held data after its
        // minimum RTO, 200 ms, in any case).
        const bool fin_with_it = client_closes && rs_->body.done() && pos_ == storage().size();
        (void)co_await flush(fin_with_it ? MSG_MORE : 0);
        if (fin_with_it && receive_armed_ && current_io_backend() == io_backend::io_uring) {
            (void)s_.shutdown_write();  // the FIN, and the held response, now: see receive_armed_
        }
        co_return false;
    }
    // ---- pipelining: answer what is already here before writing -------------------
    if (pos_ == storage().size() || pending_ >= o.max_pipelined) {
        const auto flushed = co_await flush();
        if (!flushed) {
            co_return false;
        }
    }
    co_return true;
}

}  // namespace weft::http::detail

namespace weft::http {

namespace {
auto no_body() -> task<result<std::string_view>> { co_return std::string_view{}; }
auto no_body_all() -> task<result<std::string>> { co_return std::string{}; }
}  // namespace

auto body_reader::read() -> task<result<std::string_view>> {
    if (h2_ != nullptr) {
        return h2_->conn.body_read(*h2_);
    }
    return c_ != nullptr ? c_->body_read() : no_body();
}
auto body_reader::read_all() -> task<result<std::string>> {
    if (h2_ != nullptr) {
        return h2_->conn.body_read_all(*h2_);
    }
    return c_ != nullptr ? c_->body_read_all() : no_body_all();
}
auto body_reader::received() const noexcept -> std::uint64_t {
    if (h2_ != nullptr) {
        return h2_->delivered;
    }
    return c_ != nullptr ? c_->body_received() : 0;
}
auto body_reader::done() const noexcept -> bool {
    if (h2_ != nullptr) {
        return h2_->read_end;
    }
    return c_ == nullptr || c_->body_done();
}

auto request::peer() const noexcept -> const socket_address& {
    return body_.c_ != nullptr ? body_.c_->peer() : *peer_;
}

}  // namespace weft::http
