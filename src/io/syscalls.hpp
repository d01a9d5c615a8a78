#pragma once

// Private to weft::io: the raw system calls of the epoll backend's socket transfers.

#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>

namespace weft::detail {

/// The epoll backend's socket transfers: the system calls themselves, not glibc's recv / send /
/// recvmsg / sendmsg. Those are cancellation points: in a process with threads glibc wraps each
/// call in two atomic compare-exchanges (asynchronous pthread cancellation on, then off), which
/// is 4 of the echo server's locked instructions per request. weft never cancels threads; its
/// operations are cancelled through stop tokens.
/// Same results and errno as the glibc functions.
inline auto sys_recv(int fd, void* buf, std::size_t len, int flags) noexcept -> ssize_t {
    return ::syscall(SYS_recvfrom, fd, buf, len, flags, nullptr, nullptr);
}
inline auto sys_send(int fd, const void* buf, std::size_t len, int flags) noexcept -> ssize_t {
    return ::syscall(SYS_sendto, fd, buf, len, flags, nullptr, 0);
}
inline auto sys_recvmsg(int fd, msghdr* msg, int flags) noexcept -> ssize_t {
    return ::syscall(SYS_recvmsg, fd, msg, flags);
}
inline auto sys_sendmsg(int fd, const msghdr* msg, int flags) noexcept -> ssize_t {
    return ::syscall(SYS_sendmsg, fd, msg, flags);
}

}  // namespace weft::detail
