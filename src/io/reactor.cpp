#include "reactor.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#include "weft/io/error.hpp"

namespace weft {

namespace {
class io_category_impl final : public std::error_category {
public:
    [[nodiscard]] auto name() const noexcept -> const char* override { return "weft.io"; }
    [[nodiscard]] auto message(int c) const -> std::string override {
        switch (static_cast<io_errc>(c)) {
            case io_errc::eof:
                return "connection closed by peer";
            case io_errc::backend_unavailable:
                return "IO backend unavailable on this kernel";
        }
        return "unknown weft.io error";
    }
};
}  // namespace

auto io_category() noexcept -> const std::error_category& {
    static const io_category_impl c;
    return c;
}

auto to_string(io_backend b) noexcept -> std::string_view {
    switch (b) {
        case io_backend::automatic:
            return "automatic";
        case io_backend::io_uring:
            return "io_uring";
        case io_backend::epoll:
            return "epoll";
    }
    return "?";
}

namespace {
auto uring_works() -> bool {
    io_uring ring{};
    if (io_uring_queue_init(8, &ring, 0) != 0) {
        return false;
    }
    io_uring_queue_exit(&ring);
    return true;
}
}  // namespace

auto resolve_io_backend(io_backend requested) -> io_backend {
    if (requested == io_backend::automatic) {
        if (const char* env = std::getenv("WEFT_IO_BACKEND"); env != nullptr && *env != '\0') {
            const std::string_view v = env;
            if (v == "io_uring") {
                requested = io_backend::io_uring;
            } else if (v == "epoll") {
                requested = io_backend::epoll;
            } else {
                throw std::invalid_argument("WEFT_IO_BACKEND must be io_uring or epoll, not '" +
                                            std::string(v) + "'");
            }
        }
    }
    if (requested == io_backend::automatic) {
        return uring_works() ? io_backend::io_uring : io_backend::epoll;
    }
    if (requested == io_backend::io_uring && !uring_works()) {
        throw std::system_error(make_error_code(io_errc::backend_unavailable),
                                "io_uring requested but io_uring_queue_init fails here");
    }
    return requested;
}

auto make_reactor_factory(io_backend b) -> std::function<std::unique_ptr<park_driver>(unsigned)> {
    const io_backend chosen = resolve_io_backend(b);
    return [chosen](unsigned) -> std::unique_ptr<park_driver> {
        if (chosen == io_backend::io_uring) {
            return std::make_unique<detail::uring_reactor>();
        }
        return std::make_unique<detail::epoll_reactor>();
    };
}

auto current_io_backend() -> io_backend {
    detail::reactor* r = detail::reactor::current();
    if (r == nullptr) {
        throw std::logic_error(
            "weft IO: this thread is not a worker of a runtime with reactors (create it with "
            "weft::io_runtime_options())");
    }
    return r->backend();
}

namespace detail {

// A poll that made fewer tasks runnable than this runs them itself: waking a parked worker
// (a context switch on each side) to steal a handful of short IO tasks costs more than it saves
// (echo server, 2 workers: 23,500 vs 2,000 context switches per 150k requests). A bigger batch
// wakes one helper.
constexpr unsigned wake_helper_batch = 8;

constinit thread_local reactor* reactor::tl_reactor = nullptr;

void reactor::unpark() noexcept {
    notified_.store(true, std::memory_order_seq_cst);
    if (sleeping_.load(std::memory_order_seq_cst)) {
        kick();
    }
}

auto reactor::begin_sleep() noexcept -> bool {
    if (notified_.exchange(false, std::memory_order_acquire)) {
        return false;
    }
    sleeping_.store(true, std::memory_order_seq_cst);
    if (notified_.exchange(false, std::memory_order_seq_cst)) {
        sleeping_.store(false, std::memory_order_relaxed);
        return false;
    }
    return true;
}

void reactor::end_sleep() noexcept {
    sleeping_.store(false, std::memory_order_relaxed);
    notified_.store(false, std::memory_order_relaxed);
}

auto current_uring() -> uring_reactor& {
    reactor* r = reactor::current();
    if (r == nullptr || r->backend() != io_backend::io_uring) {
        throw std::logic_error("weft IO: no io_uring reactor on this thread");
    }
    return static_cast<uring_reactor&>(*r);
}

auto current_epoll() -> epoll_reactor& {
    reactor* r = reactor::current();
    if (r == nullptr || r->backend() != io_backend::epoll) {
        throw std::logic_error("weft IO: no epoll reactor on this thread");
    }
    return static_cast<epoll_reactor&>(*r);
}

namespace {
auto to_timespec(std::int64_t ns) noexcept -> __kernel_timespec {
    if (ns < 0) {
        ns = 0;
    }
    __kernel_timespec ts{};
    ts.tv_sec = ns / 1'000'000'000;
    ts.tv_nsec = ns % 1'000'000'000;
    return ts;
}
}  // namespace

// ---- io_uring --------------------------------------------------------------------------------

uring_reactor::uring_reactor() : reactor(io_backend::io_uring) {
    // The wake fd outlives the ring: other threads may kick it until the reactor is destroyed
    // (after the worker threads are joined). Blocking: io_uring would complete a read of a
    // non-blocking eventfd at once with -EAGAIN, and the worker would never sleep.
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC);
    if (wake_fd_ < 0) {
        throw std::system_error(errno, std::system_category(), "eventfd");
    }
}

uring_reactor::~uring_reactor() {
    detach();
    ::close(wake_fd_);
}

// Submission queue: 256 entries (16 KiB of SQEs). A worker fills one SQE per operation and
// submits them all once per loop turn; a turn that queues more submits early (get_sqe). With
// 4096 entries the SQEs cycled through 256 KiB and each one written was a cache miss, paid at
// the worker's next locked instruction (waiting for the store to drain): 1.1% of the echo
// server's CPU, in user space alone (perf, 1000 connections). Completion queue: 4096 entries, so
// that bursts of multishot completions (10,000 connections) rarely overflow into the kernel's
// overflow list (nothing is lost then, see IORING_SQ_CQ_OVERFLOW in poll(), but it is slower).
constexpr unsigned sq_entries = 256;
constexpr unsigned cq_entries = 4096;

void uring_reactor::attach() {
    // One thread submits and reaps (the worker): let the kernel skip its cross-thread work.
    // TASKRUN_FLAG: the kernel raises IORING_SQ_TASKRUN in the shared ring flags when it has
    // deferred completion work for us, so poll() can tell "nothing new" without a system call.
    // Older kernels refuse flags they do not know: drop them one step at a time.
    constexpr unsigned tries[] = {
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN, 0U};
    int rc = -EINVAL;
    for (unsigned flags : tries) {
        io_uring_params p{};
        p.flags = flags | IORING_SETUP_CQSIZE;
        p.cq_entries = cq_entries;
        rc = io_uring_queue_init_params(sq_entries, &ring_, &p);
        if (rc != -EINVAL) {
            break;
        }
    }
    if (rc != 0) {
        throw std::system_error(-rc, std::system_category(), "io_uring_queue_init");
    }
    ring_ok_ = true;
    taskrun_flag_ = (ring_.flags & IORING_SETUP_TASKRUN_FLAG) != 0;
    arm_wake();
    tl_reactor = this;
}

void uring_reactor::detach() noexcept {
    if (tl_reactor == this) {
        tl_reactor = nullptr;
    }
    if (buffers_ != nullptr) {
        buffers_->orphan(&ring_);
        buffers_ = nullptr;
    }
    // Exiting the ring cancels what is armed in the kernel; no CQE will say so.
    for (uring_op* op : std::exchange(multishot_, {})) {
        op->on_detach(*op);
    }
    if (ring_ok_) {
        io_uring_queue_exit(&ring_);
        ring_ok_ = false;
    }
}

void uring_reactor::arm_wake() {
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_read(sqe, wake_fd_, &wake_buf_, sizeof(wake_buf_), 0);
    io_uring_sqe_set_data64(sqe, wake_tag);
}

auto uring_reactor::get_sqe() -> io_uring_sqe* {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) {
        io_uring_submit(&ring_);
        queued_ = 0;
        sqe = io_uring_get_sqe(&ring_);
        if (sqe == nullptr) {
            throw std::runtime_error("weft IO: io_uring submission queue stays full");
        }
    }
    ++queued_;
    return sqe;
}

void uring_reactor::submitted(uring_op& op) noexcept {
    op.st = uring_op::state::submitted;
    // Not an atomic RMW (one locked instruction less per operation): only this, the owner,
    // thread writes inflight_; others only read it.
    const std::size_t inflight = inflight_.load(std::memory_order_relaxed) + 1;
    inflight_.store(inflight, std::memory_order_relaxed);
    if (op.eager_submit && inflight > queued_) {  // others are in the kernel already
        const int n = io_uring_submit(&ring_);
        queued_ -= n > 0 ? std::min(queued_, static_cast<unsigned>(n)) : 0;
    }
}

auto uring_reactor::submit_multishot(uring_op& op) -> io_uring_sqe* {
    io_uring_sqe* sqe = get_sqe();
    op.multishot = true;
    op.owner = this;
    op.st = uring_op::state::submitted;
    io_uring_sqe_set_data(sqe, &op);
    multishot_.push_back(&op);
    return sqe;
}

void uring_reactor::request_cancel(uring_op& op) noexcept {
    {
        std::lock_guard lock(cancel_mu_);
        if (op.cancel_queued.load(std::memory_order_relaxed)) {
            return;
        }
        op.cancel_queued.store(true, std::memory_order_relaxed);
        op.cancel_prev = nullptr;
        op.cancel_next = cancel_head_;
        if (cancel_head_ != nullptr) {
            cancel_head_->cancel_prev = &op;
        }
        cancel_head_ = &op;
        cancels_waiting_.store(true, std::memory_order_release);
    }
    unpark();  // the owner submits the cancel on its next poll or park
}

void uring_reactor::forget_cancel(uring_op& op) noexcept {
    // Called after the op's stop callback was removed (stop_state::remove waited for a running
    // one), so no request_cancel can still set the flag; the acquire pairs with that callback's
    // unlock. Almost every op was never cancelled: no lock then.
    if (!op.cancel_queued.load(std::memory_order_acquire)) {
        return;
    }
    std::lock_guard lock(cancel_mu_);
    if (!op.cancel_queued.load(std::memory_order_relaxed)) {
        return;
    }
    op.cancel_queued.store(false, std::memory_order_relaxed);
    if (op.cancel_prev != nullptr) {
        op.cancel_prev->cancel_next = op.cancel_next;
    } else if (cancel_head_ == &op) {
        cancel_head_ = op.cancel_next;
    }
    if (op.cancel_next != nullptr) {
        op.cancel_next->cancel_prev = op.cancel_prev;
    }
    op.cancel_next = op.cancel_prev = nullptr;
}

void uring_reactor::submit_cancels() {
    // Every poll and park comes here; almost never is a cancel queued: no lock then. A request
    // racing this look is seen at the next one (request_cancel unparks this worker after it).
    if (!cancels_waiting_.load(std::memory_order_acquire)) {
        return;
    }
    std::lock_guard lock(cancel_mu_);
    cancels_waiting_.store(false, std::memory_order_relaxed);
    while (uring_op* op = cancel_head_) {
        cancel_head_ = op->cancel_next;
        op->cancel_next = op->cancel_prev = nullptr;
        op->cancel_queued.store(false, std::memory_order_relaxed);  // off the list for good
        io_uring_sqe* sqe = get_sqe();
        io_uring_prep_cancel64(sqe, reinterpret_cast<std::uint64_t>(op), 0);
        io_uring_sqe_set_data64(sqe, cancel_tag);
    }
}

auto uring_reactor::reap() -> bool {
    bool queued_any = false;
    unsigned queued = 0;
    unsigned head = 0;
    unsigned seen = 0;
    io_uring_cqe* cqe = nullptr;
    io_uring_for_each_cqe(&ring_, head, cqe) {
        ++seen;
        const std::uint64_t ud = io_uring_cqe_get_data64(cqe);
        if (ud == cancel_tag) {
            continue;
        }
        if (ud == wake_tag) {
            arm_wake();
            continue;
        }
        auto* op = reinterpret_cast<uring_op*>(ud);
        op->res = cqe->res;
        op->cqe_flags = cqe->flags;
        if (op->multishot) {
            if ((cqe->flags & IORING_CQE_F_MORE) == 0) {  // its last CQE: the hook may free it
                op->st = uring_op::state::done;
                std::erase(multishot_, op);
            }
            queued_any = op->on_complete(*op) || queued_any;
            continue;
        }
        op->st = uring_op::state::done;
        // The in-flight count drops only after the woken task is queued (release, by the
        // seq_cst RMW): shutdown reads this count before the queues (acquire), so it sees the
        // operation either still in flight or its task queued, never neither.
        // file_batch hook (see uring_op::on_complete): one resumption for many operations.
        if (op->on_complete != nullptr) {
            queued_any = op->on_complete(*op) || queued_any;
        } else {
            current_worker()->push_io_ready(op->waiter);
            queued_any = true;
            ++queued;
        }
        inflight_.fetch_sub(1, std::memory_order_seq_cst);
    }
    io_uring_cq_advance(&ring_, seen);
    if (queued >= wake_helper_batch) {
        current_worker()->notify_idle();  // one wake-up for the whole batch
    }
    return queued_any;
}

auto uring_reactor::buffers() -> buffer_pool* {
    if (!buffers_tried_) {
        buffers_tried_ = true;
        buffers_ = buffer_pool::create(&ring_);
    }
    return buffers_;
}

auto uring_reactor::poll() -> bool {
    submit_cancels();
    if (buffers_ != nullptr) {
        buffers_->drain_returns();
    }
    if (queued_ == 0 && inflight_.load(std::memory_order_relaxed) == 0 && multishot_.empty()) {
        return false;
    }
    // Nothing to submit, no CQE posted and no completion work deferred to us: skip the enter.
    // A busy worker polls between tasks and while it searches for work; without this check two
    // of every three polls of an echo server were system calls that found nothing (100
    // connections: 0.64 wasted io_uring_enter per request). A completion racing this check
    // raises the flag and is picked up by the next poll, or by park(), which always enters.
    if (taskrun_flag_ && io_uring_sq_ready(&ring_) == 0 && io_uring_cq_ready(&ring_) == 0 &&
        (IO_URING_READ_ONCE(*ring_.sq.kflags) & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW)) == 0) {
        return false;
    }
    io_uring_submit_and_get_events(&ring_);
    queued_ = 0;
    return reap();
}

void uring_reactor::park(std::optional<std::int64_t> timeout_ns) {
    submit_cancels();
    if (buffers_ != nullptr) {
        buffers_->drain_returns();
    }
    if (!begin_sleep()) {
        poll();
        return;
    }
    io_uring_cqe* cqe = nullptr;
    __kernel_timespec ts{};
    if (timeout_ns) {
        ts = to_timespec(*timeout_ns);
    }
    io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, timeout_ns ? &ts : nullptr, nullptr);
    queued_ = 0;
    end_sleep();
    reap();
}

void uring_reactor::kick() noexcept {
    const std::uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
}

// ---- provided buffers ------------------------------------------------------------------------

auto buffer_pool::create(io_uring* ring) -> buffer_pool* {
    auto* p = new buffer_pool;
    void* br = nullptr;
    if (::posix_memalign(&br, 4096, count * sizeof(io_uring_buf)) != 0) {
        delete p;
        return nullptr;
    }
    p->br_ = static_cast<io_uring_buf_ring*>(br);
    io_uring_buf_ring_init(p->br_);
    io_uring_buf_reg reg{};
    reg.ring_addr = reinterpret_cast<std::uint64_t>(p->br_);
    reg.ring_entries = count;
    reg.bgid = group;
    if (io_uring_register_buf_ring(ring, &reg, 0) != 0) {
        delete p;  // an older kernel: receive falls back to heap buffers
        return nullptr;
    }
    p->mem_ = static_cast<std::byte*>(std::aligned_alloc(64, count * size));
    p->slots_ = new slot[count];
    p->owner_ = std::this_thread::get_id();
    for (unsigned i = 0; i < count; ++i) {
        p->slots_[i].pool = p;
        p->slots_[i].bid = i;
        p->slots_[i].release = &buffer_pool::release;
    }
    p->grow();  // mem_ is only address space until a buffer is in the ring and used
    return p;
}

void buffer_pool::grow() noexcept {
    const unsigned n = std::min(grow_by, count - added_);
    for (unsigned i = 0; i < n; ++i) {
        const unsigned bid = added_ + i;
        io_uring_buf_ring_add(br_, mem_ + bid * size, size, static_cast<unsigned short>(bid),
                              io_uring_buf_ring_mask(count), static_cast<int>(i));
    }
    io_uring_buf_ring_advance(br_, static_cast<int>(n));
    added_ += n;
}

buffer_pool::~buffer_pool() {
    std::free(br_);
    std::free(mem_);
    delete[] slots_;
}

auto buffer_pool::take(unsigned bid, std::size_t len) noexcept -> bytes {
    refs_.fetch_add(1, std::memory_order_relaxed);
    slot& s = slots_[bid];
    s.refs.store(1, std::memory_order_relaxed);
    return bytes(&s, mem_ + bid * size, len);
}

void buffer_pool::give_back(unsigned bid) noexcept {
    io_uring_buf_ring_add(br_, mem_ + bid * size, size, static_cast<unsigned short>(bid),
                          io_uring_buf_ring_mask(count), 0);
    io_uring_buf_ring_advance(br_, 1);
}

void buffer_pool::release(bytes_block* b) noexcept {
    auto* s = static_cast<slot*>(b);
    buffer_pool* p = s->pool;
    if (!p->orphaned_.load(std::memory_order_acquire)) {
        if (std::this_thread::get_id() == p->owner_) {
            p->give_back(s->bid);
        } else {
            std::lock_guard lock(p->mu_);
            p->returned_.push_back(s->bid);
            p->returns_waiting_.store(true, std::memory_order_release);
        }
    }
    p->unref();
}

void buffer_pool::drain_returns() noexcept {
    // Every poll and park comes here: no lock unless another thread released a buffer (one
    // racing this look waits for the next poll; the ring has plenty meanwhile, and grows).
    if (!returns_waiting_.load(std::memory_order_acquire)) {
        return;
    }
    std::vector<unsigned> batch;
    {
        std::lock_guard lock(mu_);
        returns_waiting_.store(false, std::memory_order_relaxed);
        batch.swap(returned_);
    }
    for (unsigned bid : batch) {
        give_back(bid);
    }
}

void buffer_pool::orphan(io_uring* ring) noexcept {
    io_uring_unregister_buf_ring(ring, group);
    orphaned_.store(true, std::memory_order_release);
    unref();
}

void buffer_pool::unref() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        delete this;
    }
}

void uring_op::on_stop(stop_callback_node* n) noexcept {
    auto* op = static_cast<uring_op*>(n);
    op->owner->request_cancel(*op);
}

// ---- epoll -----------------------------------------------------------------------------------

epoll_reactor::epoll_reactor() : reactor(io_backend::epoll) {
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);  // kicked from any thread, any time
    if (wake_fd_ < 0) {
        throw std::system_error(errno, std::system_category(), "eventfd");
    }
}

epoll_reactor::~epoll_reactor() {
    detach();
    ::close(wake_fd_);
}

void epoll_reactor::attach() {
    epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epfd_ < 0) {
        throw std::system_error(errno, std::system_category(), "epoll_create1");
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET;
    ev.data.ptr = nullptr;  // nullptr = the wake fd
    if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0) {
        throw std::system_error(errno, std::system_category(), "epoll_ctl(wake fd)");
    }
    tl_reactor = this;
}

void epoll_reactor::detach() noexcept {
    if (tl_reactor == this) {
        tl_reactor = nullptr;
    }
    {
        // Sockets outliving the runtime register again with the next one that waits on them.
        std::lock_guard lock(reg_mu_);
        while (io_handle* h = registered_) {
            registered_ = h->reg_next;
            h->reg_prev = h->reg_next = nullptr;
            std::lock_guard hl(h->mu);
            h->owner = nullptr;
        }
    }
    free_retired();
    if (epfd_ >= 0) {
        ::close(epfd_);
        epfd_ = -1;
    }
}

auto epoll_reactor::ensure_registered(io_handle& h) -> std::error_code {
    {
        std::lock_guard lock(h.mu);
        if (h.owner != nullptr) {
            return {};
        }
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
        ev.data.ptr = &h;
        if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, h.fd, &ev) != 0) {
            return {errno, std::system_category()};
        }
        h.owner = this;
    }
    // Not under h.mu (detach takes reg_mu_, then each h.mu); detach runs on this thread, so it
    // cannot miss h in between.
    std::lock_guard lock(reg_mu_);
    h.reg_prev = nullptr;
    h.reg_next = registered_;
    if (registered_ != nullptr) {
        registered_->reg_prev = &h;
    }
    registered_ = &h;
    return {};
}

void epoll_reactor::retire(io_handle* h) noexcept {
    {
        std::lock_guard lock(reg_mu_);
        if (h->reg_prev != nullptr) {
            h->reg_prev->reg_next = h->reg_next;
        } else if (registered_ == h) {
            registered_ = h->reg_next;
        }
        if (h->reg_next != nullptr) {
            h->reg_next->reg_prev = h->reg_prev;
        }
        h->reg_prev = h->reg_next = nullptr;
    }
    ::epoll_ctl(epfd_, EPOLL_CTL_DEL, h->fd, nullptr);
    std::lock_guard lock(retire_mu_);
    retired_.push_back(h);
}

void epoll_reactor::free_retired() noexcept {
    std::vector<io_handle*> batch;
    {
        std::lock_guard lock(retire_mu_);
        batch.swap(retired_);
    }
    for (io_handle* h : batch) {
        delete h;
    }
}

auto epoll_reactor::wait(int timeout_ms) -> bool {
    unsigned queued = 0;
    // Handles retired before this call cannot appear in its events: free them first.
    free_retired();
    epoll_event events[256];
    const int n = ::epoll_wait(epfd_, events, 256, timeout_ms);
    bool queued_any = false;
    for (int i = 0; i < n; ++i) {
        auto* h = static_cast<io_handle*>(events[i].data.ptr);
        if (h == nullptr) {
            std::uint64_t v = 0;
            (void)!::read(wake_fd_, &v, sizeof(v));
            continue;
        }
        const std::uint32_t e = events[i].events;
        readiness_waiter* woken[2] = {nullptr, nullptr};
        {
            std::lock_guard lock(h->mu);
            if ((e & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) {
                h->read_final.store(true, std::memory_order_relaxed);
            }
            if ((e & (EPOLLHUP | EPOLLERR)) != 0) {
                h->write_final.store(true, std::memory_order_relaxed);
            }
            if ((e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) {
                h->read_seq.fetch_add(1, std::memory_order_release);
                woken[0] = std::exchange(h->readers, nullptr);
            }
            if ((e & (EPOLLOUT | EPOLLHUP | EPOLLERR)) != 0) {
                h->write_seq.fetch_add(1, std::memory_order_release);
                woken[1] = std::exchange(h->writers, nullptr);
            }
            for (readiness_waiter* w : woken) {
                for (; w != nullptr; w = w->next_waiter) {
                    w->st = readiness_waiter::state::fired;
                }
            }
        }
        for (readiness_waiter* w : woken) {
            while (w != nullptr) {
                readiness_waiter* next = w->next_waiter;  // read first: once resumed, w may be gone
                (void)resume_from_io(w->waiter, w->home);
                waiting_changed(-1);  // after the queueing: see uring_reactor::reap
                queued_any = true;
                ++queued;
                w = next;
            }
        }
    }
    if (queued >= wake_helper_batch) {
        current_worker()->notify_idle();  // one wake-up for the whole batch
    }
    return queued_any;
}

auto epoll_reactor::poll() -> bool {
    if (waiting_.load(std::memory_order_relaxed) == 0) {
        free_retired();
        return false;
    }
    return wait(0);
}

void epoll_reactor::park(std::optional<std::int64_t> timeout_ns) {
    if (!begin_sleep()) {
        poll();
        return;
    }
    int ms = -1;
    if (timeout_ns) {
        // Round up: waking early would only make the worker park again.
        ms = *timeout_ns <= 0 ? 0 : static_cast<int>((*timeout_ns + 999'999) / 1'000'000);
    }
    wait(ms);
    end_sleep();
}

void epoll_reactor::kick() noexcept {
    const std::uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
}

void readiness_waiter::on_stop(stop_callback_node* n) noexcept {
    auto* w = static_cast<readiness_waiter*>(n);
    io_handle* h = w->handle;
    std::coroutine_handle<> resume;
    worker_base* home = w->home;
    epoll_reactor* owner = nullptr;
    {
        std::lock_guard lock(h->mu);
        if (w->st == state::waiting) {
            readiness_waiter** link = w->write ? &h->writers : &h->readers;
            while (*link != w) {
                link = &(*link)->next_waiter;
            }
            *link = w->next_waiter;
            w->st = state::cancelled;
            resume = w->waiter;
            owner = h->owner;
        } else if (w->st == state::idle) {
            w->st = state::cancelled;  // the waiter sees it before it publishes itself
        }
    }
    if (resume) {
        // NOTE: w may be gone once resume runs; the count drops after the task is queued (see
        // uring_reactor::reap).
        resume_soon(resume, home);
        owner->waiting_changed(-1);
    }
}

}  // namespace detail
}  // namespace weft
