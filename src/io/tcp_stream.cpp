#include "weft/io/tcp_stream.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "epoll_reactor.hpp"
#include "kernel_writes.hpp"
#include "reactor.hpp"
#include "readiness.hpp"
#include "recv_queue.hpp"
#include "socket_setup.hpp"
#include "syscalls.hpp"
#include "uring_awaiter.hpp"
#include "uring_reactor.hpp"
#include "weft/io/buffer.hpp"
#include "weft/sched/timer.hpp"

namespace weft {
namespace detail {

void recv_queue_closer::operator()(recv_queue* q) const noexcept { q->close(); }

void epoll_socket_deleter::operator()(epoll_socket* h) const noexcept {
    epoll_reactor* owner = nullptr;
    {
        std::lock_guard lock(h->mu);
        owner = h->owner;
    }
    if (owner != nullptr) {
        owner->retire(h);  // freed by its reactor once no event can name it
    } else {
        delete h;
    }
}

}  // namespace detail

// ---- tcp_stream ------------------------------------------------------------------------------

tcp_stream::tcp_stream(int fd) noexcept : fd_(fd) {
    if (fd_ >= 0) {
        detail::set_nonblocking(fd_);
    }
}

tcp_stream::tcp_stream(tcp_stream&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)), h_(std::move(o.h_)), rq_(std::move(o.rq_)) {}

auto tcp_stream::operator=(tcp_stream&& o) noexcept -> tcp_stream& {
    if (this != &o) {
        close();
        fd_ = std::exchange(o.fd_, -1);
        h_ = std::move(o.h_);
        rq_ = std::move(o.rq_);
    }
    return *this;
}

tcp_stream::~tcp_stream() { close(); }

void tcp_stream::close() noexcept {
    rq_.reset();  // cancels the multishot receive; the ring lets go after its last CQE
    h_.reset();   // unregisters from epoll before the fd number can be reused
    if (fd_ >= 0) {
        ::close(fd_);
        fd_ = -1;
    }
}

auto tcp_stream::shutdown_write() noexcept -> result<void> {
    if (::shutdown(fd_, SHUT_WR) != 0) {
        return detail::errno_code();
    }
    return {};
}

auto tcp_stream::peer_address() const -> result<socket_address> {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
        return detail::errno_code();
    }
    return socket_address::from(reinterpret_cast<sockaddr*>(&ss), len);
}

auto tcp_stream::connect(socket_address addr) -> task<result<tcp_stream>> {
    const int fd = ::socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        co_return detail::errno_code();
    }
    tcp_stream s(fd);
    if (detail::is_uring()) {
        const int res = co_await detail::uring_awaiter{
            [&](io_uring_sqe* sqe) { io_uring_prep_connect(sqe, fd, addr.data(), addr.size()); }};
        if (res < 0) {
            co_return std::error_code(-res, std::system_category());
        }
    } else {
        if (::connect(fd, addr.data(), addr.size()) != 0) {
            if (errno != EINPROGRESS) {
                co_return detail::errno_code();
            }
            detail::epoll_socket& h = detail::handle_of(fd, s.h_);
            const std::uint32_t seq = detail::readiness_seq(h, true);
            if (auto ec = co_await detail::readiness(h, true, seq); ec) {
                co_return ec;
            }
            int err = 0;
            socklen_t len = sizeof(err);
            ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
            if (err != 0) {
                co_return detail::errno_code(err);
            }
        }
    }
    detail::set_nodelay(fd);
    co_return std::move(s);
}

auto tcp_stream::connect(socket_address addr, std::chrono::milliseconds timeout)
    -> task<result<tcp_stream>> {
    auto r = co_await with_timeout(timeout, connect(addr));
    if (!r) {
        co_return r.error();  // timed_out
    }
    co_return std::move(*r);
}

namespace detail {
namespace {

/// A stream that received through the multishot receive (recv_queue) and is now read where it
/// cannot be used (an epoll runtime): what the queue still holds, in order (the operation is
/// first ended on its ring, if armed there), then nullopt once it is empty, having dropped it.
/// The caller then reads the socket itself. NOTE: noinline: see channel::recv_for.
[[gnu::noinline]] auto read_left_behind(std::unique_ptr<recv_queue, recv_queue_closer>& rq)
    -> task<std::optional<result<bytes>>> {
    for (;;) {
        recv_outcome o = co_await rq->next(/*may_arm=*/false);
        if (!o.data.empty()) {
            co_return result<bytes>(std::move(o.data));
        }
        if (o.err) {
            co_return result<bytes>(o.err);  // eof or an error after the data, or cancelled
        }
        if (!o.heap_read) {
            break;  // nothing queued, nothing armed
        }
    }
    rq.reset();
    co_return std::nullopt;
}
// One io_uring receive into `buf`: a count, eof, or the error.
auto recv_once(int fd, std::span<std::byte> buf) {
    return uring_awaiter{
        [=](io_uring_sqe* sqe) { io_uring_prep_recv(sqe, fd, buf.data(), buf.size(), 0); }};
}
// The result of a recv_once into `buf`: the kernel wrote `res` bytes of it when positive.
auto recv_result(std::span<std::byte> buf, int res) -> result<std::size_t> {
    if (res > 0) {
        kernel_wrote(buf.data(), static_cast<std::size_t>(res));
        return static_cast<std::size_t>(res);
    }
    if (res == 0) {
        return make_error_code(io_errc::eof);
    }
    return std::error_code(-res, std::system_category());
}
}  // namespace
}  // namespace detail

auto tcp_stream::read_some(std::span<std::byte> buf) -> task<result<std::size_t>> {
    if (rq_) {
        // receive() armed the multishot receive: read through its queue (see receive). Here
        // without it (moved to an epoll runtime), only until it is empty.
        const bool multishot = detail::is_uring() && detail::current_uring().buffers() != nullptr;
        std::optional<result<bytes>> got;
        if (multishot) {
            got = co_await receive();
        } else {
            got = co_await detail::read_left_behind(rq_);
        }
        if (got) {
            if (!*got) {
                co_return got->error();
            }
            bytes& b = **got;
            const std::size_t n = std::min(b.size(), buf.size());
            std::memcpy(buf.data(), b.data(), n);
            if (n < b.size()) {
                rq_->unread(b.slice(n, b.size() - n));
            }
            co_return n;
        }
    }
    if (detail::is_uring()) {
        auto op = detail::recv_once(fd_, buf);
        co_return detail::recv_result(buf, co_await op);
    }
    detail::epoll_socket& h = detail::handle_of(fd_, h_);
    auto recv_now = [&] { return detail::sys_recv(fd_, buf.data(), buf.size(), MSG_DONTWAIT); };
    detail::attempt_outcome o = detail::attempt_once(h, false, buf.size(), recv_now);
    if (o.wait) {
        o.value = co_await detail::wait_then_retry(h, false, buf.size(), o.seq, recv_now);
    }
    result<std::size_t>& n = o.value;
    if (n && *n == 0) {
        co_return make_error_code(io_errc::eof);
    }
    co_return n;
}

namespace detail {
namespace {

using recv_queue_ptr = std::unique_ptr<recv_queue, recv_queue_closer>;
using epoll_handle_ptr = std::unique_ptr<epoll_socket, epoll_socket_deleter>;

// tcp_stream::receive's paths, one coroutine each: a frame holds every local of every branch of
// its body (g++ 12 gives each its own slot), and the frame of the receive an idle connection
// waits in lives as long as the wait, so each holds only its own path's awaiters. NOTE: noinline,
// so that no frame is placed inside another (see channel::recv_for).

// Into a pooled block: the kernel has no provided-buffer rings, or they ran out.
[[gnu::noinline]] auto receive_into_block(int fd) -> task<result<bytes>> {
    constexpr std::size_t chunk = provided_buffer_ring::size;
    buffer b{chunk};
    const std::span<std::byte> into = b.prepare(chunk);
    auto op = recv_once(fd, into);
    auto n = recv_result(into, co_await op);
    if (!n) {
        co_return n.error();
    }
    b.commit(*n);
    co_return std::move(b).freeze();
}

[[gnu::noinline]] auto receive_multishot(int fd, recv_queue_ptr& rq) -> task<result<bytes>> {
    if (!rq) {
        rq.reset(new recv_queue(fd));
    }
    for (;;) {
        // The awaiter named and the outcome read where it lies in it: an idle connection waits
        // in this frame, which would otherwise hold a second outcome.
        recv_awaiter next = rq->next();
        recv_outcome&& o = co_await next;
        if (!o.data.empty()) {
            co_return std::move(o.data);
        }
        if (o.err) {
            co_return o.err;
        }
        if (o.heap_read) {
            break;  // every pooled buffer is out (the operation ended: nothing else reads the
                    // socket meanwhile)
        }
        // The operation ended (cancelled when a lagging reader let chunks pile up, say): the
        // next wait arms it again.
    }
    auto got = co_await receive_into_block(fd);
    co_return got;
}

// epoll: wait for data first, then take a buffer, so a waiting connection holds none.
[[gnu::noinline]] auto receive_when_ready(int fd, epoll_handle_ptr& hp) -> task<result<bytes>> {
    constexpr std::size_t chunk = provided_buffer_ring::size;
    epoll_socket& h = handle_of(fd, hp);
    for (;;) {
        const stream_readiness snap = stream_snapshot(h, false);
        // Spent: the last receive drained the socket and nothing came since: wait, take no
        // buffer.
        if (!snap.spent) {
            // A block from this thread's buffer pool (not a 4 KiB malloc per receive); it goes
            // back to a pool when the last slice of it is dropped, or here before the wait: a
            // waiting connection holds no buffer.
            buffer b{chunk};
            const ssize_t n = sys_recv(fd, b.prepare(chunk).data(), chunk, MSG_DONTWAIT);
            if (n > 0) {
                stream_moved(h, false, snap.seq, static_cast<std::size_t>(n), chunk);
                b.commit(static_cast<std::size_t>(n));
                co_return std::move(b).freeze();
            }
            if (n == 0) {
                co_return make_error_code(io_errc::eof);
            }
            if (errno == EINTR) {
                continue;
            }
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                co_return errno_code();
            }
        }
        // One wait for both cases: a frame keeps a slot for the awaiter of every co_await, and
        // an idle connection waits in this one.
        if (auto ec = co_await readiness(h, false, snap.seq); ec) {
            co_return ec;
        }
    }
}

// What a multishot receive left queued, then the socket read where this thread can.
[[gnu::noinline]] auto receive_after_multishot(int fd,
                                               bool uring,
                                               recv_queue_ptr& rq,
                                               epoll_handle_ptr& hp) -> task<result<bytes>> {
    if (auto left = co_await read_left_behind(rq)) {
        co_return std::move(*left);
    }
    if (uring) {
        auto got = co_await receive_into_block(fd);
        co_return got;
    }
    auto got = co_await receive_when_ready(fd, hp);
    co_return got;
}

}  // namespace
}  // namespace detail

auto tcp_stream::receive() -> task<result<bytes>> {
    const bool uring = detail::is_uring();
    const bool multishot = uring && detail::current_uring().buffers() != nullptr;
    if (multishot) {
        return detail::receive_multishot(fd_, rq_);
    }
    if (rq_) {
        return detail::receive_after_multishot(fd_, uring, rq_, h_);
    }
    if (uring) {
        return detail::receive_into_block(fd_);
    }
    return detail::receive_when_ready(fd_, h_);
}

auto tcp_stream::read_exact(std::span<std::byte> buf) -> task<result<void>> {
    std::size_t done = 0;
    while (done < buf.size()) {
        auto n = co_await read_some(buf.subspan(done));
        if (!n) {
            co_return n.error();
        }
        done += *n;
    }
    co_return result<void>{};
}

auto tcp_stream::write_all(std::span<const std::byte> buf) -> task<result<void>> {
    // One buffer: plain send, no iovec array and no second coroutine (this is the hot path of
    // every request/response server).
    while (!buf.empty()) {
        if (detail::is_uring()) {
            const int fd = fd_;
            const int res = co_await detail::uring_awaiter{[&](io_uring_sqe* sqe) {
                io_uring_prep_send(sqe, fd, buf.data(), buf.size(), MSG_NOSIGNAL);
            }};
            if (res < 0) {
                co_return std::error_code(-res, std::system_category());
            }
            buf = buf.subspan(static_cast<std::size_t>(res));
            continue;
        }
        detail::epoll_socket& h = detail::handle_of(fd_, h_);
        auto send_now = [&] {
            return detail::sys_send(fd_, buf.data(), buf.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        };
        detail::attempt_outcome o = detail::attempt_once(h, true, buf.size(), send_now);
        if (o.wait) {
            o.value = co_await detail::wait_then_retry(h, true, buf.size(), o.seq, send_now);
        }
        if (!o.value) {
            co_return o.value.error();
        }
        buf = buf.subspan(*o.value);
    }
    co_return result<void>{};
}

auto tcp_stream::write_all(std::span<const std::span<const std::byte>> bufs) -> task<result<void>> {
    // One iovec per buffer; advanced in place after a short write.
    std::vector<iovec> iov;
    iov.reserve(bufs.size());
    for (auto b : bufs) {
        if (!b.empty()) {
            iov.push_back(iovec{const_cast<std::byte*>(b.data()), b.size()});
        }
    }
    std::size_t first = 0;
    auto advance = [&](std::size_t n) {
        while (n > 0 && first < iov.size()) {
            if (n >= iov[first].iov_len) {
                n -= iov[first].iov_len;
                ++first;
            } else {
                iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + n;
                iov[first].iov_len -= n;
                n = 0;
            }
        }
    };
    msghdr msg{};
    while (first < iov.size()) {
        msg.msg_iov = iov.data() + first;
        msg.msg_iovlen = std::min<std::size_t>(iov.size() - first, IOV_MAX);
        if (detail::is_uring()) {
            const int fd = fd_;
            const int res = co_await detail::uring_awaiter{
                [&](io_uring_sqe* sqe) { io_uring_prep_sendmsg(sqe, fd, &msg, MSG_NOSIGNAL); }};
            if (res < 0) {
                co_return std::error_code(-res, std::system_category());
            }
            advance(static_cast<std::size_t>(res));
            continue;
        }
        const int fd = fd_;
        std::size_t want = 0;
        for (std::size_t i = 0; i < msg.msg_iovlen; ++i) {
            want += msg.msg_iov[i].iov_len;
        }
        detail::epoll_socket& h = detail::handle_of(fd_, h_);
        auto sendmsg_now = [&] {
            return detail::sys_sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        };
        detail::attempt_outcome o = detail::attempt_once(h, true, want, sendmsg_now);
        if (o.wait) {
            o.value = co_await detail::wait_then_retry(h, true, want, o.seq, sendmsg_now);
        }
        if (!o.value) {
            co_return o.value.error();
        }
        advance(*o.value);
    }
    co_return result<void>{};
}

// Added with file IO (weft::send_file): readiness for writers that make their own system calls.
auto tcp_stream::wait_writable() -> task<result<void>> {
    if (detail::is_uring()) {
        const int fd = fd_;
        const int res = co_await detail::uring_awaiter{
            [&](io_uring_sqe* sqe) { io_uring_prep_poll_add(sqe, fd, POLLOUT); }};
        if (res < 0) {
            co_return std::error_code(-res, std::system_category());
        }
        co_return result<void>{};
    }
    detail::epoll_socket& h = detail::handle_of(fd_, h_);
    const std::uint32_t seq = detail::readiness_seq(h, true);
    // The caller's EAGAIN may predate seq: look once, so an edge between the two is not lost.
    pollfd p{fd_, POLLOUT, 0};
    if (::poll(&p, 1, 0) > 0) {
        co_return result<void>{};
    }
    if (auto ec = co_await detail::readiness(h, true, seq); ec) {
        co_return ec;
    }
    co_return result<void>{};
}

}  // namespace weft
