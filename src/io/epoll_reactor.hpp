#pragma once

// Private to weft::io: the epoll reactor and its per-socket readiness state.

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <mutex>
#include <optional>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "reactor.hpp"

namespace weft::detail {

class epoll_reactor;
struct readiness_waiter;
struct foreign_fd;

/// Per-socket state. io_uring needs none of it beyond the fd; epoll keeps the readiness
/// registration here: the socket is registered (edge-triggered, in and out) with the epoll of the
/// first worker that waits on it, and that worker's reactor delivers its events from then on,
/// whichever worker the waiting task runs on.
/// read_seq / write_seq count readiness events (changed under mu; read without it for a
/// snapshot): a waiter snapshots one before its non-blocking attempt and sleeps only if, under
/// mu, no event came in between (so an edge is never lost between EAGAIN and the wait; a stale
/// snapshot only costs one more attempt).
/// read_spent_at / write_spent_at: a stream transfer moved fewer bytes than asked, so it drained
/// the receive queue (or filled the send buffer); the field holds the sequence it ran at, plus
/// one (0: none). Until the next event another attempt could only fail with EAGAIN, so the next
/// transfer waits for the event instead: one system call per request saved. Edge-triggered epoll
/// reports every arrival after the drain as a new event, and the wait re-checks the sequence
/// under mu, so skipping the attempt never strands data. Except the end: a peer's FIN or reset
/// that came in with the last data is reported in the same event as the data, and no later
/// event announces it; so once an event has said hang-up or error, read_final / write_final
/// are set for good and every transfer is attempted (it returns 0 or the error at once).
/// readers / writers list the tasks waiting (usually one of each; several tasks accepting on
/// one listener wait together): an event wakes them all, and those that lose the race for the
/// data (or connection) wait again.
struct epoll_socket {
    explicit epoll_socket(int f) noexcept : fd(f) {}
    int fd;
    spin_lock mu;  // held for a few pointer moves (and the epoll_ctl of the first wait)
    epoll_reactor* owner = nullptr;           // guarded by mu; set once
    std::atomic<std::uint32_t> read_seq{0};   // written under mu
    std::atomic<std::uint32_t> write_seq{0};  // written under mu
    std::atomic<std::uint32_t> read_spent_at{0};
    std::atomic<std::uint32_t> write_spent_at{0};
    std::atomic<bool> read_final{false};
    std::atomic<bool> write_final{false};
    readiness_waiter* readers = nullptr;  // guarded by mu
    readiness_waiter* writers = nullptr;  // guarded by mu
    epoll_socket* reg_prev = nullptr;     // in owner's registered list (its reg_mu_)
    epoll_socket* reg_next = nullptr;
};

/// Waits for a readiness event on an epoll_socket, embedded in the awaiting frame.
/// `state` (guarded by the handle's mu): idle -> waiting -> fired | cancelled. Whoever moves it
/// out of waiting resumes the waiter, once.
struct readiness_waiter : stop_callback_node {
    enum class state : std::uint8_t { idle, waiting, fired, cancelled };
    readiness_waiter() noexcept : stop_callback_node(&readiness_waiter::on_stop) {}
    readiness_waiter(const readiness_waiter&) = delete;
    auto operator=(const readiness_waiter&) -> readiness_waiter& = delete;
    static void on_stop(stop_callback_node* n) noexcept;

    epoll_socket* handle = nullptr;
    bool write = false;
    state st = state::idle;
    bool registered = false;
    readiness_waiter* next_waiter = nullptr;  // in the handle's readers / writers (its mu)
    std::coroutine_handle<> waiter;
    worker_base* home = nullptr;
    stop_state* stop = nullptr;
};

/// A task waiting for a descriptor weft does not own to become ready (fd_wait.hpp), embedded in
/// the awaiting frame. `st` (guarded by owner->foreign_mu_): idle -> waiting -> fired |
/// cancelled, or idle -> cancelled (stop requested before it was published). Whoever moves it
/// out of waiting takes it off its foreign_fd and resumes the waiter, once.
struct foreign_waiter : stop_callback_node {
    enum class state : std::uint8_t { idle, waiting, fired, cancelled };
    foreign_waiter() noexcept : stop_callback_node(&foreign_waiter::on_stop) {}
    foreign_waiter(const foreign_waiter&) = delete;
    auto operator=(const foreign_waiter&) -> foreign_waiter& = delete;
    static void on_stop(stop_callback_node* n) noexcept;

    int fd = -1;
    std::uint32_t events = 0;  // EPOLLIN or EPOLLOUT
    state st = state::idle;
    foreign_waiter* next_waiter = nullptr;  // in its foreign_fd's list (owner->foreign_mu_)
    foreign_fd* entry = nullptr;            // while waiting (owner->foreign_mu_)
    std::coroutine_handle<> waiter;
    worker_base* home = nullptr;
    epoll_reactor* owner = nullptr;
};

/// A foreign descriptor registered with one reactor's epoll while tasks wait on it there.
/// Level-triggered and EPOLLONESHOT: an event disarms it, and the reactor re-arms it (MOD) for
/// the waiters that remain or removes it (DEL) when none does, before it resumes anyone; so a
/// descriptor nobody waits on is never in the epoll, and its owner may close it.
/// Invariants (under foreign_mu_): registered in the epoll <=> in foreign_ <=> !retired;
/// waiters != nullptr for every entry of foreign_ outside foreign_mu_; armed == the OR of its
/// waiters' events whenever no event for it is collected but unprocessed (only the owner
/// collects events, and it processes them before it returns to any task).
struct foreign_fd {
    explicit foreign_fd(int f) noexcept : fd(f) {}
    int fd;
    std::uint32_t armed = 0;  // events of the current registration; 0: fired (disarmed)
    bool retired = false;     // deleted from the epoll; freed at the owner's next wait
    foreign_waiter* waiters = nullptr;
};

class epoll_reactor final : public reactor {
public:
    epoll_reactor();
    ~epoll_reactor() override;

    void attach() override;
    void detach() noexcept override;
    void park(std::optional<std::int64_t> timeout_ns) override;
    auto poll() -> bool override;
    [[nodiscard]] auto poll_is_cheap() const noexcept -> bool override { return false; }
    [[nodiscard]] auto expects_io() const noexcept -> bool override {
        return waiting_.load(std::memory_order_relaxed) != 0;
    }
    [[nodiscard]] auto pending() const noexcept -> std::size_t override {
        return waiting_.load(std::memory_order_seq_cst);
    }

    /// Owner thread: registers `h` with this epoll if it is not registered anywhere yet (or
    /// only with the epoll of a runtime that has stopped: sockets may outlive a runtime).
    auto ensure_registered(epoll_socket& h) -> std::error_code;
    /// Any thread: unregisters and frees `h` once no event of this reactor can still name it.
    void retire(epoll_socket* h) noexcept;
    void waiting_changed(int delta) noexcept {
        waiting_.fetch_add(delta, std::memory_order_seq_cst);
    }

    /// Owner thread: publishes `w` (its fd, events, waiter, home and owner set), registering or
    /// re-arming its descriptor. True: `w` waits, and an event or cancel_foreign resumes it, on
    /// any thread at any moment (the caller must not touch it again). False: it does not wait,
    /// and w.st says why: fired (ready at once: a regular file, which epoll refuses), cancelled
    /// (its stop came first), or idle with `ec` set to the failure of epoll_ctl (EBADF...).
    auto add_foreign(foreign_waiter& w, std::error_code& ec) -> bool;
    /// Any thread: ends `w`'s wait if it still waits (removing or re-arming its descriptor) and
    /// resumes it; marks it cancelled if it is not published yet.
    void cancel_foreign(foreign_waiter& w) noexcept;
    /// Foreign descriptors registered with this epoll now (tests: none is left behind).
    [[nodiscard]] auto foreign_registrations() -> std::size_t;

private:
    void kick() noexcept override;
    auto wait(int timeout_ms) -> bool;
    void free_retired() noexcept;
    auto foreign_event(foreign_fd* f, std::uint32_t e) -> unsigned;
    /// Under foreign_mu_: after f's waiters changed (`fired`: an event disarmed it), re-arm it
    /// for those left, or delete it from the epoll when none is left. Returns the waiters it had
    /// to take off (marked fired; the caller resumes them): those of a descriptor that can no
    /// longer be re-armed, because its owner closed it under them.
    auto rearm_or_retire(foreign_fd& f, bool fired) noexcept -> foreign_waiter*;

    int epfd_ = -1;
    int wake_fd_ = -1;
    std::atomic<std::size_t> waiting_{0};
    std::mutex retire_mu_;
    std::vector<epoll_socket*> retired_;  // guarded by retire_mu_
    std::mutex reg_mu_;
    epoll_socket* registered_ = nullptr;            // guarded by reg_mu_; orphaned at detach
    std::mutex foreign_mu_;                         // held for an epoll_ctl and a few pointer moves
    std::unordered_map<int, foreign_fd*> foreign_;  // guarded by foreign_mu_
    std::vector<foreign_fd*> foreign_retired_;      // guarded by foreign_mu_
};

/// epoll_wait's timeout for a park of `timeout_ns`: milliseconds rounded up, at most INT_MAX,
/// 0 for a timeout already passed; -1 (no timeout) for none.
auto epoll_timeout_ms(std::optional<std::int64_t> timeout_ns) noexcept -> int;

/// The reactor on this thread as an io_uring / epoll reactor, or a clear error.

/// This thread's epoll reactor; throws std::logic_error when it has none.
auto current_epoll() -> epoll_reactor&;

}  // namespace weft::detail
