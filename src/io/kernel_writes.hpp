#pragma once

// Private to weft::io: telling valgrind's memcheck about memory the kernel writes behind its
// back. valgrind sees the system calls it wraps (recv, pread, ...), so on epoll it marks their
// output itself; an io_uring operation's output is written by the kernel at completion time,
// outside any system call valgrind follows, so a received byte would stay "undefined" to
// memcheck and every branch on it an error. Each completion that reports written memory marks
// exactly what the kernel says it wrote (the CQE's byte count, statx's struct), so a read past
// that count is still reported. Without <valgrind/memcheck.h> (WEFT_HAVE_VALGRIND unset) these
// compile to nothing; with it, each is valgrind's client-request sequence (17 instructions in
// provided_buffer_ring::take, no branch) that does nothing outside valgrind.

#include <sys/uio.h>

#include <cstddef>

#if defined(WEFT_HAVE_VALGRIND)
#include <valgrind/memcheck.h>
#include <valgrind/valgrind.h>
#endif

namespace weft::detail {

/// Whether this process runs under valgrind (any tool). Cheap, but meant to be read once.
[[nodiscard]] inline auto running_on_valgrind() noexcept -> bool {
#if defined(WEFT_HAVE_VALGRIND)
    return RUNNING_ON_VALGRIND != 0;
#else
    return false;
#endif
}

/// The kernel wrote `len` bytes at `p` (an io_uring completion said so).
inline void kernel_wrote(const void* p, std::size_t len) noexcept {
#if defined(WEFT_HAVE_VALGRIND)
    if (len != 0) {
        (void)VALGRIND_MAKE_MEM_DEFINED(p, len);
    }
#else
    (void)p;
    (void)len;
#endif
}

/// The kernel wrote `len` bytes (a readv/recvmsg result) across `iov[0..n)`, in order.
inline void kernel_wrote(const iovec* iov, std::size_t n, std::size_t len) noexcept {
#if defined(WEFT_HAVE_VALGRIND)
    for (std::size_t i = 0; i < n && len != 0; ++i) {
        const std::size_t part = iov[i].iov_len < len ? iov[i].iov_len : len;
        kernel_wrote(iov[i].iov_base, part);
        len -= part;
    }
#else
    (void)iov;
    (void)n;
    (void)len;
#endif
}

/// `p[0..len)` goes back to the kernel to be written again (a provided buffer returned to its
/// ring): what it held is stale, so a later read past the next completion's count is reported.
inline void kernel_will_write(const void* p, std::size_t len) noexcept {
#if defined(WEFT_HAVE_VALGRIND)
    (void)VALGRIND_MAKE_MEM_UNDEFINED(p, len);
#else
    (void)p;
    (void)len;
#endif
}

}  // namespace weft::detail
