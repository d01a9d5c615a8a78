#include "epoll_reactor.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <stdexcept>
#include <system_error>
#include <utility>

namespace weft::detail {

auto current_epoll() -> epoll_reactor& {
    reactor* r = reactor::current();
    if (r == nullptr || r->backend() != io_backend::epoll) {
        throw std::logic_error("weft IO: no epoll reactor on this thread");
    }
    return static_cast<epoll_reactor&>(*r);
}

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
    attached_for_test();
}

void epoll_reactor::detach() noexcept {
    if (tl_reactor == this) {
        tl_reactor = nullptr;
    }
    detached_for_test();
    {
        // Sockets outliving the runtime register again with the next one that waits on them.
        std::lock_guard lock(reg_mu_);
        while (epoll_socket* h = registered_) {
            registered_ = h->reg_next;
            h->reg_prev = h->reg_next = nullptr;
            std::lock_guard hl(h->mu);
            h->owner = nullptr;
        }
    }
    free_retired();
    {
        // Shutdown resumed every waiter first (each is counted in waiting_): what is left here
        // has no waiter, and closing the epoll below removes its registration.
        std::lock_guard lock(foreign_mu_);
        for (auto& [fd, f] : foreign_) {
            delete f;
        }
        foreign_.clear();
    }
    if (epfd_ >= 0) {
        ::close(epfd_);
        epfd_ = -1;
    }
}

auto epoll_reactor::ensure_registered(epoll_socket& h) -> std::error_code {
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

void epoll_reactor::retire(epoll_socket* h) noexcept {
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
    std::vector<epoll_socket*> batch;
    {
        std::lock_guard lock(retire_mu_);
        batch.swap(retired_);
    }
    for (epoll_socket* h : batch) {
        delete h;
    }
    std::vector<foreign_fd*> foreign_batch;
    {
        std::lock_guard lock(foreign_mu_);
        foreign_batch.swap(foreign_retired_);
    }
    for (foreign_fd* f : foreign_batch) {
        delete f;
    }
}

// ---- foreign descriptors (fd_wait.hpp) -------------------------------------------------------
//
// epoll_event.data of a foreign descriptor: the address of its foreign_fd with bit 0 set
// (foreign_fd is at least 8-aligned; an epoll_socket's address has bit 0 clear, the wake fd is 0).

namespace {
constexpr std::uint64_t foreign_tag = 1;

auto events_of(const foreign_waiter* w) noexcept -> std::uint32_t {
    std::uint32_t m = 0;
    for (; w != nullptr; w = w->next_waiter) {
        m |= w->events;
    }
    return m;
}

auto foreign_ctl(int epfd, int op, foreign_fd& f, std::uint32_t events) noexcept -> int {
    epoll_event ev{};
    ev.events = events | EPOLLONESHOT;
    ev.data.u64 = reinterpret_cast<std::uintptr_t>(&f) | foreign_tag;
    return ::epoll_ctl(epfd, op, f.fd, &ev);
}

// Does an event `e` end the wait of a waiter for `events`? Hang-up and error end every wait.
auto satisfies(std::uint32_t e, std::uint32_t events) noexcept -> bool {
    return (e & (events | EPOLLHUP | EPOLLERR)) != 0;
}
}  // namespace

auto epoll_reactor::add_foreign(foreign_waiter& w, std::error_code& ec) -> bool {
    std::lock_guard lock(foreign_mu_);
    if (w.st == foreign_waiter::state::cancelled) {
        return false;
    }
    auto [it, inserted] = foreign_.try_emplace(w.fd, nullptr);
    if (inserted) {
        auto* f = new foreign_fd(w.fd);
        if (foreign_ctl(epfd_, EPOLL_CTL_ADD, *f, w.events) != 0) {
            const int e = errno;
            delete f;
            foreign_.erase(it);
            if (e == EPERM) {  // a regular file or a directory: always ready
                w.st = foreign_waiter::state::fired;
                return false;
            }
            ec.assign(e, std::system_category());
            return false;
        }
        f->armed = w.events;
        it->second = f;
    }
    foreign_fd& f = *it->second;
    if ((f.armed & w.events) != w.events) {
        // Armed here (the owner processed every event it collected before running this task),
        // but for the other direction: widen it.
        if (foreign_ctl(epfd_, EPOLL_CTL_MOD, f, f.armed | w.events) != 0) {
            ec.assign(errno, std::system_category());
            return false;
        }
        f.armed |= w.events;
    }
    w.next_waiter = f.waiters;
    w.entry = &f;
    f.waiters = &w;
    w.st = foreign_waiter::state::waiting;
    waiting_changed(+1);
    return true;
}

auto epoll_reactor::rearm_or_retire(foreign_fd& f, bool fired) noexcept -> foreign_waiter* {
    const std::uint32_t want = events_of(f.waiters);
    if (want != 0 && (fired || want != f.armed)) {
        if (foreign_ctl(epfd_, EPOLL_CTL_MOD, f, want) == 0) {
            f.armed = want;
            return nullptr;
        }
        // The descriptor was closed under its waiters (the library broke the contract): wake
        // them all rather than strand them; their library calls report the failure.
    } else if (want != 0) {
        return nullptr;
    }
    ::epoll_ctl(epfd_, EPOLL_CTL_DEL, f.fd, nullptr);
    foreign_.erase(f.fd);
    f.retired = true;
    f.armed = 0;
    foreign_retired_.push_back(&f);
    foreign_waiter* left = std::exchange(f.waiters, nullptr);
    for (foreign_waiter* w = left; w != nullptr; w = w->next_waiter) {
        w->st = foreign_waiter::state::fired;
    }
    return left;
}

auto epoll_reactor::foreign_event(foreign_fd* f, std::uint32_t e) -> unsigned {
    foreign_waiter* woken = nullptr;
    {
        std::lock_guard lock(foreign_mu_);
        if (f->retired) {
            return 0;  // its last waiter was cancelled after epoll_wait reported it
        }
        f->armed = 0;  // one-shot: this event disarmed it
        foreign_waiter** link = &f->waiters;
        while (foreign_waiter* w = *link) {
            if (satisfies(e, w->events)) {
                *link = w->next_waiter;
                w->st = foreign_waiter::state::fired;
                w->next_waiter = woken;
                woken = w;
            } else {
                link = &w->next_waiter;
            }
        }
        // Removed (or re-armed for the others) before anyone resumes: the library may close
        // the descriptor as soon as its task runs.
        foreign_waiter* left = rearm_or_retire(*f, /*fired=*/true);
        while (left != nullptr) {
            foreign_waiter* next = left->next_waiter;
            left->next_waiter = woken;
            woken = left;
            left = next;
        }
    }
    unsigned queued = 0;
    while (woken != nullptr) {
        foreign_waiter* next = woken->next_waiter;  // read first: once resumed, it may be gone
        (void)resume_from_io(woken->waiter, woken->home);
        waiting_changed(-1);  // after the queueing: see uring_reactor::reap
        ++queued;
        woken = next;
    }
    return queued;
}

void epoll_reactor::cancel_foreign(foreign_waiter& w) noexcept {
    foreign_waiter* resume = nullptr;
    {
        std::lock_guard lock(foreign_mu_);
        if (w.st == foreign_waiter::state::idle) {
            w.st = foreign_waiter::state::cancelled;  // the waiter sees it before it publishes
            return;
        }
        if (w.st != foreign_waiter::state::waiting) {
            return;
        }
        foreign_fd& f = *w.entry;
        foreign_waiter** link = &f.waiters;
        while (*link != &w) {
            link = &(*link)->next_waiter;
        }
        *link = w.next_waiter;
        w.st = foreign_waiter::state::cancelled;
        w.next_waiter = rearm_or_retire(f, /*fired=*/false);
        resume = &w;
    }
    while (resume != nullptr) {
        foreign_waiter* next = resume->next_waiter;  // read first: once resumed, it may be gone
        resume_soon(resume->waiter, resume->home);
        waiting_changed(-1);
        resume = next;
    }
}

auto epoll_reactor::foreign_registrations() -> std::size_t {
    std::lock_guard lock(foreign_mu_);
    return foreign_.size();
}

void foreign_waiter::on_stop(stop_callback_node* n) noexcept {
    auto* w = static_cast<foreign_waiter*>(n);
    w->owner->cancel_foreign(*w);
}

auto epoll_reactor::wait(int timeout_ms) -> bool {
    unsigned queued = 0;
    // Handles retired before this call cannot appear in its events: free them first.
    free_retired();
    epoll_event events[256];
    const int n = ::epoll_wait(epfd_, events, 256, timeout_ms);
    bool queued_any = false;
    for (int i = 0; i < n; ++i) {
        const std::uint64_t tag = events[i].data.u64;
        if (tag == 0) {
            std::uint64_t v = 0;
            (void)!::read(wake_fd_, &v, sizeof(v));
            continue;
        }
        const std::uint32_t e = events[i].events;
        if ((tag & foreign_tag) != 0) {
            const unsigned n_woken =
                foreign_event(reinterpret_cast<foreign_fd*>(tag & ~foreign_tag), e);
            queued += n_woken;
            queued_any = queued_any || n_woken != 0;
            continue;
        }
        auto* h = static_cast<epoll_socket*>(events[i].data.ptr);
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
    wait(epoll_timeout_ms(timeout_ns));
    end_sleep();
}

auto epoll_timeout_ms(std::optional<std::int64_t> timeout_ns) noexcept -> int {
    if (!timeout_ns) {
        return -1;
    }
    if (*timeout_ns <= 0) {
        return 0;
    }
    // Rounded up: waking early would only make the worker park again. Clamped to INT_MAX ms
    // (24.8 days): a longer one wrapped would be negative (no timeout) or short; the worker
    // wakes then and parks again with what is left.
    constexpr std::int64_t ns_per_ms = 1'000'000;
    const std::int64_t ms = *timeout_ns / ns_per_ms + (*timeout_ns % ns_per_ms != 0 ? 1 : 0);
    return static_cast<int>(std::min<std::int64_t>(ms, std::numeric_limits<int>::max()));
}

void epoll_reactor::kick() noexcept {
    const std::uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
}

void readiness_waiter::on_stop(stop_callback_node* n) noexcept {
    auto* w = static_cast<readiness_waiter*>(n);
    epoll_socket* h = w->handle;
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

}  // namespace weft::detail
