#include "weft/http/server.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "server_state.hpp"
#include "weft/core/scope.hpp"
#include "weft/io/reactor.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"

namespace weft::http {

namespace {

auto default_max_connections() -> std::size_t {
    rlimit rl{};
    if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) {
        return 65536;
    }
    return std::max<std::size_t>(1, static_cast<std::size_t>(rl.rlim_cur) * 9 / 10);
}

auto method_token(method m) -> std::string_view {
    switch (m) {
        case method::get:
            return "GET";
        case method::head:
            return "HEAD";
        case method::post:
            return "POST";
        case method::put:
            return "PUT";
        case method::delete_:
            return "DELETE";
        case method::connect:
            return "CONNECT";
        case method::options:
            return "OPTIONS";
        case method::trace:
            return "TRACE";
        case method::patch:
            return "PATCH";
        case method::other:
            break;
    }
    throw std::invalid_argument("weft::http::server::route: method::other has no name");
}

auto stats_of(const server::state& st) noexcept -> server_stats {
    server_stats s;
    s.accepted = st.accepted.load(std::memory_order_relaxed);
    s.requests = st.requests.load(std::memory_order_relaxed);
    s.rejected = st.rejected.load(std::memory_order_relaxed);
    s.timed_out = st.timed_out.load(std::memory_order_relaxed);
    s.tls_failed = st.tls_failed.load(std::memory_order_relaxed);
    s.writes = st.writes.load(std::memory_order_relaxed);
    s.open = st.open.load(std::memory_order_relaxed);
    return s;
}

auto serve_accepted(std::shared_ptr<server::state> st, tcp_stream s) -> task<void> {
    return detail::connection::serve_socket(std::move(st), std::move(s));
}
auto serve_accepted(std::shared_ptr<server::state> st, std::unique_ptr<byte_stream> s)
    -> task<void> {
    return detail::connection::serve_stream(std::move(st), std::move(s));
}

// The accept loop of server::serve over either listener (tcp_listener, byte_listener): one
// loop, the listener's accept() and the accepted stream's serve_accepted() chosen at compile
// time. `st`: connections hold it too, so it outlives them all.
template <typename Listener>
auto accept_loop(std::shared_ptr<server::state> st, Listener& l) -> task<void> {
    // The descriptor table sized for the connections (and a few more descriptors) at once, up
    // to 65,536: a storm of new connections never waits for it to grow (weft::
    // reserve_descriptors; wrk -c1000 against a fresh server: the first 1,000 responses were
    // done by 40-77 ms before, 19-29 after). A failure only leaves the table to grow as usual.
    (void)reserve_descriptors(std::min<std::size_t>(st->max_open + 64, 65536));
    co_await with_scope([&](scope& conns) -> task<void> {
        co_await with_scope([&](scope& acceptor) -> task<void> {
            {
                std::lock_guard lock(st->mu);
                if (st->draining.load(std::memory_order_relaxed)) {
                    co_return;
                }
                st->acceptors.push_back(&acceptor.stop());
            }
            for (;;) {
                // At the connection limit, wait for one to end before accepting: the kernel's
                // backlog holds the rest, and no CPU is spent meanwhile.
                const auto ok1 = co_await st->slots.acquire();
                if (!ok1) {
                    break;
                }
                auto c = co_await l.accept();
                if (!c) {
                    st->slots.release();
                    if (c.error() == std::errc::operation_canceled) {
                        break;
                    }
                    continue;  // a connection aborted before it was accepted, and the like
                }
                st->accepted.fetch_add(1, std::memory_order_relaxed);
                st->open.fetch_add(1, std::memory_order_seq_cst);
                conns.spawn(serve_accepted(st, std::move(*c)));
            }
            std::lock_guard lock(st->mu);
            std::erase(st->acceptors, &acceptor.stop());
        });
    });
}

}  // namespace

server::state::state(server_options o)
    : opts(std::move(o)),
      head_limits(opts.limits),
      max_open(opts.max_connections != 0 ? opts.max_connections : default_max_connections()),
      slots(static_cast<std::ptrdiff_t>(max_open)) {}

void server::state::access(std::size_t route,
                           const request_head& head,
                           int status,
                           detail::server_metrics::clock::time_point started) noexcept {
    const double ms =
        std::chrono::duration<double, std::milli>(detail::server_metrics::clock::now() - started)
            .count();
    const std::string_view pattern =
        route < patterns.size() ? std::string_view(patterns[route]) : std::string_view{};
    opts.access_log->info("request", {{"method", head.method_name()},
                                      {"path", head.path()},
                                      {"route", pattern},
                                      {"status", status},
                                      {"duration_ms", ms}});
}

auto server::state::request_span(std::size_t route, const request_head& head) const -> trace::span {
    if (opts.tracer == nullptr) {
        return {};
    }
    // OpenTelemetry's HTTP server span: "{method} {http.route}", the method alone without one.
    const std::string_view pattern =
        route < patterns.size() ? std::string_view(patterns[route]) : std::string_view{};
    std::string name(head.method_name());
    if (!pattern.empty()) {
        name += ' ';
        name += pattern;
    }
    auto s = opts.tracer->start(name, trace::span_kind::server,
                                trace::extract(head.find("traceparent"), head.find("tracestate")));
    s.set_attribute("http.request.method", head.method_name());
    if (!pattern.empty()) {
        s.set_attribute("http.route", pattern);
    }
    return s;
}

void server::state::end_request_span(trace::span& s, int status) {
    if (!s.recording()) {
        return;
    }
    s.set_attribute("http.response.status_code", std::int64_t{status});
    if (status >= 500) {
        s.set_status(trace::status_code::error);
    }
    s.end();
}

auto server::state::call(request& req, const handler& h) -> task<response> {
    if (layers.empty()) {
        return h(req);
    }
    return call_from(0, req, h);
}

auto server::state::call_from(std::size_t i, request& req, const handler& h) -> task<response> {
    if (i == layers.size()) {
        co_return co_await h(req);
    }
    const handler next = [this, i, &h](request& r) { return call_from(i + 1, r, h); };
    co_return co_await layers[i](req, next);
}

auto server::state::enter(detail::connection* c) -> bool {
    std::lock_guard lock(mu);
    if (draining.load(std::memory_order_relaxed)) {
        return false;
    }
    c->next = conns;
    if (conns != nullptr) {
        conns->prev = c;
    }
    conns = c;
    return true;
}

void server::state::leave(detail::connection* c) {
    {
        std::lock_guard lock(mu);
        if (c != nullptr && (c->prev != nullptr || conns == c)) {
            (c->prev != nullptr ? c->prev->next : conns) = c->next;
            if (c->next != nullptr) {
                c->next->prev = c->prev;
            }
        }
        if (open.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
            draining.load(std::memory_order_relaxed)) {
            drained.set();
        }
    }
    slots.release();
}

server::server(server_options o) : st_(std::make_shared<state>(std::move(o))) {
    if (st_->opts.metrics) {
        st_->metrics = std::make_unique<detail::server_metrics>(
            *st_->opts.metrics, [s = st_.get()] { return stats_of(*s); });
    }
}
server::~server() = default;

void server::route(method m, std::string_view pattern, handler h, route_options o) {
    route(method_token(m), pattern, std::move(h), o);
}

void server::route(std::string_view m, std::string_view pattern, handler h, route_options o) {
    if (o.body_limit && *o.body_limit > st_->head_limits.body) {
        st_->head_limits.body = *o.body_limit;
    }
    st_->routes.add(m, pattern, std::move(h), o);
    st_->patterns.emplace_back(pattern);
    if (st_->metrics) {
        st_->metrics->add_route(m, pattern);
    }
}

void server::websocket(std::string_view pattern, websocket_handler h, websocket_options o) {
    st_->routes.add("GET", pattern,
                    detail::websocket_route{std::make_shared<detail::websocket_route_data>(
                        detail::websocket_route_data{std::move(h), std::move(o)})});
}

void server::use(middleware m) { st_->layers.push_back(std::move(m)); }

auto server::options() const noexcept -> const server_options& { return st_->opts; }

auto server::stats() const noexcept -> server_stats { return stats_of(*st_); }

auto server::serve(tcp_listener& l) -> task<void> { return accept_loop(st_, l); }

auto server::serve(byte_listener& l) -> task<void> {
    if (st_->opts.tls) {
        throw std::logic_error("weft::http::server::serve: TLS needs a tcp_listener");
    }
    return accept_loop(st_, l);
}

auto server::listen(socket_address addr) -> task<result<void>> {
    const auto rt = this_runtime();
    if (!rt) {
        throw std::logic_error("weft::http::server::listen: not on a weft::runtime worker");
    }
    const bool per_core = !rt->stealing && rt->workers > 1;
    const unsigned n = per_core ? rt->workers : 1;
    std::vector<tcp_listener> ls;
    for (unsigned i = 0; i < n; ++i) {
        auto l = tcp_listener::bind(
            addr,
            {.backlog = 4096, .reuse_port = per_core, .defer_accept = st_->opts.defer_accept});
        if (!l) {
            co_return l.error();
        }
        if (i == 0) {
            auto bound = l->local_address();
            if (!bound) {
                co_return bound.error();
            }
            addr = *bound;  // port 0: every listener takes the port the first one got
        }
        ls.push_back(std::move(*l));
    }
    if (st_->opts.on_listening) {
        st_->opts.on_listening(addr);
    }
    co_await with_scope([&](scope& s) -> task<void> {
        for (unsigned i = 0; i < n; ++i) {
            if (per_core) {
                co_await switch_to_worker(i);  // s.spawn queues on worker i, where it stays
            }
            s.spawn(serve(ls[i]));
        }
    });
    co_return result<void>{};
}

auto server::shutdown() -> task<void> {
    std::shared_ptr<state> st = st_;
    bool wait = false;
    {
        std::lock_guard lock(st->mu);
        st->draining.store(true, std::memory_order_seq_cst);
        for (stop_state* a : st->acceptors) {
            a->request_stop();
        }
        for (detail::connection* c = st->conns; c != nullptr; c = c->next) {
            auto expected = detail::connection::phase::idle;
            if (c->state.compare_exchange_strong(expected, detail::connection::phase::closing,
                                                 std::memory_order_seq_cst)) {
                c->stop.request_stop();  // idle keep-alive: close it now
            } else if (event* h2 = c->drain_wake.load(std::memory_order_seq_cst)) {
                h2->set();  // HTTP/2: sends GOAWAY, serves its open streams, then closes
            }
        }
        for (detail::websocket_session* w : st->sessions) {
            w->drain();  // close 1001, then the peer's close within close_timeout
        }
        wait = st->open.load(std::memory_order_seq_cst) > 0;
        if (!wait) {
            st->drained.set();
        }
    }
    if (!wait) {
        co_return;
    }
    auto drained = [](std::shared_ptr<state> s) -> task<result<void>> {
        co_return co_await s->drained.wait();
    };
    const auto ok2 = co_await with_timeout(st->opts.drain_timeout, drained(st));
    if (!ok2) {
        std::lock_guard lock(st->mu);
        for (detail::connection* c = st->conns; c != nullptr; c = c->next) {
            c->stop.request_stop();  // past the drain timeout: cancel what is left
        }
    }
    (void)co_await st->drained.wait();
}

}  // namespace weft::http
