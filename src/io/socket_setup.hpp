#pragma once

// Private to weft::io: what tcp_stream.cpp and tcp_listener.cpp both do to a socket.

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <memory>
#include <system_error>

#include "epoll_reactor.hpp"
#include "reactor.hpp"

namespace weft::detail {

inline auto errno_code(int e = errno) -> std::error_code { return {e, std::system_category()}; }

inline void set_nonblocking(int fd) noexcept {
    const int fl = ::fcntl(fd, F_GETFL, 0);
    if (fl >= 0 && (fl & O_NONBLOCK) == 0) {
        ::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    }
}

inline void set_nodelay(int fd) noexcept {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/// The handle of a socket, made on first use (epoll only needs it).
inline auto handle_of(int fd, std::unique_ptr<epoll_socket, epoll_socket_deleter>& h)
    -> epoll_socket& {
    if (!h) {
        h.reset(new epoll_socket(fd));
    }
    return *h;
}

}  // namespace weft::detail
