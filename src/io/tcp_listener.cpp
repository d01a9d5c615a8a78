#include "weft/io/tcp_listener.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "accept_queue.hpp"
#include "epoll_reactor.hpp"
#include "reactor.hpp"
#include "readiness.hpp"
#include "socket_setup.hpp"
#include "uring_awaiter.hpp"
#include "weft/io/tcp_stream.hpp"
#include "weft/sched/timer.hpp"

namespace weft {
namespace detail {

void accept_queue_closer::operator()(accept_queue* q) const noexcept { q->close(); }

}  // namespace detail

// ---- tcp_listener ----------------------------------------------------------------------------

tcp_listener::tcp_listener(tcp_listener&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)), h_(std::move(o.h_)), q_(std::move(o.q_)) {}

auto tcp_listener::operator=(tcp_listener&& o) noexcept -> tcp_listener& {
    if (this != &o) {
        close();
        fd_ = std::exchange(o.fd_, -1);
        h_ = std::move(o.h_);
        q_ = std::move(o.q_);
    }
    return *this;
}

tcp_listener::~tcp_listener() { close(); }

void tcp_listener::close() noexcept {
    h_.reset();
    q_.reset();  // cancels the multishot accept; the ring lets go of it after its last CQE
    if (fd_ >= 0) {
        ::close(fd_);
        fd_ = -1;
    }
}

auto tcp_listener::bind(socket_address addr, listen_options opts) -> result<tcp_listener> {
    const int fd = ::socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return detail::errno_code();
    }
    tcp_listener l;
    l.fd_ = fd;
    // Both made here, not on first accept, since several tasks may accept at once: the
    // multishot accept queue (io_uring) and the readiness state (epoll).
    l.q_.reset(new detail::accept_queue(fd));
    l.h_.reset(new detail::epoll_socket(fd));
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    // Linux copies a listener's TCP_NODELAY into every socket it accepts: set once here, it
    // costs no setsockopt per connection (test_http_server checks the accepted sockets).
    detail::set_nodelay(fd);
    if (opts.reuse_port && ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) {
        return detail::errno_code();
    }
    if (opts.defer_accept.count() > 0) {
        const int secs = static_cast<int>(opts.defer_accept.count());
        if (::setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &secs, sizeof(secs)) != 0) {
            return detail::errno_code();
        }
    }
    if (::bind(fd, addr.data(), addr.size()) != 0 || ::listen(fd, opts.backlog) != 0) {
        return detail::errno_code();
    }
    return l;
}

auto tcp_listener::local_address() const -> result<socket_address> {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
        return detail::errno_code();
    }
    return socket_address::from(reinterpret_cast<sockaddr*>(&ss), len);
}

auto tcp_listener::accept() -> task<result<tcp_stream>> {
    using namespace std::chrono_literals;
    auto backoff = 5ms;
    for (;;) {
        int fd = -1;
        int err = 0;
        if (detail::is_uring()) {
            const detail::accept_outcome o = co_await q_->next();
            if (o.single_shot) {
                const int lfd = fd_;
                const int res = co_await detail::uring_awaiter{[&](io_uring_sqe* sqe) {
                    io_uring_prep_accept(sqe, lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
                }};
                fd = res >= 0 ? res : -1;
                err = res >= 0 ? 0 : -res;
            } else if (o.fd < 0 && o.err == 0) {
                continue;  // the multishot operation ended: the next wait re-arms it
            } else {
                fd = o.fd;
                err = o.err;
            }
        } else {
            detail::epoll_socket& h = detail::handle_of(fd_, h_);
            const std::uint32_t seq = detail::readiness_seq(h, false);
            fd = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) {
                err = errno;
                if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR) {
                    if (auto ec = co_await detail::readiness(h, false, seq); ec) {
                        co_return ec;
                    }
                    continue;
                }
            }
        }
        if (fd >= 0) {
            // Accepted with SOCK_NONBLOCK and the listener's TCP_NODELAY: no system call here.
            co_return tcp_stream(fd, tcp_stream::nonblocking_fd{});
        }
        if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
            // Out of descriptors or memory: the connection waits in the backlog. Sleep (no busy
            // loop) and retry, backing off like Go's accept loop.
            detail::accept_backoffs_for_test.fetch_add(1, std::memory_order_relaxed);
            auto r = co_await sleep_for(backoff);
            if (!r) {
                co_return r.error();
            }
            backoff = std::min<std::chrono::milliseconds>(backoff * 2, 1s);
            continue;
        }
        if (err == ECONNABORTED || err == EPROTO || err == EINTR) {
            continue;  // that connection died in the backlog: take the next
        }
        co_return detail::errno_code(err);
    }
}

}  // namespace weft
