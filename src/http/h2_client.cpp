#include "h2_client.hpp"

#include <algorithm>
#include <cstring>
#include <new>

#include "char_class.hpp"
#include "weft/core/join_handle.hpp"
#include "weft/core/when_any.hpp"
#include "weft/http/client_pool.hpp"
#include "weft/io/error.hpp"
#include "weft/sched/timer.hpp"

namespace weft::http::detail {

namespace {

constexpr std::size_t write_max = 64 * 1024;  // gathered from nghttp2 per write
// A stream's receive window, and the connection's: a response body larger than these is
// paced by the window updates sent as the request's task reads it.
constexpr std::int32_t stream_window = 256 * 1024;
constexpr std::int32_t connection_window = 1024 * 1024;

auto as_view(const std::uint8_t* p, std::size_t n) -> std::string_view {
    return {reinterpret_cast<const char*>(p), n};
}

auto conn_of(void* user) -> h2_client_connection& {
    return *static_cast<h2_client_connection*>(user);
}

auto callbacks() -> const nghttp2_session_callbacks* {
    static nghttp2_session_callbacks* const cbs = [] {
        nghttp2_session_callbacks* c = nullptr;
        if (nghttp2_session_callbacks_new(&c) != 0) {
            throw std::bad_alloc();
        }
        nghttp2_session_callbacks_set_on_begin_headers_callback(
            c, [](nghttp2_session*, const nghttp2_frame* f, void* user) -> int {
                return conn_of(user).on_begin_headers(*f);
            });
        nghttp2_session_callbacks_set_on_header_callback(
            c,
            [](nghttp2_session*, const nghttp2_frame* f, const std::uint8_t* name,
               std::size_t namelen, const std::uint8_t* value, std::size_t valuelen,
               std::uint8_t /*flags*/, void* user) -> int {
                return conn_of(user).on_header(*f, as_view(name, namelen),
                                               as_view(value, valuelen));
            });
        nghttp2_session_callbacks_set_on_frame_recv_callback(
            c, [](nghttp2_session*, const nghttp2_frame* f, void* user) -> int {
                return conn_of(user).on_frame_recv(*f);
            });
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(
            c,
            [](nghttp2_session*, std::uint8_t /*flags*/, std::int32_t id, const std::uint8_t* data,
               std::size_t len,
               void* user) -> int { return conn_of(user).on_data_chunk(id, as_view(data, len)); });
        nghttp2_session_callbacks_set_on_stream_close_callback(
            c, [](nghttp2_session*, std::int32_t id, std::uint32_t code, void* user) -> int {
                return conn_of(user).on_stream_close(id, code);
            });
        return c;
    }();
    return cbs;
}

auto read_body_cb(nghttp2_session*,
                  std::int32_t id,
                  std::uint8_t* buf,
                  std::size_t len,
                  std::uint32_t* flags,
                  nghttp2_data_source*,
                  void* user) -> ssize_t {
    return conn_of(user).read_body(id, buf, len, flags);
}

}  // namespace

h2_client_connection::h2_client_connection(tls_stream s, settings o) : s_(std::move(s)), o_(o) {
    nghttp2_option* opt = nullptr;
    if (nghttp2_option_new(&opt) != 0) {
        throw std::bad_alloc();
    }
    // Window updates follow the request's reads (nghttp2_session_consume), not receipt, so a
    // slow reader holds at most a window of the body.
    nghttp2_option_set_no_auto_window_update(opt, 1);
    const int rv = nghttp2_session_client_new2(&session_, callbacks(), this, opt);
    nghttp2_option_del(opt);
    if (rv != 0) {
        throw std::bad_alloc();
    }
    const nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, stream_window},
    };
    (void)nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, iv, std::size(iv));
    (void)nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, connection_window);
}

h2_client_connection::~h2_client_connection() { nghttp2_session_del(session_); }

void h2_client_connection::start() { spawn(run(shared_from_this())).detach(); }

auto h2_client_connection::usable() const -> bool {
    const std::lock_guard lock(mu_);
    return usable_;
}

void h2_client_connection::close() { post({action::kind::close, nullptr}); }

void h2_client_connection::post(action a) {
    {
        const std::lock_guard lock(mu_);
        if (ended_) {
            return;  // the reader failed every stream as it ended
        }
        actions_.push_back(std::move(a));
    }
    wake_.set();
}

// ---- nghttp2's callbacks -------------------------------------------------------------

auto h2_client_connection::on_begin_headers(const nghttp2_frame& f) -> int {
    auto it = streams_.find(f.hd.stream_id);
    if (it != streams_.end() && f.headers.cat == NGHTTP2_HCAT_RESPONSE) {
        const std::lock_guard lock(mu_);
        it->second->head.headers.clear();  // an interim (1xx) response's fields are dropped
    }
    return 0;
}

auto h2_client_connection::on_header(const nghttp2_frame& f,
                                     std::string_view name,
                                     std::string_view value) -> int {
    if (f.hd.type != NGHTTP2_HEADERS || f.headers.cat != NGHTTP2_HCAT_RESPONSE) {
        return 0;  // trailers: not kept
    }
    auto it = streams_.find(f.hd.stream_id);
    if (it == streams_.end()) {
        return 0;
    }
    h2_client_stream& s = *it->second;
    const std::lock_guard lock(mu_);
    if (name == ":status") {
        int status = 0;
        for (const char ch : value) {
            status = status * 10 + (ch - '0');  // nghttp2 checked it is three digits
        }
        s.head.status = status;
        return 0;
    }
    s.head.headers.emplace_back(name, value);
    return 0;
}

auto h2_client_connection::on_frame_recv(const nghttp2_frame& f) -> int {
    switch (f.hd.type) {
        case NGHTTP2_SETTINGS:
            if ((f.hd.flags & NGHTTP2_FLAG_ACK) == 0 && !settings_seen_) {
                // Requests wait for the server's first SETTINGS: submitted before it, they
                // could pass its MAX_CONCURRENT_STREAMS, which nghttp2 keeps from then on.
                settings_seen_ = true;
                for (auto& s : waiting_) {
                    submit(s);
                }
                waiting_.clear();
            }
            return 0;
        case NGHTTP2_GOAWAY: {
            const std::lock_guard lock(mu_);
            usable_ = false;  // streams above last_stream_id are closed REFUSED_STREAM
            return 0;
        }
        case NGHTTP2_HEADERS:
        case NGHTTP2_DATA: {
            auto it = streams_.find(f.hd.stream_id);
            if (it == streams_.end()) {
                return 0;
            }
            h2_client_stream& s = *it->second;
            {
                const std::lock_guard lock(mu_);
                if (f.hd.type == NGHTTP2_HEADERS && f.headers.cat == NGHTTP2_HCAT_RESPONSE &&
                    s.head.status >= 200) {
                    s.head_done = true;
                }
                if ((f.hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) {
                    s.in_end = true;
                }
            }
            s.changed.set();
            return 0;
        }
        default:
            return 0;
    }
}

auto h2_client_connection::on_data_chunk(std::int32_t id, std::string_view data) -> int {
    auto it = streams_.find(id);
    if (it == streams_.end()) {
        (void)nghttp2_session_consume_connection(session_, data.size());
        return 0;
    }
    h2_client_stream& s = *it->second;
    s.received += data.size();
    if (s.received > o_.limits.body) {
        (void)nghttp2_session_consume(session_, id, data.size());
        fail(s, std::make_error_code(std::errc::message_size));
        (void)nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
        return 0;
    }
    {
        const std::lock_guard lock(mu_);
        if (s.error) {
            (void)nghttp2_session_consume(session_, id, data.size());  // nobody reads it
        } else {
            s.in.emplace_back(data);
        }
    }
    s.changed.set();
    return 0;
}

auto h2_client_connection::on_stream_close(std::int32_t id, std::uint32_t code) -> int {
    auto it = streams_.find(id);
    if (it == streams_.end()) {
        return 0;
    }
    std::shared_ptr<h2_client_stream> s = std::move(it->second);
    streams_.erase(it);
    std::size_t unread = 0;
    {
        const std::lock_guard lock(mu_);
        s->closed = true;
        if (!s->in_end && !s->error) {
            // REFUSED_STREAM: the server did not act on it (RFC 9113 8.7), also what nghttp2
            // closes the streams above a GOAWAY's last stream id with.
            s->error = code == NGHTTP2_REFUSED_STREAM
                           ? make_error_code(client_errc::unprocessed)
                           : std::make_error_code(std::errc::connection_reset);
        }
        if (s->error) {
            for (const std::string& piece : s->in) {
                unread += piece.size();
            }
            s->in.clear();
        }
    }
    if (unread > 0) {
        (void)nghttp2_session_consume_connection(session_, unread);
    }
    s->changed.set();
    return 0;
}

auto h2_client_connection::read_body(std::int32_t id,
                                     std::uint8_t* buf,
                                     std::size_t len,
                                     std::uint32_t* flags) -> ssize_t {
    auto it = streams_.find(id);
    if (it == streams_.end()) {
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    h2_client_stream& s = *it->second;
    std::size_t n = 0;
    bool end = false;
    bool taken_all = false;
    {
        const std::lock_guard lock(mu_);
        n = std::min(len, s.out.size() - s.out_taken);
        std::memcpy(buf, s.out.data() + s.out_taken, n);
        s.out_taken += n;
        taken_all = s.out_taken == s.out.size();
        end = s.out_end && taken_all;
    }
    if (taken_all) {
        s.changed.set();
    }
    if (end) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        return static_cast<ssize_t>(n);
    }
    return n > 0 ? static_cast<ssize_t>(n) : ssize_t{NGHTTP2_ERR_DEFERRED};
}

// ---- the reader ---------------------------------------------------------------------------

void h2_client_connection::fail(h2_client_stream& s, std::error_code ec) {
    {
        const std::lock_guard lock(mu_);
        if (!s.error) {
            s.error = ec;
        }
        s.in.clear();
    }
    s.changed.set();
}

void h2_client_connection::submit(const std::shared_ptr<h2_client_stream>& s) {
    if (!settings_seen_) {
        waiting_.push_back(s);
        return;
    }
    std::vector<nghttp2_nv> nv;
    nv.reserve(s->fields.size());
    for (const auto& [n, v] : s->fields) {
        nv.push_back({const_cast<std::uint8_t*>(reinterpret_cast<const std::uint8_t*>(n.data())),
                      const_cast<std::uint8_t*>(reinterpret_cast<const std::uint8_t*>(v.data())),
                      n.size(), v.size(), NGHTTP2_NV_FLAG_NONE});
    }
    nghttp2_data_provider prd{};
    prd.read_callback = read_body_cb;
    const std::int32_t id = nghttp2_submit_request(session_, nullptr, nv.data(), nv.size(),
                                                   s->has_body ? &prd : nullptr, nullptr);
    if (id < 0) {
        // No stream id left, or the session is going away: not sent.
        fail(*s, make_error_code(client_errc::unprocessed));
        const std::lock_guard lock(mu_);
        usable_ = false;
        return;
    }
    s->id = id;
    streams_[id] = s;
}

void h2_client_connection::apply(std::vector<action>& acts) {
    for (action& a : acts) {
        switch (a.what) {
            case action::kind::submit:
                submit(a.s);
                break;
            case action::kind::resume:
                if (a.s->id != 0 && streams_.contains(a.s->id)) {
                    (void)nghttp2_session_resume_data(session_, a.s->id);
                }
                break;
            case action::kind::consumed:
                if (streams_.contains(a.s->id)) {
                    (void)nghttp2_session_consume(session_, a.s->id, a.n);
                } else {
                    (void)nghttp2_session_consume_connection(session_, a.n);
                }
                break;
            case action::kind::cancel: {
                if (a.s->id == 0) {
                    std::erase(waiting_, a.s);
                    break;
                }
                if (!streams_.contains(a.s->id)) {
                    break;
                }
                std::size_t unread = 0;
                {
                    const std::lock_guard lock(mu_);
                    for (const std::string& piece : a.s->in) {
                        unread += piece.size();
                    }
                    a.s->in.clear();
                }
                if (unread > 0) {
                    (void)nghttp2_session_consume(session_, a.s->id, unread);
                }
                (void)nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, a.s->id,
                                                NGHTTP2_CANCEL);
                break;
            }
            case action::kind::close: {
                const std::lock_guard lock(mu_);
                usable_ = false;
            }
                (void)nghttp2_session_terminate_session(session_, NGHTTP2_NO_ERROR);
                break;
        }
    }
    acts.clear();
}

auto h2_client_connection::flush() -> task<bool> {
    for (;;) {
        outbuf_.clear();
        while (outbuf_.size() < write_max) {
            const std::uint8_t* p = nullptr;
            const ssize_t n = nghttp2_session_mem_send(session_, &p);
            if (n < 0) {
                co_return false;
            }
            if (n == 0) {
                break;
            }
            outbuf_.append(reinterpret_cast<const char*>(p), static_cast<std::size_t>(n));
        }
        if (outbuf_.empty()) {
            co_return true;
        }
        if (auto w = co_await s_.write_all(std::as_bytes(std::span{outbuf_})); !w) {
            closed_with_ = w.error();
            co_return false;
        }
    }
}

auto h2_client_connection::wait_input() -> task<std::optional<result<bytes>>> {
    std::optional<result<bytes>> got;
    bool woke = false;
    std::vector<task<void>> racers;
    racers.push_back([](tls_stream& s, std::optional<result<bytes>>& out) -> task<void> {
        out = co_await s.receive();
    }(s_, got));
    racers.push_back([](event& e, bool& woke) -> task<void> {
        woke = static_cast<bool>(co_await e.wait());
    }(wake_, woke));
    if (streams_.empty() && waiting_.empty()) {
        // Idle: the connection ends after idle_timeout without a request.
        racers.push_back(
            [](std::chrono::milliseconds d, std::optional<result<bytes>>& out) -> task<void> {
                if (co_await sleep_for(d)) {
                    out = make_error_code(std::errc::timed_out);
                }
            }(o_.idle_timeout, got));
    }
    (void)co_await when_any(std::move(racers));
    if (woke && got && !*got && got->error() == std::errc::operation_canceled) {
        got.reset();  // the wake-up won: the receive was cancelled, nothing lost
    } else if (!got && !woke) {
        got = make_error_code(std::errc::operation_canceled);  // the reader itself is stopped
    }
    co_return got;
}

// `self` keeps the connection alive while the reader runs.
auto h2_client_connection::run([[maybe_unused]] std::shared_ptr<h2_client_connection> self)
    -> task<void> {
    std::vector<action> acts;
    for (;;) {
        {
            const std::lock_guard lock(mu_);
            acts.swap(actions_);
        }
        apply(acts);
        if (!co_await flush()) {
            break;
        }
        if (nghttp2_session_want_read(session_) == 0 && nghttp2_session_want_write(session_) == 0) {
            break;  // GOAWAY sent or received and every stream done
        }
        {
            const std::lock_guard lock(mu_);
            if (!usable_ && streams_.empty() && waiting_.empty() && actions_.empty()) {
                break;  // going away with nothing in flight
            }
        }
        auto got = co_await wait_input();
        if (!got) {
            continue;
        }
        if (!*got) {
            if (got->error() == std::errc::timed_out && streams_.empty()) {
                (void)nghttp2_session_terminate_session(session_, NGHTTP2_NO_ERROR);
                (void)co_await flush();
            } else {
                closed_with_ = got->error();
            }
            break;
        }
        const bytes& b = **got;
        const auto rv = nghttp2_session_mem_recv(
            session_, reinterpret_cast<const std::uint8_t*>(b.data()), b.size());
        if (rv < 0) {
            closed_with_ = std::make_error_code(std::errc::protocol_error);
            (void)co_await flush();  // nghttp2's GOAWAY, if it made one
            break;
        }
    }
    // Every stream still open fails with why the connection ended.
    const std::error_code why =
        closed_with_ ? closed_with_ : std::make_error_code(std::errc::connection_aborted);
    std::vector<action> late;
    {
        const std::lock_guard lock(mu_);
        usable_ = false;
        ended_ = true;
        late.swap(actions_);
    }
    for (auto& [id, s] : streams_) {
        fail(*s, why);
        const std::lock_guard lock(mu_);
        s->closed = true;
    }
    for (auto& s : waiting_) {
        fail(*s, make_error_code(client_errc::unprocessed));
    }
    for (action& a : late) {
        if (a.what == action::kind::submit) {
            fail(*a.s, make_error_code(client_errc::unprocessed));
        }
    }
    streams_.clear();
    waiting_.clear();
    (void)s_.shutdown_write();
    co_return;
}

// ---- the request's side -------------------------------------------------------------------

auto h2_client_connection::wait_change(h2_client_stream& s) -> task<result<void>> {
    auto w = co_await with_timeout(o_.read_timeout, [](event& e) -> task<result<void>> {
        co_return co_await e.wait();
    }(s.changed));
    if (!w) {
        co_return w.error();
    }
    co_return *w;
}

auto h2_client_connection::exchange(std::shared_ptr<h2_client_stream> s,
                                    const std::function<task<result<std::string_view>>()>* body)
    -> task<result<void>> {
    s->has_body = body != nullptr;
    post({action::kind::submit, s});
    if (body != nullptr) {
        // Each piece is handed to nghttp2 whole before the next is produced: one piece is held.
        bool ended = false;
        while (!ended) {
            auto piece = co_await (*body)();
            if (!piece) {
                post({action::kind::cancel, s});
                co_return piece.error();
            }
            {
                const std::lock_guard lock(mu_);
                if (s->closed || s->error || s->in_end) {
                    break;  // answered (or failed) before the body was all sent
                }
                s->out.assign(*piece);
                s->out_taken = 0;
                s->out_end = ended = piece->empty();
            }
            post({action::kind::resume, s});
            for (;;) {
                {
                    const std::lock_guard lock(mu_);
                    // A response already complete (an early 413, say) ends the upload: the
                    // server may never open its window for the rest (RFC 9113 8.1).
                    if (s->closed || s->error || s->in_end || s->out_taken == s->out.size()) {
                        break;
                    }
                }
                if (auto w = co_await s->changed.wait(); !w) {
                    post({action::kind::cancel, s});
                    co_return w.error();
                }
            }
        }
    }
    for (;;) {
        {
            const std::lock_guard lock(mu_);
            if (s->head_done) {
                co_return result<void>{};
            }
            if (s->error) {
                co_return s->error;
            }
            if (s->closed) {
                co_return std::make_error_code(std::errc::connection_reset);
            }
        }
        if (auto w = co_await wait_change(*s); !w) {
            post({action::kind::cancel, s});
            co_return w.error();
        }
    }
}

auto h2_client_connection::read(const std::shared_ptr<h2_client_stream>& s)
    -> task<result<std::string_view>> {
    for (;;) {
        std::size_t n = 0;
        {
            const std::lock_guard lock(mu_);
            if (!s->in.empty()) {
                s->reading = std::move(s->in.front());
                s->in.pop_front();
                n = s->reading.size();
            } else if (s->error) {
                co_return s->error;
            } else if (s->in_end) {
                co_return std::string_view{};
            } else if (s->closed) {
                co_return std::make_error_code(std::errc::connection_reset);
            }
        }
        if (n > 0) {
            post({action::kind::consumed, s, n});  // the window opens as the body is read
            co_return std::string_view{s->reading};
        }
        if (auto w = co_await wait_change(*s); !w) {
            co_return w.error();
        }
    }
}

void h2_client_connection::finish(const std::shared_ptr<h2_client_stream>& s) {
    bool open = false;
    {
        const std::lock_guard lock(mu_);
        open = !s->closed;
    }
    if (open) {
        post({action::kind::cancel, s});
    }
}

}  // namespace weft::http::detail
