#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <system_error>
#include <type_traits>
#include <vector>

#include "weft/core/result.hpp"
#include "weft/core/task.hpp"
#include "weft/io/tcp_stream.hpp"

namespace weft {

/// How file::open opens a file (combine with |). Exactly one of read / write / read_write.
enum class open_mode : unsigned {
    read = 1U << 0,
    write = 1U << 1,
    read_write = read | write,
    create = 1U << 2,     ///< O_CREAT, with the `permissions` given to open
    truncate = 1U << 3,   ///< O_TRUNC
    append = 1U << 4,     ///< O_APPEND: every write_at goes to the end, whatever its offset
    exclusive = 1U << 5,  ///< O_EXCL (with create): fail if it exists
    direct = 1U << 6,     ///< O_DIRECT: bypass the page cache; transfers must be aligned
    dsync = 1U << 7,      ///< O_DSYNC: every write is durable when it completes
};

[[nodiscard]] constexpr auto operator|(open_mode a, open_mode b) noexcept -> open_mode {
    return static_cast<open_mode>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}
[[nodiscard]] constexpr auto has(open_mode set, open_mode m) noexcept -> bool {
    return (static_cast<unsigned>(set) & static_cast<unsigned>(m)) == static_cast<unsigned>(m);
}

/// Error conditions of file IO that are not an errno. Compare an error_code against them:
/// `if (r.error() == weft::file_errc::misaligned)`. A misaligned transfer also compares equal to
/// std::errc::invalid_argument (the EINVAL the kernel would have returned).
enum class file_errc {
    misaligned = 1,  ///< O_DIRECT buffer address, length or offset not aligned (see alignment())
};
[[nodiscard]] auto file_category() noexcept -> const std::error_category&;
[[nodiscard]] inline auto make_error_condition(file_errc e) noexcept -> std::error_condition {
    return {static_cast<int>(e), file_category()};
}

/// What file::stat reports.
struct file_status {
    std::uint64_t size = 0;
    std::uint64_t blocks = 0;  ///< 512-byte blocks allocated
    std::uint32_t mode = 0;    ///< st_mode: type and permissions
    std::uint32_t block_size = 0;
    std::int64_t mtime_ns = 0;  ///< last modification, ns since the epoch
};

/// What O_DIRECT transfers on one file must be aligned to: the buffer's address to `memory`,
/// the offset and every length to `offset` (bytes). From statx(STATX_DIOALIGN); 4096 for both
/// where the file system does not say.
struct direct_alignment {
    std::uint32_t memory = 0;
    std::uint32_t offset = 0;
};

class file;

namespace detail {
/// One operation of a file_batch (src/io/file.cpp fills `res` and `error`).
struct file_batch_entry {
    const file* f;
    int fd;
    std::byte* data;
    std::size_t len;
    std::uint64_t offset;
    bool write;
    int res;  // bytes, or -errno; -ECANCELED until it ran
    std::error_code error;
};
}  // namespace detail

/// A regular file with asynchronous positional IO. On io_uring every operation is one SQE on
/// the awaiting worker's ring: the operations of all tasks on a worker go to the kernel
/// together in one io_uring_enter per loop turn, and file_batch sends many from one task at
/// once. On epoll (which cannot wait on regular files) each operation runs on the runtime's
/// blocking pool (weft::spawn_blocking); the API and the results are the same.
///
/// Results are values: a failure is an error_code whose message names the path
/// ("/tmp/x: No space left on device"); compare it with std::errc (the codes carry a category
/// of their own, so `== std::errc::no_space_on_device` works, `== error_code(ENOSPC,
/// system_category())` does not). A cancelled operation ends with operation_canceled: on
/// io_uring it is cancelled in the kernel and its buffer is untouched after it reports; on
/// epoll a call not yet started on the pool is dropped, one running runs to its end.
/// A short read or write is a success of read_at / write_at (they return the count);
/// write_all never reports a short write as success.
/// NOTE: writing past RLIMIT_FSIZE raises SIGXFSZ, which kills the process unless ignored;
/// a program that wants EFBIG as a value sets SIGXFSZ to SIG_IGN.
///
/// Any number of operations on one file may run at the same time, from any workers (the
/// kernel orders nothing between them; disjoint ranges are the caller's business). It must not
/// be closed or destroyed while an operation on it is pending. Move-only; closes on
/// destruction.
///
///     auto f = (co_await weft::file::open("/tmp/x", open_mode::read_write | open_mode::create))
///                  .value();
///     (co_await f.write_all(std::as_bytes(std::span{msg}), 0)).value();
///     auto n = co_await f.read_at(buf, 0);   // result<size_t>; 0 at end of file
class file {
public:
    file() noexcept = default;
    file(file&& o) noexcept;
    auto operator=(file&& o) noexcept -> file&;
    file(const file&) = delete;
    auto operator=(const file&) -> file& = delete;
    ~file();

    [[nodiscard]] static auto open(std::string path, open_mode mode, mode_t permissions = 0644)
        -> task<result<file>>;

    /// Reads up to buf.size() bytes at `offset` (fewer at end of file; 0 at or past it).
    [[nodiscard]] auto read_at(std::span<std::byte> buf, std::uint64_t offset)
        -> task<result<std::size_t>>;
    /// Writes up to buf.size() bytes at `offset`; the count may be short (e.g. a full disk).
    [[nodiscard]] auto write_at(std::span<const std::byte> buf, std::uint64_t offset)
        -> task<result<std::size_t>>;
    /// Vectored forms (preadv / pwritev): the buffers are filled / sent in order.
    [[nodiscard]] auto read_at(std::span<const std::span<std::byte>> bufs, std::uint64_t offset)
        -> task<result<std::size_t>>;
    [[nodiscard]] auto write_at(std::span<const std::span<const std::byte>> bufs,
                                std::uint64_t offset) -> task<result<std::size_t>>;

    /// Reads until `buf` is full or the file ends; returns the count (short only at the end).
    [[nodiscard]] auto read_all(std::span<std::byte> buf, std::uint64_t offset)
        -> task<result<std::size_t>>;
    /// Writes all of `buf` at `offset`, however many calls it takes. A write that stops short
    /// ends with the error that stopped it (ENOSPC, EFBIG, ...), never with success.
    [[nodiscard]] auto write_all(std::span<const std::byte> buf, std::uint64_t offset)
        -> task<result<void>>;

    [[nodiscard]] auto fsync() -> task<result<void>>;
    [[nodiscard]] auto fdatasync() -> task<result<void>>;
    /// fallocate(2): reserves [offset, offset + length) (mode 0 also extends the size).
    [[nodiscard]] auto allocate(std::uint64_t offset, std::uint64_t length, int mode = 0)
        -> task<result<void>>;
    [[nodiscard]] auto stat() -> task<result<file_status>>;

    /// Closes now (a regular file's close does not block on IO). Idempotent.
    auto close() noexcept -> result<void>;

    [[nodiscard]] auto is_open() const noexcept -> bool { return fd_ >= 0; }
    [[nodiscard]] auto is_direct() const noexcept -> bool { return direct_; }
    /// Meaningful when is_direct().
    [[nodiscard]] auto alignment() const noexcept -> direct_alignment { return align_; }
    [[nodiscard]] auto path() const noexcept -> const std::string& { return path_; }
    [[nodiscard]] auto native_handle() const noexcept -> int { return fd_; }

private:
    friend class file_batch;
    friend auto send_file(tcp_stream& to,
                          const file& from,
                          std::uint64_t offset,
                          std::uint64_t count) -> task<result<void>>;
    // Ok, or file_errc::misaligned (with the path) for an O_DIRECT transfer that is not aligned.
    [[nodiscard]] auto check_aligned(const void* data,
                                     std::size_t len,
                                     std::uint64_t offset) const noexcept -> std::error_code;
    // preadv / pwritev of already-checked buffers (both vectored read_at and write_at).
    [[nodiscard]] auto vectored(std::vector<iovec> iov, std::uint64_t offset, bool write)
        -> task<result<std::size_t>>;

    int fd_ = -1;
    bool direct_ = false;
    direct_alignment align_{};
    std::string path_;
};

/// Many reads and writes, on one or several files, submitted by one task in one go (seed 003's
/// `-batch N`): on io_uring all of them go to the kernel in the same io_uring_enter and the
/// task resumes once, when the last has completed; on epoll they run as one job on the blocking
/// pool. On io_uring a batch of any size runs in passes of at most 1024 operations in the
/// kernel at once (each waited for before the next), so it cannot overflow the ring; an operation
/// the ring has no room for even then fails with EBUSY and does not run. The buffers must stay
/// valid until submit() completes. Not thread-safe: one task fills
/// and submits it; it may be reused after clear().
///
///     weft::file_batch b;
///     b.read_at(f, buf0, 0);
///     b.read_at(f, buf1, 4096);
///     (co_await b.submit()).value();   // then b.result_of(i) for each
class file_batch {
public:
    file_batch() = default;
    void read_at(const file& f, std::span<std::byte> buf, std::uint64_t offset);
    void write_at(const file& f, std::span<const std::byte> buf, std::uint64_t offset);
    [[nodiscard]] auto size() const noexcept -> std::size_t { return ops_.size(); }
    void clear() noexcept { ops_.clear(); }

    /// Runs every queued operation (none, when one of them is misaligned for O_DIRECT: that one
    /// reports file_errc::misaligned, the others operation_canceled). Ok when none failed (counts
    /// may be short, as with file::read_at / write_at: see result_of); else the first failure in
    /// queue order. operation_canceled when the task was cancelled (result_of says which ran
    /// anyway).
    [[nodiscard]] auto submit() -> task<result<void>>;
    /// After submit(): the byte count of operation i, or its error.
    [[nodiscard]] auto result_of(std::size_t i) const -> result<std::size_t>;

private:
    std::vector<detail::file_batch_entry> ops_;
};

/// Sends `count` bytes of `from`, starting at `offset`, to the socket without copying them
/// through user space (sendfile(2)), waiting for the socket whenever it is full. Fails with
/// ENODATA (and the path) when the file ends before the range does; a peer that went away is
/// EPIPE / ECONNRESET as a value (SIGPIPE is suppressed: blocked around each sendfile and
/// consumed, the thread's signal mask put back, see detail::sendfile_quiet). Observes
/// cancellation while it waits for the socket.
/// NOTE: the file side is read by the worker thread itself; pages not in the page cache make
/// the worker wait for the disk.
[[nodiscard]] auto send_file(tcp_stream& to,
                             const file& from,
                             std::uint64_t offset,
                             std::uint64_t count) -> task<result<void>>;

namespace detail {
/// sendfile(2) that never delivers SIGPIPE and leaves the calling thread's signal state as it
/// was: SIGPIPE is blocked for the call, one the call raised is consumed (a SIGPIPE already
/// pending on entry is left pending), and the mask is restored. Returns what sendfile returns,
/// errno set as it sets it. Shared by send_file and the HTTP server.
auto sendfile_quiet(int sock, int fd, off_t* off, std::size_t n) -> ssize_t;
}  // namespace detail

}  // namespace weft

template <>
struct std::is_error_condition_enum<weft::file_errc> : std::true_type {};
