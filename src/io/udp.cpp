#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "epoll_reactor.hpp"
#include "kernel_writes.hpp"
#include "reactor.hpp"
#include "readiness.hpp"
#include "syscalls.hpp"
#include "uring_awaiter.hpp"
#include "weft/io/udp_socket.hpp"

namespace weft {
namespace {
auto errno_code(int e = errno) -> std::error_code { return {e, std::system_category()}; }
auto uring_backend() -> bool { return current_io_backend() == io_backend::io_uring; }
auto handle_of(int fd, std::unique_ptr<detail::epoll_socket, detail::epoll_socket_deleter>& h)
    -> detail::epoll_socket& {
    if (!h) {
        h.reset(new detail::epoll_socket(fd));
    }
    return *h;
}
}  // namespace

udp_socket::udp_socket(udp_socket&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)), h_(std::move(o.h_)) {}

auto udp_socket::operator=(udp_socket&& o) noexcept -> udp_socket& {
    if (this != &o) {
        close();
        fd_ = std::exchange(o.fd_, -1);
        h_ = std::move(o.h_);
    }
    return *this;
}

udp_socket::~udp_socket() { close(); }

void udp_socket::close() noexcept {
    h_.reset();
    if (fd_ >= 0) {
        ::close(fd_);
        fd_ = -1;
    }
}

auto udp_socket::bind(socket_address addr) -> result<udp_socket> {
    const int fd = ::socket(addr.family(), SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return errno_code();
    }
    udp_socket s;
    s.fd_ = fd;
    if (::bind(fd, addr.data(), addr.size()) != 0) {
        return errno_code();
    }
    return s;
}

auto udp_socket::local_address() const -> result<socket_address> {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
        return errno_code();
    }
    return socket_address::from(reinterpret_cast<sockaddr*>(&ss), len);
}

auto udp_socket::send_to(std::span<const std::byte> data, socket_address to)
    -> task<result<std::size_t>> {
    iovec iov{const_cast<std::byte*>(data.data()), data.size()};
    msghdr msg{};
    msg.msg_name = const_cast<sockaddr*>(to.data());
    msg.msg_namelen = to.size();
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (uring_backend()) {
        const int fd = fd_;
        const int res = co_await detail::uring_awaiter{
            [&](io_uring_sqe* sqe) { io_uring_prep_sendmsg(sqe, fd, &msg, MSG_NOSIGNAL); }};
        if (res < 0) {
            co_return std::error_code(-res, std::system_category());
        }
        co_return static_cast<std::size_t>(res);
    }
    detail::epoll_socket& h = handle_of(fd_, h_);
    auto sendmsg_now = [&] { return detail::sys_sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT); };
    detail::attempt_outcome o = detail::attempt_once(h, true, 0, sendmsg_now);
    if (o.wait) {
        o.value = co_await detail::wait_then_retry(h, true, 0, o.seq, sendmsg_now);
    }
    co_return std::move(o.value);
}

auto udp_socket::recv_from(std::span<std::byte> buf) -> task<result<datagram_info>> {
    sockaddr_storage from{};
    iovec iov{buf.data(), buf.size()};
    msghdr msg{};
    msg.msg_name = &from;
    msg.msg_namelen = sizeof(from);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (uring_backend()) {
        const int fd = fd_;
        const int res = co_await detail::uring_awaiter{
            [&](io_uring_sqe* sqe) { io_uring_prep_recvmsg(sqe, fd, &msg, 0); }};
        if (res < 0) {
            co_return std::error_code(-res, std::system_category());
        }
        // recvmsg wrote the datagram, the sender's address and their lengths.
        detail::kernel_wrote(&msg, sizeof(msg));
        detail::kernel_wrote(&from, msg.msg_namelen);
        detail::kernel_wrote(&iov, 1, static_cast<std::size_t>(res));
        co_return datagram_info{
            static_cast<std::size_t>(res),
            socket_address::from(reinterpret_cast<sockaddr*>(&from), msg.msg_namelen)};
    }
    detail::epoll_socket& h = handle_of(fd_, h_);
    auto recvmsg_now = [&] {
        msg.msg_namelen = sizeof(from);
        return detail::sys_recvmsg(fd_, &msg, MSG_DONTWAIT);
    };
    detail::attempt_outcome o = detail::attempt_once(h, false, 0, recvmsg_now);
    if (o.wait) {
        o.value = co_await detail::wait_then_retry(h, false, 0, o.seq, recvmsg_now);
    }
    if (!o.value) {
        co_return o.value.error();
    }
    co_return datagram_info{
        *o.value, socket_address::from(reinterpret_cast<sockaddr*>(&from), msg.msg_namelen)};
}

}  // namespace weft
