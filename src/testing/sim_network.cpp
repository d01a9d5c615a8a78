#include "weft/testing/sim_network.hpp"

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <system_error>
#include <utility>

#include "weft/io/error.hpp"
#include "weft/sched/runtime_clock.hpp"
#include "weft/sched/timer.hpp"
#include "weft/sync/event.hpp"

namespace weft::testing {

namespace detail {

using time_point = runtime_clock::time_point;

// One direction of a connection. Bytes written at t wait in `q` until t + latency and until no
// partition separates `from` and `to`; the reader takes them from the front (`off` of the front
// segment taken already). States: open; fin (the writer shut down: eof once q is read and
// fin_at is reached); reset (every operation fails, q dropped); reader_gone (the reading end
// was destroyed: a write resets the connection, as TCP answers data to a closed socket).
struct sim_pipe {
    struct segment {
        std::string data;
        time_point at;
    };
    std::uint64_t conn = 0;
    std::string from;
    std::string to;
    std::deque<segment> q;
    std::size_t off = 0;
    bool fin = false;
    time_point fin_at{};
    bool reset = false;
    bool reader_gone = false;
    // Auto reset: a change that comes while the reader is not waiting is kept for its next
    // wait, so none is lost between its check (under the lock) and its wait.
    event changed{event::reset_mode::automatic};
};

struct sim_listener_state {
    std::deque<std::unique_ptr<byte_stream>> pending;
    bool closed = false;
    event ready{event::reset_mode::automatic};
};

struct sim_net_state {
    std::mutex mu;
    sim_network_options opts;
    std::map<std::pair<std::string, std::uint16_t>, std::shared_ptr<sim_listener_state>> listeners;
    std::set<std::pair<std::string, std::string>> partitions;  // (a, b) with a < b
    std::vector<std::weak_ptr<sim_pipe>> pipes;
    std::map<std::string, socket_address, std::less<>> addresses;
    std::uint64_t next_conn = 1;
    std::uint16_t next_port = 40000;
    std::optional<time_point> start;
    std::vector<std::string> events;

    static auto key(std::string_view a, std::string_view b) -> std::pair<std::string, std::string> {
        return a < b ? std::pair{std::string(a), std::string(b)}
                     : std::pair{std::string(b), std::string(a)};
    }
    // Under mu.
    [[nodiscard]] auto parted(std::string_view a, std::string_view b) const -> bool {
        return partitions.contains(key(a, b));
    }
    void record(std::string what) {
        const auto now = runtime_clock::now();
        if (!start) {
            start = now;
        }
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - *start);
        events.push_back(std::to_string(ms.count()) + "ms " + std::move(what));
    }
    auto address(std::string_view host) -> socket_address {
        auto it = addresses.find(host);
        if (it == addresses.end()) {
            const auto n = addresses.size() + 1;
            const std::string ip =
                "10.0." + std::to_string((n >> 8) & 255) + "." + std::to_string(n & 255);
            it = addresses.emplace(std::string(host), socket_address::parse(ip, 0).value()).first;
        }
        return it->second;
    }
    // Wakes the reader of every pipe between a and b (either way).
    void touch(std::string_view a, std::string_view b) {
        std::erase_if(pipes, [](const std::weak_ptr<sim_pipe>& w) { return w.expired(); });
        for (const auto& w : pipes) {
            if (auto p = w.lock(); p && key(p->from, p->to) == key(a, b)) {
                p->changed.set();
            }
        }
    }
};

}  // namespace detail

namespace {

using detail::sim_net_state;
using detail::sim_pipe;
using detail::time_point;

auto with_port(socket_address a, std::uint16_t port) -> socket_address {
    std::string host = a.to_string();
    host = host.substr(0, host.rfind(':'));
    return socket_address::parse(host, port).value();
}

auto label(const sim_pipe& p) -> std::string {
    return "#" + std::to_string(p.conn) + " " + p.from + ">" + p.to;
}

// Waits for a change of `p`, or until `until` (a segment or the fin falls due).
auto wait_change(sim_pipe& p, std::optional<time_point> until) -> task<result<void>> {
    if (!until) {
        co_return co_await p.changed.wait();
    }
    auto waiting = [](sim_pipe& q) -> task<result<void>> { co_return co_await q.changed.wait(); };
    auto r = co_await with_timeout(*until - runtime_clock::now(), waiting(p));
    if (!r) {
        if (r.error() == std::errc::timed_out) {
            co_return result<void>{};  // the time came
        }
        co_return r.error();
    }
    co_return *r;
}

class sim_stream final : public byte_stream {
public:
    sim_stream(std::shared_ptr<sim_net_state> st,
               std::shared_ptr<sim_pipe> in,
               std::shared_ptr<sim_pipe> out,
               socket_address peer)
        : st_(std::move(st)), in_(std::move(in)), out_(std::move(out)), peer_(peer) {}
    sim_stream(const sim_stream&) = delete;
    auto operator=(const sim_stream&) -> sim_stream& = delete;

    // Closing: the peer reads eof after what was written (a FIN), and later writes of the peer
    // reset the connection.
    ~sim_stream() override {
        std::lock_guard lock(st_->mu);
        in_->reader_gone = true;
        if (!out_->fin && !out_->reset) {
            out_->fin = true;
            out_->fin_at = due();
            st_->record(label(*out_) + " close");
        }
        out_->changed.set();
    }

    using byte_stream::write_all;

    auto receive() -> task<result<bytes>> override {
        std::string got;
        if (auto r = co_await take(got, 4096); !r) {
            co_return r.error();
        }
        co_return bytes::copy_of(std::as_bytes(std::span{got}));
    }

    auto read_some(std::span<std::byte> buf) -> task<result<std::size_t>> override {
        std::string got;
        if (auto r = co_await take(got, buf.size()); !r) {
            co_return r.error();
        }
        std::memcpy(buf.data(), got.data(), got.size());
        co_return got.size();
    }

    auto write_all(std::span<const std::span<const std::byte>> bufs)
        -> task<result<void>> override {
        std::string data;
        for (const auto& b : bufs) {
            data.append(reinterpret_cast<const char*>(b.data()), b.size());
        }
        std::lock_guard lock(st_->mu);
        if (out_->reset) {
            co_return std::make_error_code(std::errc::connection_reset);
        }
        if (out_->fin) {
            co_return std::make_error_code(std::errc::broken_pipe);
        }
        if (out_->reader_gone) {
            reset_locked();
            co_return std::make_error_code(std::errc::connection_reset);
        }
        if (data.empty()) {
            co_return result<void>{};
        }
        st_->record(label(*out_) + " send " + std::to_string(data.size()));
        time_point at = due();
        if (!out_->q.empty()) {
            at = std::max(at, out_->q.back().at);
        }
        out_->q.push_back({std::move(data), at});
        out_->changed.set();
        co_return result<void>{};
    }

    auto wait_writable() -> task<result<void>> override {
        std::lock_guard lock(st_->mu);
        if (out_->reset) {
            co_return std::make_error_code(std::errc::connection_reset);
        }
        co_return result<void>{};
    }

    auto shutdown_write() noexcept -> result<void> override {
        std::lock_guard lock(st_->mu);
        if (out_->reset) {
            return std::make_error_code(std::errc::connection_reset);
        }
        if (!out_->fin) {
            out_->fin = true;
            out_->fin_at = due();
            st_->record(label(*out_) + " fin");
            out_->changed.set();
        }
        return result<void>{};
    }

    auto peer_address() const -> result<socket_address> override { return peer_; }

    // Under st_->mu: both directions fail from now on.
    void reset_locked() {
        for (sim_pipe* p : {in_.get(), out_.get()}) {
            if (!p->reset) {
                p->reset = true;
                p->q.clear();
                p->off = 0;
                p->changed.set();
            }
        }
        st_->record(label(*out_) + " reset");
    }

private:
    // Under st_->mu: when a write made now arrives.
    [[nodiscard]] auto due() const -> time_point {
        return runtime_clock::now() + st_->opts.latency;
    }

    // Takes what has arrived (at least 1 byte, at most `most`; 1 in byte-by-byte mode).
    auto take(std::string& got, std::size_t most) -> task<result<void>> {
        for (;;) {
            std::optional<time_point> until;
            {
                std::lock_guard lock(st_->mu);
                sim_pipe& p = *in_;
                if (p.reset) {
                    co_return std::make_error_code(std::errc::connection_reset);
                }
                const auto now = runtime_clock::now();
                const bool parted = st_->parted(p.from, p.to);
                if (!parted && !p.q.empty()) {
                    auto& front = p.q.front();
                    if (front.at <= now) {
                        if (st_->opts.byte_by_byte) {
                            most = 1;
                        }
                        const std::size_t n = std::min(most, front.data.size() - p.off);
                        got.assign(front.data, p.off, n);
                        p.off += n;
                        if (p.off == front.data.size()) {
                            p.q.pop_front();
                            p.off = 0;
                        }
                        st_->record(label(p) + " recv " + std::to_string(n));
                        co_return result<void>{};
                    }
                    until = front.at;
                } else if (!parted && p.fin) {
                    if (p.fin_at <= now) {
                        st_->record(label(p) + " eof");
                        co_return make_error_code(io_errc::eof);
                    }
                    until = p.fin_at;
                }
            }
            if (auto r = co_await wait_change(*in_, until); !r) {
                co_return r.error();
            }
        }
    }

    std::shared_ptr<sim_net_state> st_;
    std::shared_ptr<sim_pipe> in_;
    std::shared_ptr<sim_pipe> out_;
    socket_address peer_;
};

class sim_listener final : public byte_listener {
public:
    sim_listener(std::shared_ptr<sim_net_state> st,
                 std::shared_ptr<detail::sim_listener_state> ls,
                 std::pair<std::string, std::uint16_t> at)
        : st_(std::move(st)), ls_(std::move(ls)), at_(std::move(at)) {}
    sim_listener(const sim_listener&) = delete;
    auto operator=(const sim_listener&) -> sim_listener& = delete;
    ~sim_listener() override {
        std::deque<std::unique_ptr<byte_stream>> dropped;  // closed after the lock: they take it
        std::lock_guard lock(st_->mu);
        st_->listeners.erase(at_);
        ls_->closed = true;
        dropped.swap(ls_->pending);
    }

    auto accept() -> task<result<std::unique_ptr<byte_stream>>> override {
        for (;;) {
            {
                std::lock_guard lock(st_->mu);
                if (!ls_->pending.empty()) {
                    auto s = std::move(ls_->pending.front());
                    ls_->pending.pop_front();
                    co_return s;
                }
            }
            if (auto r = co_await ls_->ready.wait(); !r) {
                co_return r.error();
            }
        }
    }

private:
    std::shared_ptr<sim_net_state> st_;
    std::shared_ptr<detail::sim_listener_state> ls_;
    std::pair<std::string, std::uint16_t> at_;
};

}  // namespace

sim_network::sim_network(sim_network_options o) : st_(std::make_shared<sim_net_state>()) {
    st_->opts = o;
}

sim_network::~sim_network() = default;

auto sim_network::listen(std::string_view host, std::uint16_t port)
    -> std::unique_ptr<byte_listener> {
    std::lock_guard lock(st_->mu);
    std::pair<std::string, std::uint16_t> at{std::string(host), port};
    if (st_->listeners.contains(at)) {
        throw std::system_error(std::make_error_code(std::errc::address_in_use),
                                "weft::testing::sim_network::listen " + at.first);
    }
    auto ls = std::make_shared<detail::sim_listener_state>();
    st_->listeners.emplace(at, ls);
    (void)st_->address(host);
    st_->record("listen " + at.first + ":" + std::to_string(port));
    return std::make_unique<sim_listener>(st_, std::move(ls), std::move(at));
}

auto sim_network::connect(std::string_view from, std::string_view host, std::uint16_t port)
    -> task<result<std::unique_ptr<byte_stream>>> {
    const std::string client(from);
    const std::string server(host);
    std::shared_ptr<sim_net_state> st = st_;
    std::chrono::milliseconds latency{};
    std::unique_ptr<byte_stream> mine;
    {
        std::lock_guard lock(st->mu);
        auto it = st->listeners.find({server, port});
        if (it == st->listeners.end()) {
            st->record("refused " + client + ">" + server + ":" + std::to_string(port));
            co_return std::make_error_code(std::errc::connection_refused);
        }
        if (st->parted(client, server)) {
            st->record("unreachable " + client + ">" + server + ":" + std::to_string(port));
            co_return std::make_error_code(std::errc::network_unreachable);
        }
        const std::uint64_t id = st->next_conn++;
        auto up = std::make_shared<sim_pipe>();
        up->conn = id;
        up->from = client;
        up->to = server;
        auto down = std::make_shared<sim_pipe>();
        down->conn = id;
        down->from = server;
        down->to = client;
        st->pipes.push_back(up);
        st->pipes.push_back(down);
        const std::uint16_t client_port = st->next_port++;
        const socket_address server_addr = with_port(st->address(server), port);
        const socket_address client_addr = with_port(st->address(client), client_port);
        mine = std::make_unique<sim_stream>(st, down, up, server_addr);
        it->second->pending.push_back(std::make_unique<sim_stream>(st, up, down, client_addr));
        it->second->ready.set();
        st->record("#" + std::to_string(id) + " connect " + client + ">" + server + ":" +
                   std::to_string(port));
        latency = st->opts.latency;
    }
    if (latency.count() > 0) {
        if (auto r = co_await sleep_for(2 * latency); !r) {
            co_return r.error();  // `mine` closes: the server reads eof
        }
    }
    co_return mine;
}

void sim_network::partition(std::string_view a, std::string_view b) {
    std::lock_guard lock(st_->mu);
    st_->partitions.insert(sim_net_state::key(a, b));
    st_->record("partition " + std::string(a) + "|" + std::string(b));
}

void sim_network::heal(std::string_view a, std::string_view b) {
    std::lock_guard lock(st_->mu);
    st_->partitions.erase(sim_net_state::key(a, b));
    st_->record("heal " + std::string(a) + "|" + std::string(b));
    st_->touch(a, b);
}

void sim_network::reset(std::string_view a, std::string_view b) {
    std::lock_guard lock(st_->mu);
    st_->record("reset " + std::string(a) + "|" + std::string(b));
    std::erase_if(st_->pipes, [](const std::weak_ptr<sim_pipe>& w) { return w.expired(); });
    for (const auto& w : st_->pipes) {
        if (auto p = w.lock();
            p && sim_net_state::key(p->from, p->to) == sim_net_state::key(a, b)) {
            if (!p->reset) {
                p->reset = true;
                p->q.clear();
                p->off = 0;
                p->changed.set();
            }
        }
    }
}

void sim_network::set_latency(std::chrono::milliseconds d) {
    std::lock_guard lock(st_->mu);
    st_->opts.latency = d;
}

void sim_network::set_byte_by_byte(bool on) {
    std::lock_guard lock(st_->mu);
    st_->opts.byte_by_byte = on;
}

auto sim_network::address_of(std::string_view host) -> socket_address {
    std::lock_guard lock(st_->mu);
    return st_->address(host);
}

auto sim_network::trace() const -> std::vector<std::string> {
    std::lock_guard lock(st_->mu);
    return st_->events;
}

}  // namespace weft::testing
