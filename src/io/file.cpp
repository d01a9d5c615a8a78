#include "weft/io/file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "kernel_writes.hpp"
#include "reactor.hpp"
#include "uring_awaiter.hpp"
#include "uring_reactor.hpp"
#include "weft/sched/spawn_blocking.hpp"

namespace weft {

// ---- errors ----------------------------------------------------------------------------------
//
// An error_code holds an int and a category pointer, nothing else; to carry the path, each path
// that failed gets a category of its own (interned: one per distinct path, kept for the life of
// the process, since codes may outlive any file). Its values are errno values, plus
// misaligned_value for file_errc::misaligned. The category maps its values to the generic
// conditions, so `ec == std::errc::no_space_on_device` holds, and prints "path: message".
// After max_kept_paths distinct failing paths, further ones share a category that says so.

using detail::is_uring;

namespace {

constexpr int misaligned_value = 0x10000 + static_cast<int>(file_errc::misaligned);
constexpr std::size_t max_kept_paths = 4096;

class file_category_impl final : public std::error_category {
public:
    [[nodiscard]] auto name() const noexcept -> const char* override { return "weft.file"; }
    [[nodiscard]] auto message(int c) const -> std::string override {
        if (static_cast<file_errc>(c) == file_errc::misaligned) {
            return "O_DIRECT transfer not aligned to the file's direct_alignment";
        }
        return "unknown weft.file error";
    }
};

class path_category final : public std::error_category {
public:
    explicit path_category(std::string path) : path_(std::move(path)) {}
    [[nodiscard]] auto name() const noexcept -> const char* override { return "weft.file.path"; }
    [[nodiscard]] auto message(int ev) const -> std::string override {
        if (ev == misaligned_value) {
            return path_ +
                   ": O_DIRECT buffer address, length or offset not aligned (see "
                   "weft::file::alignment())";
        }
        return path_ + ": " + std::system_category().message(ev);
    }
    [[nodiscard]] auto default_error_condition(int ev) const noexcept
        -> std::error_condition override {
        if (ev == misaligned_value) {
            return std::make_error_condition(std::errc::invalid_argument);
        }
        return std::system_category().default_error_condition(ev);
    }
    [[nodiscard]] auto equivalent(int ev, const std::error_condition& cond) const noexcept
        -> bool override {
        if (ev == misaligned_value && cond == file_errc::misaligned) {
            return true;
        }
        return default_error_condition(ev) == cond;
    }

private:
    std::string path_;
};

auto category_for(const std::string& path) -> const std::error_category& {
    static std::mutex mu;
    // Leaked on purpose: error codes naming these may be examined during static destruction.
    static auto* kept = new std::unordered_map<std::string, std::unique_ptr<path_category>>();
    static auto* overflow = new path_category("(one of too many failing paths)");
    std::lock_guard lock(mu);
    if (auto it = kept->find(path); it != kept->end()) {
        return *it->second;
    }
    if (kept->size() >= max_kept_paths) {
        return *overflow;
    }
    auto& slot = (*kept)[path];
    slot = std::make_unique<path_category>(path.empty() ? "(no file)" : path);
    return *slot;
}

// `err`: an errno value or misaligned_value. Cancellation is not about the file: plain code.
auto path_error(int err, const std::string& path) -> std::error_code {
    if (err == ECANCELED) {
        return std::make_error_code(std::errc::operation_canceled);
    }
    return {err, category_for(path)};
}

// Largest single transfer (Linux caps read/write at this; io_uring lengths are 32-bit).
constexpr std::size_t max_io = 0x7ffff000;

auto to_flags(open_mode m) -> int {
    int f = 0;
    if (has(m, open_mode::read_write)) {
        f = O_RDWR;
    } else if (has(m, open_mode::write)) {
        f = O_WRONLY;
    } else {
        f = O_RDONLY;
    }
    f |= has(m, open_mode::create) ? O_CREAT : 0;
    f |= has(m, open_mode::truncate) ? O_TRUNC : 0;
    f |= has(m, open_mode::append) ? O_APPEND : 0;
    f |= has(m, open_mode::exclusive) ? O_EXCL : 0;
    f |= has(m, open_mode::direct) ? O_DIRECT : 0;
    f |= has(m, open_mode::dsync) ? O_DSYNC : 0;
    return f | O_CLOEXEC;
}

auto query_alignment(int fd) -> direct_alignment {
    struct statx stx {};
    if (::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
        (stx.stx_mask & STATX_DIOALIGN) != 0 && stx.stx_dio_mem_align != 0 &&
        stx.stx_dio_offset_align != 0) {
        return {stx.stx_dio_mem_align, stx.stx_dio_offset_align};
    }
    return {4096, 4096};  // the file system does not say: the common page / sector size
}

// A system call's result as the io_uring convention: >= 0, or -errno. Retries EINTR.
template <typename Call>
auto syscall_result(Call call) -> long {
    for (;;) {
        const long r = static_cast<long>(call());
        if (r >= 0) {
            return r;
        }
        if (errno != EINTR) {
            return -errno;
        }
    }
}

// `co_await counted_blocking(call)`: co_await spawn_blocking(call), counted in
// blocking_file_ops_for_test from the moment the job is on the pool (queued, its stop callback
// registered) until the task resumes. Raised after the hand-off, without touching this awaiter
// (the task may already be running elsewhere), so a count of n means n jobs reached the pool.
template <typename Call>
class counted_blocking {
public:
    explicit counted_blocking(Call call) : inner_(spawn_blocking(std::move(call))) {}
    counted_blocking(const counted_blocking&) = delete;
    auto operator=(const counted_blocking&) -> counted_blocking& = delete;
    ~counted_blocking() = default;

    auto await_ready() const noexcept -> bool { return inner_.await_ready(); }
    template <typename P>
    WEFT_PUBLISHES_HANDLE auto await_suspend(std::coroutine_handle<P> h) -> bool {
        suspended_ = true;
        if (!inner_.await_suspend(h)) {
            suspended_ = false;
            return false;
        }
        detail::blocking_file_ops_for_test.fetch_add(1, std::memory_order_relaxed);
        return true;
    }
    auto await_resume() {
        if (suspended_) {
            detail::blocking_file_ops_for_test.fetch_sub(1, std::memory_order_relaxed);
        }
        return inner_.await_resume();
    }

private:
    detail::blocking_awaiter<Call> inner_;
    bool suspended_ = false;
};

// One file operation on the current worker's backend: an SQE filled by `prep` on io_uring, or
// `call` on the blocking pool on epoll. Result: >= 0, or -errno (-ECANCELED when cancelled).
template <typename Prep, typename Call>
auto run_op(Prep prep, Call call) -> task<long> {
    if (is_uring()) {
        co_return co_await detail::uring_awaiter{std::move(prep)};
    }
    counted_blocking op([call = std::move(call)] { return syscall_result(call); });
    auto r = co_await op;
    if (!r) {
        co_return -ECANCELED;
    }
    co_return *r;
}

// The epoll half of run_op alone: `call` on the blocking pool. The hot operations (read_at,
// write_at) await the io_uring SQE directly in their own frame instead of through run_op: one
// coroutine frame per operation, not two (an allocation, a free and a resumption less).
template <typename Call>
auto blocking_op(Call call) -> task<long> {
    counted_blocking op([call = std::move(call)] { return syscall_result(call); });
    auto r = co_await op;
    if (!r) {
        co_return -ECANCELED;
    }
    co_return *r;
}

auto to_iovecs(std::span<const std::span<std::byte>> bufs) -> std::vector<iovec> {
    std::vector<iovec> v;
    v.reserve(bufs.size());
    for (auto b : bufs) {
        v.push_back(iovec{b.data(), b.size()});
    }
    return v;
}

auto to_iovecs(std::span<const std::span<const std::byte>> bufs) -> std::vector<iovec> {
    std::vector<iovec> v;
    v.reserve(bufs.size());
    for (auto b : bufs) {
        v.push_back(iovec{const_cast<std::byte*>(b.data()), b.size()});
    }
    return v;
}

}  // namespace

auto file_category() noexcept -> const std::error_category& {
    static const file_category_impl c;
    return c;
}

// ---- file ------------------------------------------------------------------------------------

file::file(file&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)),
      direct_(o.direct_),
      align_(o.align_),
      path_(std::move(o.path_)) {}

auto file::operator=(file&& o) noexcept -> file& {
    if (this != &o) {
        (void)close();
        fd_ = std::exchange(o.fd_, -1);
        direct_ = o.direct_;
        align_ = o.align_;
        path_ = std::move(o.path_);
    }
    return *this;
}

file::~file() { (void)close(); }

auto file::close() noexcept -> result<void> {
    if (fd_ < 0) {
        return {};
    }
    const int fd = std::exchange(fd_, -1);
    // Linux frees the descriptor even when close reports an error; never retry it.
    if (::close(fd) != 0 && errno != EINTR) {
        return path_error(errno, path_);
    }
    return {};
}

auto file::check_aligned(const void* data, std::size_t len, std::uint64_t offset) const noexcept
    -> std::error_code {
    if (!direct_) {
        return {};
    }
    if (reinterpret_cast<std::uintptr_t>(data) % align_.memory != 0 || len % align_.offset != 0 ||
        offset % align_.offset != 0) {
        return path_error(misaligned_value, path_);
    }
    return {};
}

auto file::open(std::string path, open_mode mode, mode_t permissions) -> task<result<file>> {
    const int flags = to_flags(mode);
    const char* p = path.c_str();
    const long fd = co_await run_op(
        [=](io_uring_sqe* sqe) { io_uring_prep_openat(sqe, AT_FDCWD, p, flags, permissions); },
        [=] { return ::open(p, flags, permissions); });
    if (fd < 0) {
        co_return path_error(static_cast<int>(-fd), path);
    }
    file f;
    f.fd_ = static_cast<int>(fd);
    f.path_ = std::move(path);
    f.direct_ = has(mode, open_mode::direct);
    if (f.direct_) {
        f.align_ = query_alignment(f.fd_);
    }
    co_return std::move(f);
}

auto file::read_at(std::span<std::byte> buf, std::uint64_t offset) -> task<result<std::size_t>> {
    if (auto ec = check_aligned(buf.data(), buf.size(), offset); ec) {
        co_return ec;
    }
    const int fd = fd_;
    std::byte* data = buf.data();
    const auto len = static_cast<unsigned>(std::min(buf.size(), max_io));
    long res = 0;
    if (is_uring()) {
        // A named awaiter, not a temporary: g++ 12 and co_await, docs/compilers.md.
        // O_DIRECT goes to the device: submit at once (see uring_op::eager_submit).
        detail::uring_awaiter op(
            [=](io_uring_sqe* sqe) { io_uring_prep_read(sqe, fd, data, len, offset); }, direct_);
        res = (co_await op).res;
        if (res > 0) {
            detail::kernel_wrote(data, static_cast<std::size_t>(res));
        }
    } else {
        res = co_await blocking_op(
            [=] { return ::pread(fd, data, len, static_cast<off_t>(offset)); });
    }
    if (res < 0) {
        co_return path_error(static_cast<int>(-res), path_);
    }
    co_return static_cast<std::size_t>(res);
}

auto file::write_at(std::span<const std::byte> buf, std::uint64_t offset)
    -> task<result<std::size_t>> {
    if (auto ec = check_aligned(buf.data(), buf.size(), offset); ec) {
        co_return ec;
    }
    const int fd = fd_;
    const std::byte* data = buf.data();
    const auto len = static_cast<unsigned>(std::min(buf.size(), max_io));
    long res = 0;
    if (is_uring()) {
        // A named awaiter, not a temporary: g++ 12 and co_await, docs/compilers.md.
        // O_DIRECT goes to the device: submit at once (see uring_op::eager_submit).
        detail::uring_awaiter op(
            [=](io_uring_sqe* sqe) { io_uring_prep_write(sqe, fd, data, len, offset); }, direct_);
        res = (co_await op).res;
    } else {
        res = co_await blocking_op(
            [=] { return ::pwrite(fd, data, len, static_cast<off_t>(offset)); });
    }
    if (res < 0) {
        co_return path_error(static_cast<int>(-res), path_);
    }
    co_return static_cast<std::size_t>(res);
}

auto file::read_at(std::span<const std::span<std::byte>> bufs, std::uint64_t offset)
    -> task<result<std::size_t>> {
    for (auto b : bufs) {
        if (auto ec = check_aligned(b.data(), b.size(), offset); ec) {
            co_return ec;
        }
    }
    co_return co_await vectored(to_iovecs(bufs), offset, false);
}

auto file::write_at(std::span<const std::span<const std::byte>> bufs, std::uint64_t offset)
    -> task<result<std::size_t>> {
    for (auto b : bufs) {
        if (auto ec = check_aligned(b.data(), b.size(), offset); ec) {
            co_return ec;
        }
    }
    co_return co_await vectored(to_iovecs(bufs), offset, true);
}

// The one vectored transfer both directions share: preadv/pwritev (readv/writev SQEs on
// io_uring, the blocking pool on epoll).
auto file::vectored(std::vector<iovec> iov, std::uint64_t offset, bool write)
    -> task<result<std::size_t>> {
    const int fd = fd_;
    const iovec* v = iov.data();
    const auto n = static_cast<unsigned>(std::min<std::size_t>(iov.size(), IOV_MAX));
    long res = 0;
    if (is_uring()) {
        // A named awaiter, not a temporary: g++ 12 and co_await, docs/compilers.md.
        detail::uring_awaiter op([=](io_uring_sqe* sqe) {
            if (write) {
                io_uring_prep_writev(sqe, fd, v, n, offset);
            } else {
                io_uring_prep_readv(sqe, fd, v, n, offset);
            }
        });
        res = (co_await op).res;
        if (!write && res > 0) {
            detail::kernel_wrote(v, n, static_cast<std::size_t>(res));
        }
    } else {
        res = co_await blocking_op([=] {
            const auto off = static_cast<off_t>(offset);
            return write ? ::pwritev(fd, v, static_cast<int>(n), off)
                         : ::preadv(fd, v, static_cast<int>(n), off);
        });
    }
    if (res < 0) {
        co_return path_error(static_cast<int>(-res), path_);
    }
    co_return static_cast<std::size_t>(res);
}

auto file::read_all(std::span<std::byte> buf, std::uint64_t offset) -> task<result<std::size_t>> {
    std::size_t done = 0;
    while (done < buf.size()) {
        auto n = co_await read_at(buf.subspan(done), offset + done);
        if (!n) {
            co_return n.error();
        }
        if (*n == 0) {
            break;  // end of file
        }
        done += *n;
    }
    co_return done;
}

auto file::write_all(std::span<const std::byte> buf, std::uint64_t offset) -> task<result<void>> {
    std::size_t done = 0;
    while (done < buf.size()) {
        auto n = co_await write_at(buf.subspan(done), offset + done);
        if (!n) {
            co_return n.error();  // e.g. ENOSPC / EFBIG after a short write: never success
        }
        if (*n == 0) {
            co_return path_error(EIO, path_);  // no progress and no errno: do not spin
        }
        done += *n;
    }
    co_return result<void>{};
}

auto file::fsync() -> task<result<void>> {
    const int fd = fd_;
    const long res = co_await run_op([=](io_uring_sqe* sqe) { io_uring_prep_fsync(sqe, fd, 0); },
                                     [=] { return ::fsync(fd); });
    if (res < 0) {
        co_return path_error(static_cast<int>(-res), path_);
    }
    co_return result<void>{};
}

auto file::fdatasync() -> task<result<void>> {
    const int fd = fd_;
    const long res = co_await run_op(
        [=](io_uring_sqe* sqe) { io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC); },
        [=] { return ::fdatasync(fd); });
    if (res < 0) {
        co_return path_error(static_cast<int>(-res), path_);
    }
    co_return result<void>{};
}

auto file::allocate(std::uint64_t offset, std::uint64_t length, int mode) -> task<result<void>> {
    const int fd = fd_;
    const long res = co_await run_op(
        [=](io_uring_sqe* sqe) { io_uring_prep_fallocate(sqe, fd, mode, offset, length); },
        [=] {
            return ::fallocate(fd, mode, static_cast<off_t>(offset), static_cast<off_t>(length));
        });
    if (res < 0) {
        co_return path_error(static_cast<int>(-res), path_);
    }
    co_return result<void>{};
}

auto file::stat() -> task<result<file_status>> {
    const int fd = fd_;
    struct statx stx {};
    struct statx* out = &stx;
    const long res = co_await run_op(
        [=](io_uring_sqe* sqe) {
            io_uring_prep_statx(sqe, fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, out);
        },
        [=] { return ::statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, out); });
    if (res < 0) {
        co_return path_error(static_cast<int>(-res), path_);
    }
    detail::kernel_wrote(out, sizeof(*out));  // io_uring's statx (a no-op after ::statx)
    file_status s;
    s.size = stx.stx_size;
    s.blocks = stx.stx_blocks;
    s.mode = stx.stx_mode;
    s.block_size = stx.stx_blksize;
    s.mtime_ns =
        static_cast<std::int64_t>(stx.stx_mtime.tv_sec) * 1'000'000'000 + stx.stx_mtime.tv_nsec;
    co_return s;
}

// ---- file_batch ------------------------------------------------------------------------------

namespace detail {
namespace {

// Marks an entry that was never submitted because it is misaligned.
constexpr int misaligned_res = INT_MIN;

// Most entries of a batch in the kernel at once: a batch runs in passes of at most this many,
// each waited for before the next is submitted, so a batch of any size leaves room in the
// completion queue (4096 entries) for the worker's other IO and never overflows it.
constexpr std::size_t batch_pass = 1024;

/// One pass of a batch (at most batch_pass entries): every entry as one SQE on the awaiting
/// worker's ring, in order, as long as the ring gives SQEs (it submits what is queued to make
/// room); the task resumes once, when the last CQE of those is reaped. sent() tells how many
/// went to the kernel: 0 when the task was cancelled or the ring had no room at all (its
/// completion queue overflowing), and then the task did not suspend. Each op is a uring_op of
/// its own (cancelled in the kernel one by one when the task is), tagged with its batch through
/// on_complete. `remaining_` is touched only on the owner thread: counted up before the worker
/// can reap (it polls only after this returns), decremented by reap.
class uring_batch_awaiter {
public:
    explicit uring_batch_awaiter(std::span<file_batch_entry> entries)
        : entries_(entries), ops_(std::make_unique<op[]>(entries.size())) {}

    auto await_ready() const noexcept -> bool { return entries_.empty(); }

    template <typename P>
    WEFT_PUBLISHES_HANDLE auto await_suspend(std::coroutine_handle<P> h) noexcept -> bool {
        stop_state* stop = stop_of(h);
        if (stop != nullptr && stop->stop_requested()) {
            return false;  // nothing submitted: every entry stays -ECANCELED
        }
        uring_reactor& r = current_uring();
        waiter_ = h;
        for (; sent_ < entries_.size(); ++sent_) {
            io_uring_sqe* sqe = r.try_get_sqe();
            if (sqe == nullptr) {
                break;  // no room: the next pass, after these completed, sends the rest
            }
            file_batch_entry& e = entries_[sent_];
            op& o = ops_[sent_];
            o.batch = this;
            o.index = sent_;
            o.owner = &r;
            o.stop = stop;
            o.waiter = h;
            o.on_complete = &uring_batch_awaiter::completed;
            const auto len = static_cast<unsigned>(std::min(e.len, max_io));
            if (e.write) {
                io_uring_prep_write(sqe, e.fd, e.data, len, e.offset);
            } else {
                io_uring_prep_read(sqe, e.fd, e.data, len, e.offset);
            }
            io_uring_sqe_set_data(sqe, static_cast<uring_op*>(&o));
            r.submitted(o);
            ++remaining_;
        }
        if (sent_ == 0) {
            return false;
        }
        // Completions are reaped only by this worker, after we return: nothing can resume us
        // before then.
        if (stop != nullptr) {
            for (std::size_t i = 0; i < sent_; ++i) {
                op& o = ops_[i];
                if (stop->try_add(&o)) {
                    o.registered = true;
                } else {
                    r.request_cancel(o);
                }
            }
        }
        return true;
    }

    [[nodiscard]] auto sent() const noexcept -> std::size_t { return sent_; }

    void await_resume() noexcept {
        for (std::size_t i = 0; i < entries_.size(); ++i) {
            op& o = ops_[i];
            if (o.registered) {
                o.stop->remove(&o);
                o.registered = false;
            }
            if (o.owner != nullptr) {
                o.owner->forget_cancel(o);
            }
        }
    }

private:
    struct op : uring_op {
        uring_batch_awaiter* batch = nullptr;
        std::size_t index = 0;
    };

    // Owner thread, from reap.
    static auto completed(uring_op& u) noexcept -> bool {
        auto& o = static_cast<op&>(u);
        uring_batch_awaiter* b = o.batch;
        file_batch_entry& e = b->entries_[o.index];
        e.res = o.res;
        if (!e.write && o.res > 0) {
            kernel_wrote(e.data, static_cast<std::size_t>(o.res));
        }
        if (--b->remaining_ == 0) {
            current_worker()->push(b->waiter_);
            return true;
        }
        return false;
    }

    std::span<file_batch_entry> entries_;
    std::unique_ptr<op[]> ops_;
    std::size_t sent_ = 0;
    std::size_t remaining_ = 0;
    std::coroutine_handle<> waiter_;
};

}  // namespace
}  // namespace detail

void file_batch::read_at(const file& f, std::span<std::byte> buf, std::uint64_t offset) {
    ops_.push_back({&f, f.fd_, buf.data(), buf.size(), offset, false, -ECANCELED, {}});
}

void file_batch::write_at(const file& f, std::span<const std::byte> buf, std::uint64_t offset) {
    ops_.push_back(
        {&f, f.fd_, const_cast<std::byte*>(buf.data()), buf.size(), offset, true, -ECANCELED, {}});
}

auto file_batch::submit() -> task<result<void>> {
    for (auto& e : ops_) {
        e.res = -ECANCELED;
        e.error = {};
        if (auto ec = e.f->check_aligned(e.data, e.len, e.offset); ec) {
            e.res = detail::misaligned_res;
            e.error = ec;
        }
    }
    const bool misaligned = std::any_of(
        ops_.begin(), ops_.end(), [](const auto& e) { return e.res == detail::misaligned_res; });
    if (misaligned) {
        // Nothing runs: the others stay operation_canceled.
    } else if (is_uring()) {
        std::span<detail::file_batch_entry> left(ops_);
        while (!left.empty()) {
            detail::uring_batch_awaiter pass{left.first(std::min(left.size(), detail::batch_pass))};
            co_await pass;
            if (pass.sent() == 0) {
                // Cancelled (they stay operation_canceled), or a ring with no room even after
                // this batch's earlier passes completed: they fail, nothing of theirs ran.
                if (!(co_await get_stop_token()).stop_requested()) {
                    for (auto& e : left) {
                        e.res = -EBUSY;
                    }
                }
                break;
            }
            left = left.subspan(pass.sent());
        }
    } else {
        std::span<detail::file_batch_entry> entries(ops_);
        // One job for the whole batch: one hand-off to the pool instead of N.
        counted_blocking job([entries] {
            for (auto& e : entries) {
                if (e.res != -ECANCELED) {
                    continue;
                }
                const auto len = std::min(e.len, max_io);
                e.res = static_cast<int>(syscall_result([&] {
                    return e.write ? ::pwrite(e.fd, e.data, len, static_cast<off_t>(e.offset))
                                   : ::pread(e.fd, e.data, len, static_cast<off_t>(e.offset));
                }));
            }
        });
        (void)co_await job;
    }
    std::error_code first;
    for (auto& e : ops_) {
        if (e.res < 0 && e.res != detail::misaligned_res) {
            e.error = path_error(-e.res, e.f->path_);
        }
        // A misaligned entry is the reason the others did not run: report it first.
        if (e.error &&
            (!first || (e.res == detail::misaligned_res && first != file_errc::misaligned))) {
            first = e.error;
        }
    }
    if (first) {
        co_return first;
    }
    co_return result<void>{};
}

auto file_batch::result_of(std::size_t i) const -> result<std::size_t> {
    const auto& e = ops_.at(i);
    if (e.error) {
        return e.error;
    }
    return static_cast<std::size_t>(e.res);
}

// ---- send_file -------------------------------------------------------------------------------

namespace detail {

// sendfile(2) has no MSG_NOSIGNAL: on a socket whose peer has left it raises SIGPIPE, whose
// default action ends the process, and it may raise it and still return a byte count (a call
// that sent some pages and then failed). So around each call SIGPIPE is blocked on the calling
// thread, a SIGPIPE the call raised is consumed (sigtimedwait, zero timeout), and the mask is
// put back: the thread's signal state is what it was (threads it creates later inherit its mask).
// A SIGPIPE that was already pending on entry (blocked by the caller) is someone else's: it is
// left alone. Two or three system calls around each sendfile, which moves up to max_io bytes.
// NOTE: the calling thread's signal state: out of line, nothing of it kept across a suspension.
[[gnu::noinline]] auto sendfile_quiet(int sock, int fd, off_t* off, std::size_t n) -> ssize_t {
    sigset_t pipe_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    sigset_t old_mask;
    ::pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);
    const bool was_blocked = sigismember(&old_mask, SIGPIPE) == 1;
    bool was_pending = false;
    if (was_blocked) {  // unblocked, a pending SIGPIPE would have been delivered already
        sigset_t pending;
        sigemptyset(&pending);
        ::sigpending(&pending);
        was_pending = sigismember(&pending, SIGPIPE) == 1;
    }
    const ssize_t r = ::sendfile(sock, fd, off, n);
    const int err = errno;
    if (!was_pending) {
        const timespec zero{};
        while (::sigtimedwait(&pipe_set, nullptr, &zero) < 0 && errno == EINTR) {
        }
    }
    if (!was_blocked) {
        ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    }
    errno = err;
    return r;
}

}  // namespace detail

auto send_file(tcp_stream& to, const file& from, std::uint64_t offset, std::uint64_t count)
    -> task<result<void>> {
    const int sock = to.native_handle();
    while (count > 0) {
        auto off = static_cast<off_t>(offset);
        const ssize_t n =
            detail::sendfile_quiet(sock, from.fd_, &off, std::min<std::uint64_t>(count, max_io));
        if (n > 0) {
            offset += static_cast<std::uint64_t>(n);
            count -= static_cast<std::uint64_t>(n);
            continue;
        }
        if (n == 0) {
            co_return path_error(ENODATA, from.path_);  // the file ended before the range
        }
        if (errno == EINTR) {
            continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (auto w = co_await to.wait_writable(); !w) {
                co_return w.error();
            }
            continue;
        }
        co_return std::error_code(errno, std::system_category());
    }
    co_return result<void>{};
}

}  // namespace weft
