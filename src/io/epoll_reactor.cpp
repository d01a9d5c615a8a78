#include "epoll_reactor.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
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
}

void epoll_reactor::detach() noexcept {
    if (tl_reactor == this) {
        tl_reactor = nullptr;
    }
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
}

auto epoll_reactor::wait(int timeout_ms) -> bool {
    unsigned queued = 0;
    // Handles retired before this call cannot appear in its events: free them first.
    free_retired();
    epoll_event events[256];
    const int n = ::epoll_wait(epfd_, events, 256, timeout_ms);
    bool queued_any = false;
    for (int i = 0; i < n; ++i) {
        auto* h = static_cast<epoll_socket*>(events[i].data.ptr);
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
