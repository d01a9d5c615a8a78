#include "weft/http/client_pool.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <deque>
#include <map>
#include <mutex>
#include <optional>

#include "char_class.hpp"
#include "h2_client.hpp"
#include "response_reader.hpp"
#include "weft/io/connect.hpp"
#include "weft/io/error.hpp"
#include "weft/sched/runtime_clock.hpp"
#include "weft/sched/timer.hpp"
#include "weft/sync/semaphore.hpp"
#include "weft/tls/tls_stream.hpp"

namespace weft::http {
namespace {

// The runtime's clock: a pool on a test clock ages its idle connections and its retry window
// in test time.
using clock = runtime_clock;

class client_category_impl final : public std::error_category {
public:
    auto name() const noexcept -> const char* override { return "weft.http.client"; }
    auto message(int c) const -> std::string override {
        switch (static_cast<client_errc>(c)) {
            case client_errc::bad_url:
                return "not an absolute http or https URL";
            case client_errc::too_many_redirects:
                return "too many redirects";
            case client_errc::redirect_downgrade:
                return "redirect from https to http refused";
            case client_errc::unprocessed:
                return "the server did not process the request (HTTP/2 GOAWAY or refused stream)";
        }
        return "unknown HTTP client error";
    }
};

auto as_bytes(std::string_view s) -> std::span<const std::byte> {
    return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

struct url_parts {
    bool https = false;
    std::string host;  // without brackets
    std::uint16_t port = 0;
    std::string authority;  // the Host header: host[:port] as written
    std::string target;     // path and query, at least "/"

    [[nodiscard]] auto origin() const -> std::string {
        return (https ? "https://" : "http://") + host + ":" + std::to_string(port);
    }
};

auto parse_url(std::string_view url) -> std::optional<url_parts> {
    url_parts u;
    if (url.substr(0, 7) == "http://") {
        url.remove_prefix(7);
    } else if (url.substr(0, 8) == "https://") {
        u.https = true;
        url.remove_prefix(8);
    } else {
        return std::nullopt;
    }
    const std::size_t slash = url.find_first_of("/?#");
    std::string_view auth = url.substr(0, slash);
    std::string_view rest = slash == std::string_view::npos ? "" : url.substr(slash);
    if (const std::size_t hash = rest.find('#'); hash != std::string_view::npos) {
        rest = rest.substr(0, hash);
    }
    if (auth.empty() || auth.find('@') != std::string_view::npos) {
        return std::nullopt;
    }
    u.authority = auth;
    std::string_view port_text;
    if (auth.front() == '[') {
        const std::size_t close = auth.find(']');
        if (close == std::string_view::npos) {
            return std::nullopt;
        }
        u.host = auth.substr(1, close - 1);
        if (close + 1 < auth.size()) {
            if (auth[close + 1] != ':') {
                return std::nullopt;
            }
            port_text = auth.substr(close + 2);
        }
    } else {
        const std::size_t colon = auth.find(':');
        u.host = auth.substr(0, colon);
        if (colon != std::string_view::npos) {
            port_text = auth.substr(colon + 1);
        }
    }
    u.port = u.https ? 443 : 80;
    if (!port_text.empty()) {
        const auto [p, ec] =
            std::from_chars(port_text.data(), port_text.data() + port_text.size(), u.port);
        if (ec != std::errc{} || p != port_text.data() + port_text.size() || u.port == 0) {
            return std::nullopt;
        }
    }
    if (u.host.empty()) {
        return std::nullopt;
    }
    u.target = rest.empty() || rest.front() == '?' ? "/" + std::string(rest) : std::string(rest);
    return u;
}

/// The URL a Location names, relative to `base` (RFC 3986 §5.2, without dot-segment removal).
auto follow(const url_parts& base, std::string_view location) -> std::string {
    const std::string scheme = base.https ? "https:" : "http:";
    if (location.substr(0, 7) == "http://" || location.substr(0, 8) == "https://") {
        return std::string(location);
    }
    if (location.substr(0, 2) == "//") {
        return scheme + std::string(location);
    }
    std::string path(location);
    if (location.empty() || location.front() != '/') {
        std::string_view dir = base.target;
        dir = dir.substr(0, dir.find('?'));
        dir = dir.substr(0, dir.rfind('/') + 1);
        path = std::string(dir) + std::string(location);
    }
    return scheme + "//" + base.authority + path;
}

auto idempotent(std::string_view method) -> bool {
    return method == "GET" || method == "HEAD" || method == "PUT" || method == "DELETE" ||
           method == "OPTIONS" || method == "TRACE";
}

auto is_redirect(int status) -> bool {
    return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

/// One connection to an origin: plain TCP, or a byte_stream (client_options::connect_stream),
/// or TLS over either. Plain streams are taken as http::client takes them: the byte_stream
/// when there is one, the socket otherwise.
struct pooled_connection {
    tcp_stream tcp;
    std::unique_ptr<byte_stream> other;
    std::optional<tls_stream> tls;
    std::string buf;             // received, not yet consumed
    std::uint64_t received = 0;  // bytes received since the request was sent
    clock::time_point idle_since{};

    auto write_all(std::string_view s) -> task<result<void>> {
        if (tls) {
            return tls->write_all(as_bytes(s));
        }
        return other ? other->write_all(as_bytes(s)) : tcp.write_all(as_bytes(s));
    }
    auto write_all(std::span<const std::span<const std::byte>> parts) -> task<result<void>> {
        if (tls) {
            return tls->write_all(parts);
        }
        return other ? other->write_all(parts) : tcp.write_all(parts);
    }
    auto read_some(std::span<std::byte> buf) -> task<result<std::size_t>> {
        if (tls) {
            return tls->read_some(buf);
        }
        return other ? other->read_some(buf) : tcp.read_some(buf);
    }
    auto fill() -> task<result<void>> {
        char tmp[16384];
        auto n = co_await read_some(std::as_writable_bytes(std::span{tmp}));
        if (!n) {
            co_return n.error();
        }
        buf.append(tmp, *n);
        received += *n;
        co_return result<void>{};
    }
    /// fill() within client_options::read_timeout.
    template <typename State>
    auto timed_fill(const State& st) -> task<result<void>> {
        auto r = co_await with_timeout(st.options.read_timeout, fill());
        if (!r) {
            co_return r.error();
        }
        co_return *r;
    }
};

/// Retries allowed within a 10 s window: `ratio` of the window's requests plus `min_per_second`
/// per second of it, so retries cannot multiply the load on a server that is failing
/// (a storm of retries is what turns its partial failure into a full one).
class retry_budget {
public:
    retry_budget(double ratio, int min_per_second) : ratio_(ratio), min_(min_per_second) {}
    void on_request() {
        const std::lock_guard lock(m_);
        roll();
        ++requests_;
    }
    auto try_retry() -> bool {
        const std::lock_guard lock(m_);
        roll();
        const double allowed = ratio_ * static_cast<double>(requests_) +
                               static_cast<double>(min_) * static_cast<double>(window.count());
        if (static_cast<double>(retries_ + 1) > allowed) {
            return false;
        }
        ++retries_;
        return true;
    }

private:
    static constexpr std::chrono::seconds window{10};
    void roll() {
        const auto now = clock::now();
        if (now - start_ >= window) {
            start_ = now;
            requests_ = 0;
            retries_ = 0;
        }
    }
    std::mutex m_;
    double ratio_;
    int min_;
    clock::time_point start_ = clock::now();
    std::uint64_t requests_ = 0;
    std::uint64_t retries_ = 0;
};

}  // namespace

namespace detail {

/// The pool's state. Invariants (under `m`): every origin's connections in use <= its slots'
/// initial count (max_per_host), since a connection is used only while a slot is held;
/// `idle_count` == the sum of the origins' idle lists <= max_idle.
struct client_pool_state {
    struct origin_pool {
        explicit origin_pool(std::size_t n) : slots(static_cast<std::ptrdiff_t>(n)) {}
        semaphore slots;
        std::deque<std::unique_ptr<pooled_connection>> idle;  // oldest first
        std::shared_ptr<h2_client_connection> h2;             // the origin's HTTP/2 connection
        bool h1_only = false;                                 // ALPN chose http/1.1
        std::shared_ptr<event> opening;  // set when the connection being opened is known
    };

    explicit client_pool_state(client_options o)
        : options(std::move(o)), budget(options.retry_ratio, options.retry_min_per_second) {
        options.tls.handshake_timeout = options.tls_handshake_timeout;
        if (options.tls.alpn.empty()) {
            options.tls.alpn = options.http2 ? std::vector<std::string>{"h2", "http/1.1"}
                                             : std::vector<std::string>{"http/1.1"};
        }
    }

    ~client_pool_state() {
        for (auto& [key, o] : origins) {
            if (o->h2) {
                o->h2->close();  // its reader sends GOAWAY and ends
            }
        }
    }
    client_pool_state(const client_pool_state&) = delete;
    auto operator=(const client_pool_state&) -> client_pool_state& = delete;

    auto offers_h2() const -> bool {
        return std::find(options.tls.alpn.begin(), options.tls.alpn.end(), "h2") !=
               options.tls.alpn.end();
    }

    auto origin(const std::string& key) -> origin_pool& {
        const std::lock_guard lock(m);
        auto& p = origins[key];
        if (!p) {
            p = std::make_unique<origin_pool>(options.max_per_host);
        }
        return *p;
    }
    auto take_idle(origin_pool& o) -> std::unique_ptr<pooled_connection> {
        const std::lock_guard lock(m);
        const auto now = clock::now();
        while (!o.idle.empty()) {
            auto c = std::move(o.idle.back());  // the most recently used: the likeliest alive
            o.idle.pop_back();
            --idle_count;
            if (now - c->idle_since < options.idle_timeout) {
                return c;
            }
        }
        return nullptr;
    }
    void put_idle(origin_pool& o, std::unique_ptr<pooled_connection> c) {
        std::unique_ptr<pooled_connection> evicted;  // closed outside the lock
        const std::lock_guard lock(m);
        if (options.max_idle == 0) {
            return;
        }
        if (idle_count >= options.max_idle) {
            origin_pool* oldest = nullptr;
            for (auto& [k, p] : origins) {
                if (!p->idle.empty() &&
                    (oldest == nullptr ||
                     p->idle.front()->idle_since < oldest->idle.front()->idle_since)) {
                    oldest = p.get();
                }
            }
            evicted = std::move(oldest->idle.front());
            oldest->idle.pop_front();
            --idle_count;
        }
        c->idle_since = clock::now();
        o.idle.push_back(std::move(c));
        ++idle_count;
    }
    auto tls() -> const tls_context& {
        std::call_once(tls_once, [&] { tls_ctx = tls_context::client(options.tls); });
        return *tls_ctx;
    }

    client_options options;
    retry_budget budget;
    std::mutex m;
    std::map<std::string, std::unique_ptr<origin_pool>> origins;
    std::size_t idle_count = 0;
    std::once_flag tls_once;
    std::optional<tls_context> tls_ctx;
    std::atomic<std::uint64_t> opened{0};
    std::atomic<std::uint64_t> requests{0};
    std::atomic<std::uint64_t> retries{0};
    std::atomic<std::uint64_t> h2_opened{0};
};

}  // namespace detail

namespace {

/// An origin's slot, held while one of its HTTP/1.1 connections is in use; movable so that a
/// streamed response's body keeps it until read.
class slot_hold {
public:
    explicit slot_hold(semaphore& sem) noexcept : s_(&sem) {}
    slot_hold(slot_hold&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
    auto operator=(slot_hold&&) -> slot_hold& = delete;
    slot_hold(const slot_hold&) = delete;
    auto operator=(const slot_hold&) -> slot_hold& = delete;
    ~slot_hold() { release(); }
    void release() noexcept {
        if (s_ != nullptr) {
            std::exchange(s_, nullptr)->release();
        }
    }

private:
    semaphore* s_;
};

/// The plain stream of a new connection to `u`'s origin, within connect_timeout: through
/// client_options::connect_stream when set (in `c.other`), else over TCP (in `c.tcp`).
auto connect_plain(detail::client_pool_state& st, const url_parts& u, pooled_connection& c)
    -> task<result<void>> {
    if (st.options.connect_stream) {
        auto s = co_await with_timeout(st.options.connect_timeout,
                                       st.options.connect_stream(u.host, u.port));
        if (!s) {
            co_return s.error();
        }
        if (!*s) {
            co_return s->error();
        }
        c.other = std::move(**s);
        co_return result<void>{};
    }
    connect_options co;
    co.resolve = st.options.resolve;
    auto tcp = co_await with_timeout(st.options.connect_timeout, connect(u.host, u.port, co));
    if (!tcp) {
        co_return tcp.error();
    }
    if (!*tcp) {
        co_return tcp->error();
    }
    c.tcp = std::move(**tcp);
    co_return result<void>{};
}

auto open(detail::client_pool_state& st, const url_parts& u)
    -> task<result<std::unique_ptr<pooled_connection>>> {
    auto c = std::make_unique<pooled_connection>();
    if (auto plain = co_await connect_plain(st, u, *c); !plain) {
        co_return plain.error();
    }
    if (u.https) {
        auto handshake = c->other ? tls_stream::connect(std::move(c->other), st.tls(), u.host)
                                  : tls_stream::connect(std::move(c->tcp), st.tls(), u.host);
        auto tls = co_await std::move(handshake);
        if (!tls) {
            co_return tls.error();
        }
        c->tls.emplace(std::move(*tls));
    }
    st.opened.fetch_add(1, std::memory_order_relaxed);
    co_return c;
}

/// The request head, and the body too when it is a string.
auto encode(const url_parts& u, const client_request& req) -> std::string {
    std::string out;
    out.reserve(128 + u.target.size() + req.body.size());
    out.append(req.method).append(" ").append(u.target).append(" HTTP/1.1\r\nHost: ");
    out.append(u.authority).append("\r\n");
    for (const auto& [n, v] : req.headers) {
        out.append(n).append(": ").append(v).append("\r\n");
    }
    if (req.body_stream) {
        if (req.body_length) {
            out.append("Content-Length: ").append(std::to_string(*req.body_length)).append("\r\n");
        } else {
            out.append("Transfer-Encoding: chunked\r\n");
        }
        out.append("\r\n");
        return out;
    }
    if (!req.body.empty() || req.method == "POST" || req.method == "PUT") {
        out.append("Content-Length: ").append(std::to_string(req.body.size())).append("\r\n");
    }
    out.append("\r\n").append(req.body);
    return out;
}

/// Sends what `req.body_stream` produces on `c`: as it comes with a Content-Length, else as
/// chunks. A producer that gives another length than it declared is invalid_argument (the
/// connection is then closed by the caller: the server waits for bytes that never come).
auto send_stream(pooled_connection& c, const client_request& req) -> task<result<void>> {
    std::uint64_t sent = 0;
    for (;;) {
        auto piece = co_await req.body_stream();
        if (!piece) {
            co_return piece.error();
        }
        sent += piece->size();
        if (req.body_length && sent > *req.body_length) {
            co_return std::make_error_code(std::errc::invalid_argument);
        }
        if (piece->empty()) {
            if (req.body_length) {
                if (sent != *req.body_length) {
                    co_return std::make_error_code(std::errc::invalid_argument);
                }
                co_return result<void>{};
            }
            co_return co_await c.write_all("0\r\n\r\n");
        }
        if (req.body_length) {
            if (auto w = co_await c.write_all(*piece); !w) {
                co_return w.error();
            }
            continue;
        }
        char size[24];
        const auto [end, ec] = std::to_chars(size, size + sizeof size - 2, piece->size(), 16);
        end[0] = '\r';
        end[1] = '\n';
        const std::span<const std::byte> parts[] = {
            as_bytes({size, static_cast<std::size_t>(end + 2 - size)}), as_bytes(*piece),
            as_bytes("\r\n")};
        if (auto w = co_await c.write_all(parts); !w) {
            co_return w.error();
        }
    }
}

/// A response body read from its HTTP/1.1 connection; the connection goes back to the pool
/// when the body ended on a connection the server keeps, and is closed otherwise.
class h1_body final : public detail::client_body_source {
public:
    h1_body(detail::client_pool_state& st,
            detail::client_pool_state::origin_pool& origin,
            std::unique_ptr<pooled_connection> c,
            slot_hold slot,
            const detail::response_start& start,
            detail::response_limits limits)
        : st_(st),
          origin_(origin),
          c_(std::move(c)),
          slot_(std::move(slot)),
          keep_alive_(start.head.keep_alive),
          reader_(start, limits) {
        if (start.framing == detail::response_framing::none) {
            finish();
        }
    }

    auto read() -> task<result<std::string_view>> override {
        if (!c_) {
            co_return std::string_view{};
        }
        auto piece = co_await reader_.next(c_->buf, [this] { return c_->timed_fill(st_); });
        if (!piece) {
            c_.reset();
            slot_.release();
            co_return piece.error();
        }
        if (reader_.done()) {
            finish();
        }
        co_return piece;
    }

private:
    void finish() {
        if (keep_alive_ && c_->buf.empty()) {
            st_.put_idle(origin_, std::move(c_));
        }
        c_.reset();
        slot_.release();
    }

    detail::client_pool_state& st_;
    detail::client_pool_state::origin_pool& origin_;
    std::unique_ptr<pooled_connection> c_;
    slot_hold slot_;
    bool keep_alive_;
    detail::response_body_reader reader_;
};

/// One request on a pooled HTTP/1.1 connection of `u`'s origin, up to its response head;
/// retried once on a new connection when a reused one failed before answering (idempotent
/// methods with a body that can be sent again, within budget).
auto exchange(detail::client_pool_state& st, const url_parts& u, const client_request& req)
    -> task<result<client_stream>> {
    auto& origin = st.origin(u.origin());
    if (auto r = co_await origin.slots.acquire(); !r) {
        co_return r.error();
    }
    slot_hold slot{origin.slots};
    const std::string wire = encode(u, req);
    const detail::response_limits limits{.head = st.options.max_response_head,
                                         .body = st.options.max_response_body};
    bool fresh_only = false;
    for (;;) {
        auto c = fresh_only ? nullptr : st.take_idle(origin);
        const bool reused = c != nullptr;
        if (!c) {
            auto opened = co_await open(st, u);
            if (!opened) {
                co_return opened.error();
            }
            c = std::move(*opened);
        }
        c->received = 0;
        std::error_code ec;
        auto w = co_await c->write_all(wire);
        if (w && req.body_stream) {
            w = co_await send_stream(*c, req);
        }
        if (!w) {
            ec = w.error();
        } else {
            auto r = co_await detail::read_head(
                c->buf, [&] { return c->timed_fill(st); }, req.method == "HEAD", limits);
            if (r) {
                client_response head = std::move(r->head);
                auto body = std::make_unique<h1_body>(st, origin, std::move(c), std::move(slot), *r,
                                                      limits);
                co_return client_stream{std::move(head), std::move(body)};
            }
            ec = r.error();
        }
        // c is closed here: after a failure its stream position is unknown.
        const bool unanswered = c->received == 0;
        c.reset();
        if (reused && unanswered && idempotent(req.method) && !req.body_stream &&
            ec != std::errc::operation_canceled && st.budget.try_retry()) {
            st.retries.fetch_add(1, std::memory_order_relaxed);
            fresh_only = true;
            continue;
        }
        co_return ec;
    }
}

/// A response body read from its HTTP/2 stream; the stream is reset if dropped before its end.
class h2_body final : public detail::client_body_source {
public:
    h2_body(std::shared_ptr<detail::h2_client_connection> c,
            std::shared_ptr<detail::h2_client_stream> s)
        : c_(std::move(c)), s_(std::move(s)) {}
    h2_body(const h2_body&) = delete;
    auto operator=(const h2_body&) -> h2_body& = delete;
    ~h2_body() override { c_->finish(s_); }

    auto read() -> task<result<std::string_view>> override { return c_->read(s_); }

private:
    std::shared_ptr<detail::h2_client_connection> c_;
    std::shared_ptr<detail::h2_client_stream> s_;
};

/// The origin's HTTP/2 connection, opened if there is none (one opening at a time: the others
/// wait for it); nullptr when the origin chose http/1.1, whose first connection is then idle.
auto h2_connection_for(detail::client_pool_state& st, const url_parts& u)
    -> task<result<std::shared_ptr<detail::h2_client_connection>>> {
    auto& origin = st.origin(u.origin());
    for (;;) {
        std::shared_ptr<event> other;
        {
            const std::lock_guard lock(st.m);
            if (origin.h2 && origin.h2->usable()) {
                co_return origin.h2;
            }
            origin.h2.reset();
            if (origin.h1_only) {
                co_return std::shared_ptr<detail::h2_client_connection>{};
            }
            if (origin.opening) {
                other = origin.opening;
            } else {
                origin.opening = std::make_shared<event>();
            }
        }
        if (other) {
            if (auto w = co_await other->wait(); !w) {
                co_return w.error();
            }
            continue;
        }
        auto c = co_await open(st, u);
        std::shared_ptr<detail::h2_client_connection> h2;
        if (c && (*c)->tls && (*c)->tls->alpn() == "h2") {
            h2 = std::make_shared<detail::h2_client_connection>(
                std::move(*(*c)->tls), detail::h2_client_connection::settings{
                                           .limits = {.head = st.options.max_response_head,
                                                      .body = st.options.max_response_body},
                                           .read_timeout = st.options.read_timeout,
                                           .idle_timeout = st.options.idle_timeout});
            h2->start();
            st.h2_opened.fetch_add(1, std::memory_order_relaxed);
        }
        std::shared_ptr<event> done;
        {
            const std::lock_guard lock(st.m);
            done = std::exchange(origin.opening, nullptr);
            if (h2) {
                origin.h2 = h2;
            } else if (c) {
                origin.h1_only = true;
            }
        }
        if (c && !h2) {
            st.put_idle(origin, std::move(*c));  // for the first request of http/1.1
        }
        done->set();
        if (!c) {
            co_return c.error();
        }
        co_return h2;
    }
}

/// One request as a stream of an HTTP/2 connection, up to its response head.
auto h2_exchange(detail::client_pool_state& st,
                 const std::shared_ptr<detail::h2_client_connection>& conn,
                 const url_parts& u,
                 const client_request& req) -> task<result<client_stream>> {
    auto s = std::make_shared<detail::h2_client_stream>();
    s->fields = {{":method", req.method},
                 {":scheme", "https"},
                 {":authority", u.authority},
                 {":path", u.target}};
    for (const auto& [n, v] : req.headers) {
        std::string name = n;
        for (char& ch : name) {
            ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        }
        // HTTP/1.1 connection management and Host (:authority) are not sent (RFC 9113 8.2.2).
        if (name == "connection" || name == "keep-alive" || name == "proxy-connection" ||
            name == "transfer-encoding" || name == "upgrade" || name == "host" ||
            name == "content-length") {
            continue;
        }
        s->fields.emplace_back(std::move(name), v);
    }
    std::function<task<result<std::string_view>>()> whole;
    const std::function<task<result<std::string_view>>()>* body = nullptr;
    if (req.body_stream) {
        body = &req.body_stream;
        if (req.body_length) {
            s->fields.emplace_back("content-length", std::to_string(*req.body_length));
        }
    } else if (!req.body.empty() || req.method == "POST" || req.method == "PUT") {
        s->fields.emplace_back("content-length", std::to_string(req.body.size()));
        if (!req.body.empty()) {
            // In pieces of at most 64 KiB, as a producer would give them.
            whole = [&req, at = std::size_t{0}]() mutable -> task<result<std::string_view>> {
                const std::string_view rest = std::string_view{req.body}.substr(at);
                const std::string_view piece = rest.substr(0, 64 * 1024);
                at += piece.size();
                co_return piece;
            };
            body = &whole;
        }
    }
    auto r = co_await conn->exchange(s, body);
    if (!r) {
        co_return r.error();
    }
    auto stream_body = std::make_unique<h2_body>(conn, s);
    client_response head = std::move(s->head);
    head.http2 = true;
    if (const auto length = head.header("content-length")) {
        std::uint64_t n = 0;
        const auto [p, ec] = std::from_chars(length->data(), length->data() + length->size(), n);
        if (ec == std::errc{} && n > st.options.max_response_body) {
            co_return std::make_error_code(std::errc::message_size);  // before any of it is read
        }
    }
    co_return client_stream{std::move(head), std::move(stream_body)};
}

/// A request to `u`'s origin: on its HTTP/2 connection when it has agreed h2, else on a
/// pooled HTTP/1.1 connection.
auto dispatch(detail::client_pool_state& st, const url_parts& u, const client_request& req)
    -> task<result<client_stream>> {
    if (u.https && st.offers_h2()) {
        for (bool retried = false;; retried = true) {
            auto conn = co_await h2_connection_for(st, u);
            if (!conn) {
                co_return conn.error();
            }
            if (!*conn) {
                break;
            }
            auto r = co_await h2_exchange(st, *conn, u, req);
            if (!r && r.error() == client_errc::unprocessed && !retried && idempotent(req.method) &&
                !req.body_stream && st.budget.try_retry()) {
                st.retries.fetch_add(1, std::memory_order_relaxed);
                continue;
            }
            co_return r;
        }
    }
    co_return co_await exchange(st, u, req);
}

auto run(detail::client_pool_state& st, client_request req) -> task<result<client_stream>> {
    for (int redirects = 0;; ++redirects) {
        auto u = parse_url(req.url);
        if (!u) {
            co_return make_error_code(client_errc::bad_url);
        }
        auto r = co_await dispatch(st, *u, req);
        if (!r || st.options.max_redirects <= 0 || !is_redirect(r->response().status)) {
            co_return r;
        }
        const int status = r->response().status;
        const auto location = r->response().header("location");
        if (!location) {
            co_return r;
        }
        if (redirects >= st.options.max_redirects) {
            co_return make_error_code(client_errc::too_many_redirects);
        }
        std::string next = follow(*u, *location);
        auto nu = parse_url(next);
        if (!nu) {
            co_return make_error_code(client_errc::bad_url);
        }
        if (u->https && !nu->https && !st.options.allow_downgrade) {
            co_return make_error_code(client_errc::redirect_downgrade);
        }
        const bool to_get =
            status == 303 || ((status == 301 || status == 302) && req.method == "POST");
        if (req.body_stream && !to_get) {
            co_return r;  // the body was produced once and cannot be sent again
        }
        // The redirect's own body is read so that its connection can serve the next request.
        if (auto drained = co_await r->read_all(); !drained) {
            co_return drained.error();
        }
        if (to_get) {
            req.method = req.method == "HEAD" ? "HEAD" : "GET";
            req.body.clear();
            req.body_stream = nullptr;
            req.body_length.reset();
        }
        if (nu->origin() != u->origin()) {
            // Credentials are for the origin that was asked: not sent to another.
            std::erase_if(req.headers, [](const auto& h) {
                return detail::iequals(h.first, "authorization") ||
                       detail::iequals(h.first, "cookie");
            });
        }
        req.url = std::move(next);
    }
}

/// open() and the body read whole.
auto whole(detail::client_pool_state& st, client_request req) -> task<result<client_response>> {
    auto s = co_await run(st, std::move(req));
    if (!s) {
        co_return s.error();
    }
    auto body = co_await s->read_all();
    if (!body) {
        co_return body.error();
    }
    client_response out = std::move(s->response());
    out.body = std::move(*body);
    co_return out;
}

}  // namespace

auto client_category() noexcept -> const std::error_category& {
    static const client_category_impl c;
    return c;
}

client_pool::client_pool(client_options options)
    : s_(std::make_unique<detail::client_pool_state>(std::move(options))) {}

client_pool::~client_pool() = default;

namespace {

// A client span for a request that carries a valid trace context (when the pool has a tracer),
// and the traceparent (and tracestate) it sends in place of any the caller wrote.
auto start_client_span(detail::client_pool_state& st, client_request& req) -> trace::span {
    trace::span span;
    if (!req.trace.valid()) {
        return span;
    }
    if (st.options.tracer != nullptr) {
        span = st.options.tracer->start(req.method, trace::span_kind::client, req.trace);
        span.set_attribute("http.request.method", req.method);
        span.set_attribute("url.full", req.url);
    }
    const trace::context& ctx = span.recording() ? span.context() : req.trace;
    std::erase_if(req.headers, [](const auto& h) {
        return detail::iequals(h.first, "traceparent") || detail::iequals(h.first, "tracestate");
    });
    req.headers.emplace_back("traceparent", trace::traceparent(ctx));
    if (!ctx.state.empty()) {
        req.headers.emplace_back("tracestate", ctx.state);
    }
    return span;
}

// The span's end state: the response's status, or the error that ended the request.
template <typename R>
void end_client_span(trace::span& span, const result<R>& r, const client_response* head) {
    if (!r) {
        span.set_status(trace::status_code::error, r.error().message());
        return;
    }
    span.set_attribute("http.response.status_code", std::int64_t{head->status});
    if (head->status >= 400) {
        span.set_status(trace::status_code::error);
    }
}

}  // namespace

auto client_pool::request(client_request req) -> task<result<client_response>> {
    s_->requests.fetch_add(1, std::memory_order_relaxed);
    s_->budget.on_request();
    trace::span span = start_client_span(*s_, req);
    auto r = co_await with_timeout(s_->options.request_timeout, whole(*s_, std::move(req)));
    if (!r) {
        span.set_status(trace::status_code::error, r.error().message());
        co_return r.error();
    }
    end_client_span(span, *r, *r ? &**r : nullptr);
    co_return std::move(*r);
}

auto client_pool::open(client_request req) -> task<result<client_stream>> {
    s_->requests.fetch_add(1, std::memory_order_relaxed);
    s_->budget.on_request();
    trace::span span = start_client_span(*s_, req);
    auto r = co_await with_timeout(s_->options.request_timeout, run(*s_, std::move(req)));
    if (!r) {
        span.set_status(trace::status_code::error, r.error().message());
        co_return r.error();
    }
    end_client_span(span, *r, *r ? &(*r)->response() : nullptr);
    co_return std::move(*r);
}

auto client_pool::get(std::string url) -> task<result<client_response>> {
    return request({.method = "GET", .url = std::move(url)});
}

auto client_pool::post(std::string url, std::string body, std::string content_type)
    -> task<result<client_response>> {
    return request({.method = "POST",
                    .url = std::move(url),
                    .headers = {{"Content-Type", std::move(content_type)}},
                    .body = std::move(body)});
}

auto client_pool::stats() const -> client_pool_stats {
    client_pool_stats out;
    out.connections_opened = s_->opened.load(std::memory_order_relaxed);
    out.requests = s_->requests.load(std::memory_order_relaxed);
    out.retries = s_->retries.load(std::memory_order_relaxed);
    out.http2_connections = s_->h2_opened.load(std::memory_order_relaxed);
    const std::lock_guard lock(s_->m);
    out.idle = s_->idle_count;
    return out;
}

}  // namespace weft::http
