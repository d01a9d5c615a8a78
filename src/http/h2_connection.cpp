#include "h2_connection.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "connection.hpp"
#include "http_date.hpp"
#include "server_state.hpp"
#include "weft/core/scope.hpp"
#include "weft/core/when_any.hpp"
#include "weft/http/parse_error.hpp"
#include "weft/sched/yield.hpp"

namespace weft::http::detail {

namespace {

constexpr std::size_t reset_ids_max = 128;    // streams reset lately, remembered
constexpr std::size_t write_max = 64 * 1024;  // gathered from nghttp2 per write

auto as_view(const std::uint8_t* p, std::size_t n) -> std::string_view {
    return {reinterpret_cast<const char*>(p), n};
}

auto conn_of(void* user) -> h2_connection& { return *static_cast<h2_connection*>(user); }

auto cb_begin_frame(nghttp2_session*, const nghttp2_frame_hd* hd, void* user) -> int {
    return conn_of(user).on_begin_frame(*hd);
}
auto cb_begin_headers(nghttp2_session*, const nghttp2_frame* f, void* user) -> int {
    return conn_of(user).on_begin_headers(*f);
}
auto cb_header(nghttp2_session*,
               const nghttp2_frame* f,
               const std::uint8_t* name,
               std::size_t namelen,
               const std::uint8_t* value,
               std::size_t valuelen,
               std::uint8_t /*flags*/,
               void* user) -> int {
    return conn_of(user).on_header(*f, as_view(name, namelen), as_view(value, valuelen));
}
auto cb_frame_recv(nghttp2_session*, const nghttp2_frame* f, void* user) -> int {
    return conn_of(user).on_frame_recv(*f);
}
auto cb_data_chunk(nghttp2_session*,
                   std::uint8_t /*flags*/,
                   std::int32_t id,
                   const std::uint8_t* data,
                   std::size_t len,
                   void* user) -> int {
    return conn_of(user).on_data_chunk(id, as_view(data, len));
}
auto cb_stream_close(nghttp2_session*, std::int32_t id, std::uint32_t code, void* user) -> int {
    return conn_of(user).on_stream_close(id, code);
}
auto cb_read_body(nghttp2_session*,
                  std::int32_t id,
                  std::uint8_t* buf,
                  std::size_t len,
                  std::uint32_t* flags,
                  nghttp2_data_source*,
                  void* user) -> ssize_t {
    return conn_of(user).read_body(id, buf, len, flags);
}

// The callbacks, made once: nghttp2 copies them into each session.
auto callbacks() -> const nghttp2_session_callbacks* {
    static nghttp2_session_callbacks* const cbs = [] {
        nghttp2_session_callbacks* c = nullptr;
        if (nghttp2_session_callbacks_new(&c) != 0) {
            throw std::bad_alloc();
        }
        nghttp2_session_callbacks_set_on_begin_frame_callback(c, cb_begin_frame);
        nghttp2_session_callbacks_set_on_begin_headers_callback(c, cb_begin_headers);
        nghttp2_session_callbacks_set_on_header_callback(c, cb_header);
        nghttp2_session_callbacks_set_on_frame_recv_callback(c, cb_frame_recv);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(c, cb_data_chunk);
        nghttp2_session_callbacks_set_on_stream_close_callback(c, cb_stream_close);
        return c;
    }();
    return cbs;
}

constexpr auto status_has_body(int status) noexcept -> bool {
    return status >= 200 && status != 204 && status != 304;
}

// As the HTTP/1.1 connection does: a handler's failure goes to stderr, never dropped silently.
void report_failure(const char* who, const h2_stream& s, const std::exception_ptr& e) {
    std::string what = "an exception not derived from std::exception";
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& ex) {
        what = ex.what();
    } catch (...) {
    }
    std::fprintf(stderr, "weft::http: the %s of %s %.200s (HTTP/2) failed: %s\n", who,
                 s.method.c_str(), s.path.c_str(), what.c_str());
}

auto lower(std::string_view s) -> std::string {
    std::string r{s};
    for (char& ch : r) {
        ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
    return r;
}

// Fields that are HTTP/1.1 connection management: never sent in HTTP/2 (RFC 9113 8.2.2).
auto connection_specific(std::string_view lname) -> bool {
    return lname == "connection" || lname == "keep-alive" || lname == "proxy-connection" ||
           lname == "transfer-encoding" || lname == "upgrade";
}

// Body bytes of a response in memory or in a file not yet given to nghttp2.
auto body_left(h2_stream& s) -> std::uint64_t {
    response& r = s.resp;
    switch (r.form()) {
        case body_form::text:
            return r.body_text().size() - s.sent;
        case body_form::bytes:
            return r.body_bytes().size() - s.sent;
        case body_form::file:
            return r.body_file().length - s.sent;
        default:
            return 0;
    }
}

// Drops the body bytes received and not read (under mu_); returns how many, for the windows.
auto drop_unread(h2_stream& s) -> std::size_t {
    std::size_t unread = 0;
    for (std::size_t i = s.in_next; i < s.in.size(); ++i) {
        unread += s.in[i].size();
    }
    s.in.clear();
    s.in_next = 0;
    return unread;
}

}  // namespace

auto h2_preface_start(std::string_view first) noexcept -> bool {
    return first.substr(0, 4) == "PRI ";
}

auto h2_preface_undecided(std::string_view first) noexcept -> bool {
    return first.size() < 4 && std::string_view{"PRI "}.starts_with(first);
}

/// The body_writer of a streamed response on HTTP/2: each write waits until nghttp2 took all
/// of it (as the stream's and the connection's windows allow), so the producer runs at the
/// client's pace and at most one piece is held.
class h2_body_writer final : public body_writer {
public:
    h2_body_writer(h2_connection& c, std::shared_ptr<h2_stream> s) : c_(c), s_(std::move(s)) {}

    auto write(std::string_view data) -> task<result<void>> override {
        if (data.empty()) {
            co_return result<void>{};
        }
        {
            std::lock_guard lock(c_.mu_);
            if (s_->closed) {
                co_return make_error_code(std::errc::connection_reset);
            }
            s_->out.assign(data);
            s_->out_taken = 0;
        }
        c_.post({h2_connection::action::kind::resume, s_});
        for (;;) {
            {
                std::lock_guard lock(c_.mu_);
                if (s_->closed) {
                    co_return make_error_code(std::errc::connection_reset);
                }
                if (s_->out_taken == s_->out.size()) {
                    s_->out.clear();
                    s_->out_taken = 0;
                    co_return result<void>{};
                }
            }
            auto w = co_await s_->out_room.wait();
            if (!w) {
                co_return w.error();
            }
        }
    }

private:
    h2_connection& c_;
    std::shared_ptr<h2_stream> s_;
};

h2_stream_pool::~h2_stream_pool() {
    for (void* p : kept_) {
        ::operator delete(p);
    }
}

auto h2_stream_pool::take(std::size_t n) -> void* {
    {
        std::lock_guard lock(mu_);
        if (size_ == 0) {
            size_ = n;
            kept_.reserve(kept_max);
        }
        if (n == size_ && !kept_.empty()) {
            void* p = kept_.back();
            kept_.pop_back();
            return p;
        }
    }
    return ::operator new(n);
}

void h2_stream_pool::give(void* p, std::size_t n) noexcept {
    {
        std::lock_guard lock(mu_);
        if (n == size_ && kept_.size() < kept_max) {
            kept_.push_back(p);  // reserved: never allocates
            return;
        }
    }
    ::operator delete(p);
}

h2_connection::h2_connection(connection& c, bytes first)
    : c_(c),
      first_(std::move(first)),
      reset_tokens_(c.st_.opts.http2.reset_burst),
      reset_refilled_(std::chrono::steady_clock::now()) {
    const http2_options& o = c.st_.opts.http2;
    nghttp2_option* opt = nullptr;
    if (nghttp2_option_new(&opt) != 0) {
        throw std::bad_alloc();
    }
    // Window updates follow the handler's reads (nghttp2_session_consume), not receipt.
    nghttp2_option_set_no_auto_window_update(opt, 1);
    const int rv = nghttp2_session_server_new2(&session_, callbacks(), this, opt);
    nghttp2_option_del(opt);
    if (rv != 0) {
        throw std::bad_alloc();
    }
    const nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, o.max_concurrent_streams},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, o.max_header_list_size},
        {NGHTTP2_SETTINGS_MAX_FRAME_SIZE,
         std::clamp<std::uint32_t>(o.max_frame_size, 16384, 16 * 1024 * 1024 - 1)},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, o.initial_window_size},
    };
    (void)nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, iv, std::size(iv));
    // The connection's own window: as much as all streams may hold at once.
    const std::uint64_t conn_window = std::min<std::uint64_t>(
        std::uint64_t{o.initial_window_size} * o.max_concurrent_streams, (1U << 31) - 1);
    if (conn_window > 65535) {
        (void)nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0,
                                                    static_cast<std::int32_t>(conn_window));
    }
}

h2_connection::~h2_connection() { nghttp2_session_del(session_); }

void h2_connection::post(action a) {
    {
        std::lock_guard lock(mu_);
        actions_.push_back(std::move(a));
    }
    wake_.set();
}

// ---- nghttp2's callbacks -------------------------------------------------------------

// A client's stream ids only grow (RFC 9113 5.1.1): HEADERS on an id below the highest one
// seen, for a stream that is not open, opens a stream the client skipped (a connection error,
// PROTOCOL_ERROR) - unless the stream was reset lately, when frames the client sent before it
// saw the reset are ignored (RFC 9113 5.1, "closed"). nghttp2 ignores such a block silently
// when it has no record of the stream, so the rule is kept here.
auto h2_connection::on_begin_frame(const nghttp2_frame_hd& hd) -> int {
    if (hd.type != NGHTTP2_HEADERS || (hd.stream_id & 1) == 0) {
        return 0;
    }
    if (hd.stream_id > max_request_id_) {
        max_request_id_ = hd.stream_id;
        return 0;
    }
    if (nghttp2_session_find_stream(session_, hd.stream_id) != nullptr ||
        std::find(reset_ids_.begin(), reset_ids_.end(), hd.stream_id) != reset_ids_.end()) {
        return 0;
    }
    goaway_ = true;
    (void)nghttp2_session_terminate_session(session_, NGHTTP2_PROTOCOL_ERROR);
    return 0;
}

auto h2_connection::on_begin_headers(const nghttp2_frame& f) -> int {
    if (f.headers.cat != NGHTTP2_HCAT_REQUEST) {
        return 0;  // trailers: their fields are not kept
    }
    const http2_options& o = c_.st_.opts.http2;
    if (running_ + to_start_.size() >= o.max_concurrent_streams) {
        // Handlers of streams already reset still run: they count against the limit.
        (void)nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, f.hd.stream_id,
                                        NGHTTP2_REFUSED_STREAM);
        return 0;
    }
    // The head is parsed under the largest body limit of any route, as on HTTP/1.1: a
    // Content-Length is held to the route's own limit in start(), once the route is known.
    auto s = std::allocate_shared<h2_stream>(h2_stream_pool::allocator<h2_stream>{stream_pool_},
                                             *this, f.hd.stream_id, c_.st_.head_limits);
    s->body_limit = c_.st_.opts.limits.body;  // the route's, once known (start())
    streams_[f.hd.stream_id] = s;
    (void)nghttp2_session_set_stream_user_data(session_, f.hd.stream_id, s.get());
    return 0;
}

auto h2_connection::on_header(const nghttp2_frame& f, std::string_view name, std::string_view value)
    -> int {
    if (f.hd.type != NGHTTP2_HEADERS || f.headers.cat != NGHTTP2_HCAT_REQUEST) {
        return 0;
    }
    auto* s =
        static_cast<h2_stream*>(nghttp2_session_get_stream_user_data(session_, f.hd.stream_id));
    if (s == nullptr || s->over_list) {
        return 0;
    }
    s->list_size += name.size() + value.size() + 32;
    if (s->list_size > c_.st_.opts.http2.max_header_list_size) {
        s->over_list = true;  // answered 431 at the end of the block; nothing more is kept
        s->fields.clear();
        s->fields.shrink_to_fit();
        return 0;
    }
    if (!name.empty() && name[0] == ':') {
        if (name == ":method") {
            s->method = value;
        } else if (name == ":path") {
            s->path = value;
        } else if (name == ":authority") {
            s->authority = value;
        }
        return 0;  // :scheme, :protocol: nothing a handler reads
    }
    if (name == "host") {
        s->has_host = true;
    }
    s->fields.append(name);
    s->fields.append(": ");
    s->fields.append(value);
    s->fields.append("\r\n");
    return 0;
}

auto h2_connection::on_frame_recv(const nghttp2_frame& f) -> int {
    switch (f.hd.type) {
        case NGHTTP2_HEADERS:
        case NGHTTP2_DATA: {
            auto it = streams_.find(f.hd.stream_id);
            if (it == streams_.end()) {
                return 0;
            }
            const std::shared_ptr<h2_stream>& s = it->second;
            if ((f.hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) {
                {
                    std::lock_guard lock(mu_);
                    s->in_end = true;
                }
                s->in_ready.set();
            }
            if (f.hd.type == NGHTTP2_HEADERS && f.headers.cat == NGHTTP2_HCAT_REQUEST) {
                to_start_.push_back(s);
            }
            return 0;
        }
        case NGHTTP2_RST_STREAM: {
            // A token bucket: reset_burst at once, refilled at resets_per_second.
            const http2_options& o = c_.st_.opts.http2;
            const auto now = std::chrono::steady_clock::now();
            const double secs = std::chrono::duration<double>(now - reset_refilled_).count();
            reset_refilled_ = now;
            reset_tokens_ =
                std::min<double>(o.reset_burst, reset_tokens_ + secs * o.resets_per_second);
            if (reset_tokens_ < 1) {
                if (!goaway_) {
                    goaway_ = true;
                    (void)nghttp2_session_terminate_session(session_, NGHTTP2_ENHANCE_YOUR_CALM);
                }
            } else {
                reset_tokens_ -= 1;
            }
            return 0;
        }
        default:
            return 0;
    }
}

auto h2_connection::on_data_chunk(std::int32_t id, std::string_view data) -> int {
    auto it = streams_.find(id);
    if (it == streams_.end()) {
        (void)nghttp2_session_consume_connection(session_, data.size());
        return 0;
    }
    h2_stream& s = *it->second;
    s.in_total += data.size();
    bool drop = false;
    {
        std::lock_guard lock(mu_);
        if (s.handler_done || s.in_too_large) {
            drop = true;  // nobody will read it
        } else if (s.in_total > s.body_limit) {
            s.in_too_large = true;
            (void)drop_unread(s);
            drop = true;
        } else {
            s.in.emplace_back(data);
        }
    }
    if (drop) {
        (void)nghttp2_session_consume(session_, id, data.size());
    }
    body_waiting_ = false;  // progress
    s.in_ready.set();
    return 0;
}

auto h2_connection::on_stream_close(std::int32_t id, std::uint32_t code) -> int {
    if (code != NGHTTP2_NO_ERROR) {
        if (reset_ids_.size() == reset_ids_max) {
            reset_ids_.pop_front();
        }
        reset_ids_.push_back(id);
    }
    auto it = streams_.find(id);
    if (it == streams_.end()) {
        return 0;
    }
    std::shared_ptr<h2_stream> s = std::move(it->second);
    streams_.erase(it);
    std::size_t unread = 0;
    {
        std::lock_guard lock(mu_);
        s->closed = true;
        if (!s->in_end) {
            s->in_failed = true;
        }
        unread = drop_unread(*s);
    }
    if (unread > 0) {
        (void)nghttp2_session_consume_connection(session_, unread);
    }
    s->in_ready.set();
    s->out_room.set();
    return 0;
}

auto h2_connection::read_body(std::int32_t id,
                              std::uint8_t* buf,
                              std::size_t len,
                              std::uint32_t* flags) -> ssize_t {
    auto it = streams_.find(id);
    if (it == streams_.end()) {
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    h2_stream& s = *it->second;
    if (s.stream_body) {
        std::size_t n = 0;
        bool end = false;
        bool taken_all = false;
        {
            std::lock_guard lock(mu_);
            n = std::min(len, s.out.size() - s.out_taken);
            std::memcpy(buf, s.out.data() + s.out_taken, n);
            s.out_taken += n;
            taken_all = n > 0 && s.out_taken == s.out.size();
            end = s.out_end && s.out_taken == s.out.size();
        }
        if (taken_all) {
            s.out_room.set();
        }
        if (end) {
            *flags |= NGHTTP2_DATA_FLAG_EOF;
            return static_cast<ssize_t>(n);
        }
        return n > 0 ? static_cast<ssize_t>(n) : ssize_t{NGHTTP2_ERR_DEFERRED};
    }
    response& r = s.resp;
    std::size_t n = 0;
    std::uint64_t total = 0;
    if (r.form() == body_form::text) {
        const std::string& t = r.body_text();
        total = t.size();
        n = std::min<std::uint64_t>(len, total - s.sent);
        std::memcpy(buf, t.data() + s.sent, n);
    } else if (r.form() == body_form::bytes) {
        const bytes& b = r.body_bytes();
        total = b.size();
        n = std::min<std::uint64_t>(len, total - s.sent);
        std::memcpy(buf, b.data() + s.sent, n);
    } else if (r.form() == body_form::file) {
        const file_body& f = r.body_file();
        total = f.length;
        n = std::min<std::uint64_t>(len, total - s.sent);
        // From the page cache, as much as the windows allow now (a frame at most).
        const ssize_t got = ::pread(f.fd, buf, n, static_cast<off_t>(f.offset + s.sent));
        if (got <= 0) {
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // resets the stream
        }
        n = static_cast<std::size_t>(got);
    }
    s.sent += n;
    if (s.sent == total) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    }
    return static_cast<ssize_t>(n);
}

// ---- requests and responses -----------------------------------------------------------

void h2_connection::discard_body(h2_stream& s) {
    std::size_t unread = 0;
    {
        std::lock_guard lock(mu_);
        s.handler_done = true;
        unread = drop_unread(s);
    }
    if (unread > 0) {
        (void)nghttp2_session_consume(session_, s.id, unread);
    }
}

void h2_connection::answer(h2_stream& s, int status, std::string_view why) {
    c_.st_.rejected.fetch_add(1, std::memory_order_relaxed);
    discard_body(s);  // no handler will read it
    std::string body{why};
    body += '\n';
    s.resp = response::text(std::move(body), status);
    submit(s);
}

void h2_connection::start(const std::shared_ptr<h2_stream>& s) {
    if (s->closed) {
        return;  // reset in the same receive that opened it: its handler never runs
    }
    if (s->over_list) {
        answer(*s, 431, describe(parse_error::header_block_too_large));
        return;
    }
    if (s->method == "CONNECT") {
        answer(*s, 501, "CONNECT is not supported");
        return;
    }
    // The head as HTTP/1.1 text, parsed by the same parser: handlers see one request_head.
    s->text.reserve(s->method.size() + s->path.size() + s->authority.size() + s->fields.size() +
                    32);
    s->text.append(s->method).append(" ").append(s->path).append(" HTTP/1.1\r\n");
    if (!s->has_host && !s->authority.empty()) {
        s->text.append("host: ").append(s->authority).append("\r\n");
    }
    s->text.append(s->fields).append("\r\n");
    s->fields.clear();
    s->fields.shrink_to_fit();
    if (s->parser.parse(s->text) != parse_status::complete) {
        const parse_error e = s->parser.error() != parse_error::none
                                  ? s->parser.error()
                                  : parse_error::bad_request_line;
        answer(*s, status_of(e), describe(e));
        return;
    }
    s->req.reset(new request{&s->parser.head(), peer_, nullptr});
    s->req->body_.h2_ = s.get();
    s->route = c_.st_.routes.find(s->parser.head().method_name(), s->parser.head().path(), *s->req);
    if (s->route.options != nullptr && s->route.options->body_limit) {
        s->body_limit = *s->route.options->body_limit;
    }
    const body_framing framing = s->parser.head().framing();
    if (s->in_total > s->body_limit ||
        (framing.kind == body_kind::content_length && framing.length > s->body_limit)) {
        answer(*s, 413, describe(parse_error::body_too_large));
        return;
    }
    ++running_;
    scope_->spawn(run_stream(s));
}

auto h2_connection::run_stream(std::shared_ptr<h2_stream> s) -> task<void> {
    request& req = *s->req;
    const router::match& m = s->route;
    // As on HTTP/1.1: metrics, the access log and a server span per request, named by its
    // route's pattern and continuing the caller's traceparent.
    const auto started = c_.st_.request_started();
    trace::span span = c_.st_.request_span(m.route, s->parser.head());
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
            r = co_await c_.st_.call(req, *m.h);
        } catch (...) {
            failed = true;
            failure = std::current_exception();
        }
    }
    if (!failed && (r.status() < 200 || r.status() > 999)) {
        failed = true;
        failure = std::make_exception_ptr(std::logic_error("status " + std::to_string(r.status()) +
                                                           " is not a final response status"));
    }
    bool too_large = false;
    {
        std::lock_guard lock(mu_);
        too_large = s->in_too_large;
    }
    if (too_large) {
        r = response::text(std::string{describe(parse_error::body_too_large)} + "\n", 413);
    } else if (failed) {
        report_failure("handler", *s, failure);
        r = response::text("Internal Server Error\n", 500);  // this stream only
    }
    c_.st_.request_done(m.route, s->parser.head(), r.status(), started);
    server::state::end_request_span(span, r.status());
    std::function<task<result<void>>(body_writer&)> produce;
    const bool head_only = s->parser.head().method() == method::head;
    if (r.form() == body_form::stream && !head_only && status_has_body(r.status())) {
        produce = std::move(r.body_stream().fn);
    }
    {
        std::lock_guard lock(mu_);
        s->stream_body = static_cast<bool>(produce);
        s->resp = std::move(r);
    }
    post({action::kind::respond, s});
    std::size_t broken = 0;  // 1: the producer failed; the stream is reset, not ended
    if (produce) {
        h2_body_writer w{*this, s};
        std::exception_ptr e;
        try {
            (void)co_await produce(w);
        } catch (...) {
            e = std::current_exception();
        }
        if (e) {
            report_failure("stream body", *s, e);
            broken = 1;
        } else {
            {
                std::lock_guard lock(mu_);
                s->out_end = true;
            }
            post({action::kind::resume, s});
        }
    }
    post({action::kind::done, s, broken});
}

void h2_connection::submit(h2_stream& s) {
    response& r = s.resp;
    const server_options& o = c_.st_.opts;
    c_.st_.requests.fetch_add(1, std::memory_order_relaxed);
    s.submitted = true;
    const bool head_only = s.method == "HEAD";
    s.bodiless = head_only || !status_has_body(r.status());
    std::optional<std::uint64_t> length;
    switch (r.form()) {
        case body_form::none:
            length = r.declared_length();
            if (!length && !head_only) {
                length = 0;
            }
            break;
        case body_form::text:
            length = r.body_text().size();
            break;
        case body_form::bytes:
            length = r.body_bytes().size();
            break;
        case body_form::file:
            length = r.body_file().length;
            break;
        case body_form::stream:
            length = r.body_stream().length;
            break;
    }
    const std::string status = std::to_string(r.status());
    std::vector<std::string> names;
    std::vector<nghttp2_nv> nv;
    names.reserve(r.headers().size());
    nv.reserve(r.headers().size() + 5);
    auto add = [&nv](std::string_view n, std::string_view v) {
        nv.push_back({const_cast<std::uint8_t*>(reinterpret_cast<const std::uint8_t*>(n.data())),
                      const_cast<std::uint8_t*>(reinterpret_cast<const std::uint8_t*>(v.data())),
                      n.size(), v.size(), NGHTTP2_NV_FLAG_NONE});
    };
    add(":status", status);
    if (!o.server_name.empty()) {
        add("server", o.server_name);
    }
    add("date", http_date().text);  // copied by nghttp2 before the next http_date()
    if (!r.content_type().empty()) {
        add("content-type", r.content_type());
    }
    if (r.status() == 304) {
        length = r.declared_length();  // the length a 200 would have had, if the handler says
    }
    std::string len_text;
    if (length && r.status() >= 200 && r.status() != 204) {
        len_text = std::to_string(*length);
        add("content-length", len_text);
    }
    for (const auto& [name, value] : r.headers()) {
        names.push_back(lower(name));
        if (connection_specific(names.back())) {
            continue;
        }
        add(names.back(), value);
    }
    nghttp2_data_provider prd{};
    prd.read_callback = cb_read_body;
    const bool has_data =
        !s.bodiless && (s.stream_body || (r.form() != body_form::none && length.value_or(0) > 0));
    (void)nghttp2_submit_response(session_, s.id, nv.data(), nv.size(), has_data ? &prd : nullptr);
}

void h2_connection::apply(std::vector<action>& acts) {
    for (action& a : acts) {
        h2_stream& s = *a.s;
        switch (a.what) {
            case action::kind::respond:
                if (!s.closed) {
                    submit(s);
                }
                break;
            case action::kind::consumed:
                (void)nghttp2_session_consume(session_, s.id, a.n);
                break;
            case action::kind::resume:
                if (!s.closed) {
                    (void)nghttp2_session_resume_data(session_, s.id);
                }
                break;
            case action::kind::waiting:
                break;  // set_timeouts() looks at reader_waiting
            case action::kind::done: {
                --running_;
                if (a.n != 0 && !s.closed) {
                    (void)nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s.id,
                                                    NGHTTP2_INTERNAL_ERROR);
                }
                discard_body(s);
                break;
            }
        }
    }
    acts.clear();
}

// ---- the body, for the handler ---------------------------------------------------------

auto h2_connection::body_read(h2_stream& s) -> task<result<std::string_view>> {
    for (;;) {
        std::size_t n = 0;
        {
            std::lock_guard lock(mu_);
            s.reader_waiting = false;
            if (s.in_too_large) {
                co_return make_error_code(parse_error::body_too_large);
            }
            if (s.in_next < s.in.size()) {
                s.reading = std::move(s.in[s.in_next++]);
                if (s.in_next == s.in.size()) {
                    s.in.clear();
                    s.in_next = 0;
                }
                n = s.reading.size();
            } else if (s.in_end) {
                s.read_end = true;
                co_return std::string_view{};
            } else if (s.in_failed) {
                co_return make_error_code(std::errc::connection_reset);
            } else {
                s.reader_waiting = true;
            }
        }
        if (n > 0) {
            s.delivered += n;
            post({action::kind::consumed, s.shared_from_this(), n});
            co_return std::string_view{s.reading};
        }
        post({action::kind::waiting, s.shared_from_this(), 0});
        auto w = co_await s.in_ready.wait();
        if (!w) {
            co_return w.error();
        }
    }
}

auto h2_connection::body_read_all(h2_stream& s) -> task<result<std::string>> {
    std::string all;
    for (;;) {
        auto piece = co_await body_read(s);
        if (!piece) {
            co_return piece.error();
        }
        if (piece->empty()) {
            co_return all;
        }
        all.append(*piece);
    }
}

// ---- the loop ---------------------------------------------------------------------------

auto h2_connection::flush() -> task<bool> {
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
        const std::span<const std::byte> piece{reinterpret_cast<const std::byte*>(outbuf_.data()),
                                               outbuf_.size()};
        transfer_pace pace;
        const auto ok = co_await c_.write_paced({&piece, 1}, 0, pace);
        // write_paced leaves the deadline cleared: set_timeouts() sets it again from now.
        idle_ = stalled_ = body_waiting_ = false;
        c_.st_.writes.fetch_add(1, std::memory_order_relaxed);
        if (!ok) {
            co_return false;
        }
    }
}

auto h2_connection::wait_input() -> task<std::optional<result<bytes>>> {
    std::optional<result<bytes>> got;
    std::vector<task<void>> racers;
    racers.push_back([](h2_connection& self, std::optional<result<bytes>>& out) -> task<void> {
        out = co_await self.c_.s_.receive();
    }(*this, got));
    racers.push_back([](event& e) -> task<void> { (void)co_await e.wait(); }(wake_));
    (void)co_await when_any(std::move(racers));
    if (got && !*got && got->error() == std::errc::operation_canceled &&
        !c_.stop.stop_requested()) {
        got.reset();  // the wake-up won: the receive was cancelled, nothing lost
    }
    co_return got;
}

void h2_connection::drain_check() {
    if (!goaway_ && c_.st_.draining.load(std::memory_order_acquire)) {
        goaway_ = true;
        // The streams already opened are served; none past them is accepted.
        (void)nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                                    nghttp2_session_get_last_proc_stream_id(session_),
                                    NGHTTP2_NO_ERROR, nullptr, 0);
    }
}

// The connection's deadline, from what the connection waits for now: the client's next
// request (idle: keep_alive_timeout), room in the client's window (send_timeout), or DATA a
// handler waits for (body_timeout). Each is set when that wait begins; none while handlers work.
void h2_connection::set_timeouts() {
    const server_options& o = c_.st_.opts;
    const bool idle = streams_.empty() && running_ == 0;
    bool stalled = false;
    bool waiting = false;
    if (!idle) {
        const bool conn_shut = nghttp2_session_get_remote_window_size(session_) <= 0;
        std::lock_guard lock(mu_);
        for (const auto& [id, s] : streams_) {
            waiting = waiting || s->reader_waiting;
            if (!s->submitted || s->bodiless) {
                continue;
            }
            const bool pending = s->stream_body ? s->out_taken < s->out.size() : body_left(*s) > 0;
            if (pending &&
                (conn_shut || nghttp2_session_get_stream_remote_window_size(session_, id) <= 0)) {
                stalled = true;
            }
        }
    }
    if (idle) {
        if (!idle_) {
            c_.set_deadline(o.keep_alive_timeout);
        }
    } else if (stalled) {
        if (!stalled_) {
            c_.set_deadline(o.send_timeout);
        }
    } else if (waiting) {
        if (!body_waiting_) {
            c_.set_deadline(o.body_timeout);
        }
    } else {
        c_.clear_deadline();
    }
    idle_ = idle;
    stalled_ = !idle && stalled;
    body_waiting_ = !idle && !stalled && waiting;
}

auto h2_connection::serve() -> task<void> {
    peer_ = &c_.peer();
    // Either the drain sees this event and sets it, or drain_check() sees `draining` (both
    // seq_cst): a drain is never missed.
    c_.drain_wake.store(&wake_, std::memory_order_seq_cst);
    try {
        co_await with_scope([&](scope& s) -> task<void> {
            scope_ = &s;
            std::vector<action> acts;
            bytes in = std::move(first_);
            for (;;) {
                if (!in.empty()) {
                    const ssize_t n = nghttp2_session_mem_recv(
                        session_, reinterpret_cast<const std::uint8_t*>(in.data()), in.size());
                    in = bytes{};
                    if (n < 0) {
                        // A fatal error: nghttp2 sends no GOAWAY of its own for these. Floods
                        // (acks owed past its bound; more CONTINUATION frames than it takes,
                        // CVE-2024-28182) are ENHANCE_YOUR_CALM, the rest PROTOCOL_ERROR.
                        const bool flood =
                            n == NGHTTP2_ERR_FLOODED || n == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS;
                        (void)nghttp2_session_terminate_session(
                            session_, flood ? NGHTTP2_ENHANCE_YOUR_CALM : NGHTTP2_PROTOCOL_ERROR);
                        ended_by_goaway_ = co_await flush();
                        break;
                    }
                    const bool started = !to_start_.empty();
                    for (const auto& st : to_start_) {
                        start(st);
                    }
                    to_start_.clear();
                    if (started) {
                        // The handlers just spawned run first: those that answer without
                        // waiting post their responses before this loop takes the actions,
                        // and one write carries them all, not one write and wake-up each.
                        co_await yield();
                    }
                }
                {
                    std::lock_guard lock(mu_);
                    acts.swap(actions_);
                }
                apply(acts);
                drain_check();
                const bool ok = co_await flush();
                if (!ok) {
                    break;
                }
                if (nghttp2_session_want_read(session_) == 0 &&
                    nghttp2_session_want_write(session_) == 0) {
                    ended_by_goaway_ = true;
                    break;
                }
                set_timeouts();
                bool pending = false;
                {
                    std::lock_guard lock(mu_);
                    pending = !actions_.empty();
                }
                if (pending) {
                    continue;
                }
                auto got = co_await wait_input();
                if (got) {
                    if (!*got) {
                        break;  // the client closed or reset, or the deadline passed
                    }
                    in = std::move(**got);
                    if (receive_counts* const counts =
                            receive_counts_for_test.load(std::memory_order_relaxed)) {
                        counts->receives.fetch_add(1, std::memory_order_relaxed);
                        counts->bytes.fetch_add(in.size(), std::memory_order_relaxed);
                    }
                }
            }
            s.request_stop();  // the handlers still running: their client is gone
        });
    } catch (...) {
        // A failure of this connection ends it alone.
    }
    scope_ = nullptr;
    {
        std::lock_guard lock(c_.st_.mu);
        c_.drain_wake.store(nullptr, std::memory_order_relaxed);
    }
}

}  // namespace weft::http::detail

namespace weft::http::detail {

auto connection::serve_h2(bytes first) -> task<void> {
    if (receive_counts* const counts = receive_counts_for_test.load(std::memory_order_relaxed)) {
        counts->states_held.fetch_sub(1, std::memory_order_relaxed);  // HTTP/2 holds none
    }
    h2_connection h2{*this, std::move(first)};
    co_await h2.serve();
    if (h2.ended_by_goaway()) {
        // The client may still be sending (a SETTINGS ack, a WINDOW_UPDATE) as the last
        // frames leave: closing on those unread bytes would reset the connection under them.
        co_await linger_close();
    }
}

}  // namespace weft::http::detail
