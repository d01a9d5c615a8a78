#include "weft/http/client_pool.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <deque>
#include <map>
#include <mutex>
#include <optional>

#include "char_class.hpp"
#include "response_reader.hpp"
#include "weft/io/connect.hpp"
#include "weft/io/error.hpp"
#include "weft/sched/timer.hpp"
#include "weft/sync/semaphore.hpp"
#include "weft/tls/tls_stream.hpp"

namespace weft::http {
namespace {

using clock = std::chrono::steady_clock;

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

/// One connection to an origin: plain TCP, or TLS over it.
struct pooled_connection {
    tcp_stream tcp;
    std::optional<tls_stream> tls;
    std::string buf;             // received, not yet consumed
    std::uint64_t received = 0;  // bytes received since the request was sent
    clock::time_point idle_since{};

    auto write_all(std::string_view s) -> task<result<void>> {
        return tls ? tls->write_all(as_bytes(s)) : tcp.write_all(as_bytes(s));
    }
    auto fill() -> task<result<void>> {
        char tmp[16384];
        auto span = std::as_writable_bytes(std::span{tmp});
        auto n = tls ? co_await tls->read_some(span) : co_await tcp.read_some(span);
        if (!n) {
            co_return n.error();
        }
        buf.append(tmp, *n);
        received += *n;
        co_return result<void>{};
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
    };

    explicit client_pool_state(client_options o)
        : options(std::move(o)), budget(options.retry_ratio, options.retry_min_per_second) {
        options.tls.handshake_timeout = options.tls_handshake_timeout;
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
};

}  // namespace detail

namespace {

struct slot_guard {
    explicit slot_guard(semaphore& sem) noexcept : s(&sem) {}
    semaphore* s;
    slot_guard(const slot_guard&) = delete;
    auto operator=(const slot_guard&) -> slot_guard& = delete;
    ~slot_guard() { s->release(); }
};

auto open(detail::client_pool_state& st, const url_parts& u)
    -> task<result<std::unique_ptr<pooled_connection>>> {
    connect_options co;
    co.resolve = st.options.resolve;
    auto tcp = co_await with_timeout(st.options.connect_timeout, connect(u.host, u.port, co));
    if (!tcp) {
        co_return tcp.error();
    }
    if (!*tcp) {
        co_return tcp->error();
    }
    auto c = std::make_unique<pooled_connection>();
    if (u.https) {
        auto tls = co_await tls_stream::connect(std::move(**tcp), st.tls(), u.host);
        if (!tls) {
            co_return tls.error();
        }
        c->tls.emplace(std::move(*tls));
    } else {
        c->tcp = std::move(**tcp);
    }
    st.opened.fetch_add(1, std::memory_order_relaxed);
    co_return c;
}

auto encode(const url_parts& u, const client_request& req) -> std::string {
    std::string out;
    out.reserve(128 + u.target.size() + req.body.size());
    out.append(req.method).append(" ").append(u.target).append(" HTTP/1.1\r\nHost: ");
    out.append(u.authority).append("\r\n");
    for (const auto& [n, v] : req.headers) {
        out.append(n).append(": ").append(v).append("\r\n");
    }
    if (!req.body.empty() || req.method == "POST" || req.method == "PUT") {
        out.append("Content-Length: ").append(std::to_string(req.body.size())).append("\r\n");
    }
    out.append("\r\n").append(req.body);
    return out;
}

/// One request and its response on a pooled connection of `u`'s origin, retried once on a new
/// connection when a reused one failed before answering (idempotent methods, within budget).
auto exchange(detail::client_pool_state& st, const url_parts& u, const client_request& req)
    -> task<result<client_response>> {
    auto& origin = st.origin(u.origin());
    if (auto r = co_await origin.slots.acquire(); !r) {
        co_return r.error();
    }
    const slot_guard guard{origin.slots};
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
        if (auto w = co_await c->write_all(wire); !w) {
            ec = w.error();
        } else {
            auto r = co_await detail::read_response(
                c->buf, [&c] { return c->fill(); }, req.method == "HEAD", limits);
            if (r) {
                if (r->keep_alive && c->buf.empty()) {
                    st.put_idle(origin, std::move(c));
                }
                co_return r;
            }
            ec = r.error();
        }
        // c is closed here: after a failure its stream position is unknown.
        const bool unanswered = c->received == 0;
        c.reset();
        if (reused && unanswered && idempotent(req.method) && ec != std::errc::operation_canceled &&
            st.budget.try_retry()) {
            st.retries.fetch_add(1, std::memory_order_relaxed);
            fresh_only = true;
            continue;
        }
        co_return ec;
    }
}

auto run(detail::client_pool_state& st, client_request req) -> task<result<client_response>> {
    for (int redirects = 0;; ++redirects) {
        auto u = parse_url(req.url);
        if (!u) {
            co_return make_error_code(client_errc::bad_url);
        }
        auto r = co_await exchange(st, *u, req);
        if (!r || st.options.max_redirects <= 0 || !is_redirect(r->status)) {
            co_return r;
        }
        const auto location = r->header("location");
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
        if (r->status == 303 || ((r->status == 301 || r->status == 302) && req.method == "POST")) {
            req.method = req.method == "HEAD" ? "HEAD" : "GET";
            req.body.clear();
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

}  // namespace

auto client_category() noexcept -> const std::error_category& {
    static const client_category_impl c;
    return c;
}

client_pool::client_pool(client_options options)
    : s_(std::make_unique<detail::client_pool_state>(std::move(options))) {}

client_pool::~client_pool() = default;

auto client_pool::request(client_request req) -> task<result<client_response>> {
    s_->requests.fetch_add(1, std::memory_order_relaxed);
    s_->budget.on_request();
    trace::span span;
    if (req.trace.valid()) {
        if (s_->options.tracer != nullptr) {
            span = s_->options.tracer->start(req.method, trace::span_kind::client, req.trace);
            span.set_attribute("http.request.method", req.method);
            span.set_attribute("url.full", req.url);
        }
        const trace::context& ctx = span.recording() ? span.context() : req.trace;
        std::erase_if(req.headers, [](const auto& h) {
            return detail::iequals(h.first, "traceparent") ||
                   detail::iequals(h.first, "tracestate");
        });
        req.headers.emplace_back("traceparent", trace::traceparent(ctx));
        if (!ctx.state.empty()) {
            req.headers.emplace_back("tracestate", ctx.state);
        }
    }
    auto r = co_await with_timeout(s_->options.request_timeout, run(*s_, std::move(req)));
    if (!r) {
        span.set_status(trace::status_code::error, r.error().message());
        co_return r.error();
    }
    if (*r) {
        span.set_attribute("http.response.status_code", std::int64_t{(*r)->status});
        if ((*r)->status >= 400) {
            span.set_status(trace::status_code::error);
        }
    } else {
        span.set_status(trace::status_code::error, r->error().message());
    }
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
    const std::lock_guard lock(s_->m);
    out.idle = s_->idle_count;
    return out;
}

}  // namespace weft::http
