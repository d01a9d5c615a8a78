#include "weft/io/resolve.hpp"

#include <ares.h>
#include <arpa/inet.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "weft/io/fd_wait.hpp"

namespace weft {
namespace {

class resolve_category_impl final : public std::error_category {
public:
    auto name() const noexcept -> const char* override { return "weft.resolve"; }
    auto message(int c) const -> std::string override {
        switch (static_cast<resolve_errc>(c)) {
            case resolve_errc::not_found:
                return "host not found";
            case resolve_errc::no_address:
                return "host has no address of the requested family";
            case resolve_errc::timed_out:
                return "no name server answered in time";
            case resolve_errc::server_failure:
                return "name server failure";
            case resolve_errc::bad_name:
                return "malformed host name";
            case resolve_errc::bad_servers:
                return "malformed name server list";
        }
        return "unknown resolve error";
    }
    auto default_error_condition(int c) const noexcept -> std::error_condition override {
        if (static_cast<resolve_errc>(c) == resolve_errc::timed_out) {
            return std::errc::timed_out;
        }
        return {c, *this};
    }
};

auto is_localhost(std::string_view h) -> bool {
    auto lower_eq = [](std::string_view a, std::string_view b) {
        return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
            return (x >= 'A' && x <= 'Z' ? x - 'A' + 'a' : x) == y;
        });
    };
    if (!h.empty() && h.back() == '.') {
        h.remove_suffix(1);
    }
    return lower_eq(h, "localhost") ||
           (h.size() > 10 && lower_eq(h.substr(h.size() - 10), ".localhost"));
}

auto with_port(std::vector<socket_address> v, std::uint16_t port) -> std::vector<socket_address> {
    for (auto& a : v) {
        sockaddr_storage ss{};
        std::memcpy(&ss, a.data(), a.size());
        if (ss.ss_family == AF_INET6) {
            reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port = htons(port);
        } else {
            reinterpret_cast<sockaddr_in*>(&ss)->sin_port = htons(port);
        }
        a = socket_address::from(reinterpret_cast<const sockaddr*>(&ss), a.size());
    }
    return v;
}

/// Answers by (family, servers, host), each until its expiry. Bounded: a full cache first
/// drops what has expired, then everything (a resolver is not a store; a refill costs one
/// query per name).
class answer_cache {
public:
    using clock = std::chrono::steady_clock;
    static constexpr std::size_t capacity = 4096;

    auto find(const std::string& key) -> std::optional<std::vector<socket_address>> {
        const std::lock_guard lock(m_);
        auto it = map_.find(key);
        if (it == map_.end()) {
            return std::nullopt;
        }
        if (clock::now() >= it->second.expiry) {
            map_.erase(it);
            return std::nullopt;
        }
        return it->second.addresses;
    }
    void put(std::string key, std::vector<socket_address> addresses, clock::time_point expiry) {
        const std::lock_guard lock(m_);
        if (map_.size() >= capacity) {
            const auto now = clock::now();
            std::erase_if(map_, [&](const auto& kv) { return now >= kv.second.expiry; });
            if (map_.size() >= capacity) {
                map_.clear();
            }
        }
        map_[std::move(key)] = entry{std::move(addresses), expiry};
    }

private:
    struct entry {
        std::vector<socket_address> addresses;
        clock::time_point expiry;
    };
    std::mutex m_;
    std::unordered_map<std::string, entry> map_;
};

auto cache() -> answer_cache& {
    static answer_cache c;
    return c;
}

auto from_ares(int status) -> std::error_code {
    switch (status) {
        case ARES_ENOTFOUND:
            return resolve_errc::not_found;
        case ARES_ENODATA:
            return resolve_errc::no_address;
        case ARES_ETIMEOUT:
            return resolve_errc::timed_out;
        case ARES_EBADNAME:
            return resolve_errc::bad_name;
        case ARES_ENOMEM:
            return std::make_error_code(std::errc::not_enough_memory);
        case ARES_ECANCELLED:
        case ARES_EDESTRUCTION:
            return std::make_error_code(std::errc::operation_canceled);
        default:
            return resolve_errc::server_failure;
    }
}

/// One lookup: a c-ares channel of its own whose sockets are gathered in an epoll instance,
/// which the awaiting worker's reactor watches through wait_readable. c-ares tells us which
/// sockets to watch (sock_state_cb) and what to do on a timeout (ares_timeout); the channel
/// is destroyed, its sockets closed, before the lookup returns, whatever ended it.
///
/// Invariant: the channel, the epoll instance and `done`/`status`/`found` live in this frame;
/// every c-ares callback runs inside ares_process_fd or ares_destroy, called only from here.
class lookup {
public:
    lookup() = default;
    lookup(const lookup&) = delete;
    auto operator=(const lookup&) -> lookup& = delete;
    ~lookup() {
        if (channel_ != nullptr) {
            ares_destroy(channel_);
        }
        if (epfd_ >= 0) {
            ::close(epfd_);
        }
    }

    auto run(const std::string& host, const resolve_options& o) -> task<std::error_code> {
        static std::once_flag init;
        std::call_once(init, [] { ares_library_init(ARES_LIB_INIT_ALL); });
        epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
        if (epfd_ < 0) {
            co_return std::error_code(errno, std::system_category());
        }
        ares_options ao{};
        ao.sock_state_cb = &lookup::on_socket_state;
        ao.sock_state_cb_data = this;
        ao.timeout = static_cast<int>(std::max<std::int64_t>(1, o.attempt_timeout.count()));
        ao.tries = static_cast<int>(
            std::max<std::int64_t>(1, o.timeout.count() / std::max<std::int64_t>(1, ao.timeout)));
        char lookups[] = "fb";  // the hosts file, then DNS
        ao.lookups = lookups;
        const int mask =
            ARES_OPT_SOCK_STATE_CB | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_LOOKUPS;
        if (const int s = ares_init_options(&channel_, &ao, mask); s != ARES_SUCCESS) {
            channel_ = nullptr;
            co_return from_ares(s);
        }
        if (!o.servers.empty() &&
            ares_set_servers_ports_csv(channel_, o.servers.c_str()) != ARES_SUCCESS) {
            co_return resolve_errc::bad_servers;
        }
        ares_addrinfo_hints hints{};
        hints.ai_family = o.family;
        hints.ai_flags = ARES_AI_NOSORT;  // keep the server's order; connect() interleaves
        ares_getaddrinfo(channel_, host.c_str(), nullptr, &hints, &lookup::on_answer, this);
        const auto deadline = std::chrono::steady_clock::now() + o.timeout;
        while (!done_) {
            const auto now = std::chrono::steady_clock::now();
            if (now >= deadline) {
                co_return resolve_errc::timed_out;
            }
            auto wait = std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
            timeval tv{};
            if (const timeval* t = ares_timeout(channel_, nullptr, &tv); t != nullptr) {
                wait = std::min(
                    wait, std::chrono::milliseconds(t->tv_sec * 1000 + (t->tv_usec + 999) / 1000));
            }
            auto r = co_await wait_readable(epfd_, std::max(wait, std::chrono::milliseconds(1)));
            if (!r && r.error() != std::errc::timed_out) {
                co_return r.error();  // cancelled: ~lookup abandons the queries
            }
            epoll_event ev[8];
            const int n = ::epoll_wait(epfd_, ev, 8, 0);
            if (n <= 0) {
                ares_process_fd(channel_, ARES_SOCKET_BAD, ARES_SOCKET_BAD);  // timeouts
            }
            for (int i = 0; i < n; ++i) {
                const int fd = ev[i].data.fd;
                const bool rd = (ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) != 0;
                const bool wr = (ev[i].events & EPOLLOUT) != 0;
                ares_process_fd(channel_, rd ? fd : ARES_SOCKET_BAD, wr ? fd : ARES_SOCKET_BAD);
            }
        }
        co_return status_ == ARES_SUCCESS ? std::error_code{} : from_ares(status_);
    }

    [[nodiscard]] auto addresses() -> std::vector<socket_address>& { return found_; }
    [[nodiscard]] auto ttl() const noexcept -> std::chrono::seconds { return ttl_; }

private:
    static void on_socket_state(void* data, ares_socket_t fd, int readable, int writable) {
        auto* self = static_cast<lookup*>(data);
        if (readable == 0 && writable == 0) {
            ::epoll_ctl(self->epfd_, EPOLL_CTL_DEL, fd, nullptr);
            return;
        }
        epoll_event ev{};
        ev.events = (readable != 0 ? EPOLLIN : 0U) | (writable != 0 ? EPOLLOUT : 0U);
        ev.data.fd = fd;
        if (::epoll_ctl(self->epfd_, EPOLL_CTL_MOD, fd, &ev) != 0) {
            ::epoll_ctl(self->epfd_, EPOLL_CTL_ADD, fd, &ev);
        }
    }

    static void on_answer(void* arg, int status, int /*timeouts*/, ares_addrinfo* ai) {
        auto* self = static_cast<lookup*>(arg);
        self->done_ = true;
        self->status_ = status;
        if (ai == nullptr) {
            return;
        }
        std::int64_t ttl = INT32_MAX;
        for (const ares_addrinfo_node* n = ai->nodes; n != nullptr; n = n->ai_next) {
            self->found_.push_back(
                socket_address::from(n->ai_addr, static_cast<socklen_t>(n->ai_addrlen)));
            ttl = std::min<std::int64_t>(ttl, std::max(0, n->ai_ttl));
        }
        self->ttl_ = std::chrono::seconds(self->found_.empty() ? 0 : ttl);
        ares_freeaddrinfo(ai);
        if (status == ARES_SUCCESS && self->found_.empty()) {
            self->status_ = ARES_ENODATA;
        }
    }

    ares_channel channel_ = nullptr;
    int epfd_ = -1;
    bool done_ = false;
    int status_ = ARES_SUCCESS;
    std::vector<socket_address> found_;
    std::chrono::seconds ttl_{0};
};

}  // namespace

auto resolve_category() noexcept -> const std::error_category& {
    static const resolve_category_impl c;
    return c;
}

auto resolve_result::message() const -> std::string {
    if (!error_) {
        return {};
    }
    return "resolve " + host_ + ": " + error_.message();
}

auto resolve_result::value() const& -> const std::vector<socket_address>& {
    if (error_) {
        throw std::system_error(error_, "resolve " + host_);
    }
    return addresses_;
}

auto resolve_result::value() && -> std::vector<socket_address> {
    if (error_) {
        throw std::system_error(error_, "resolve " + host_);
    }
    return std::move(addresses_);
}

auto resolve(std::string host, std::uint16_t port, resolve_options options)
    -> task<resolve_result> {
    std::string name = std::move(host);
    std::string_view numeric = name;
    if (numeric.size() > 2 && numeric.front() == '[' && numeric.back() == ']') {
        numeric = numeric.substr(1, numeric.size() - 2);
    }
    if (auto a = socket_address::parse(numeric, port); a) {
        std::vector<socket_address> one{*a};
        co_return resolve_result{std::move(name), std::move(one)};
    }
    if (name.empty() || name.size() > 253) {
        co_return resolve_result{std::move(name), make_error_code(resolve_errc::bad_name)};
    }
    if (is_localhost(name)) {
        std::vector<socket_address> v;
        if (options.family != AF_INET) {
            v.push_back(socket_address::parse("::1", port).value());
        }
        if (options.family != AF_INET6) {
            v.push_back(socket_address::parse("127.0.0.1", port).value());
        }
        co_return resolve_result{std::move(name), std::move(v)};
    }
    std::string key = std::to_string(options.family) + ' ' + options.servers + ' ' + name;
    if (auto hit = cache().find(key)) {
        co_return resolve_result{std::move(name), with_port(std::move(*hit), port)};
    }
    lookup l;
    if (const std::error_code ec = co_await l.run(name, options); ec) {
        co_return resolve_result{std::move(name), ec};
    }
    const auto ttl = std::min(l.ttl(), options.max_ttl);
    if (ttl.count() > 0) {
        cache().put(std::move(key), l.addresses(), answer_cache::clock::now() + ttl);
    }
    co_return resolve_result{std::move(name), with_port(std::move(l.addresses()), port)};
}

}  // namespace weft
