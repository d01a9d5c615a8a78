#pragma once

#include "weft/core/detail/worker_base.hpp"

// Private to weft::io: the epoll backend's readiness wait (until the socket may be readable or
// writable again) and the attempt-then-wait pattern every epoll operation is built from.

#include <cerrno>
#include <coroutine>
#include <utility>

#include "epoll_reactor.hpp"
#include "reactor.hpp"
#include "syscalls.hpp"
#include "weft/core/detail/wait_tag.hpp"
#include "weft/core/result.hpp"
#include "weft/core/task.hpp"

namespace weft::detail {

/// `co_await readiness{handle, write, seq}`: returns at once if an event arrived since `seq`
/// was read, else when the next one does. Result: false if cancelled.
class readiness : private readiness_waiter {
public:
    readiness(epoll_socket& h, bool for_write, std::uint32_t seq) noexcept : seq_(seq) {
        handle = &h;
        write = for_write;
    }

    auto await_ready() const noexcept -> bool { return false; }

    template <typename P>
    WEFT_PUBLISHES_HANDLE auto await_suspend(std::coroutine_handle<P> h) -> bool {
        stop = stop_of(h);
        waiter = h;
        home = current_worker();
        // Register for cancellation first, then publish: once published, an event on another
        // thread may resume us at any moment.
        if (stop != nullptr) {
            if (!stop->try_add(this)) {
                st = state::cancelled;
                return false;
            }
            registered = true;
        }
        std::unique_lock lock(handle->mu);
        if (handle->owner == nullptr) {
            // The socket's first wait: register it with this worker's epoll (not under mu).
            lock.unlock();
            if (auto ec = current_epoll().ensure_registered(*handle); ec) {
                error_ = ec;
                return false;
            }
            lock.lock();
        }
        if (st == state::cancelled) {
            return false;
        }
        const std::uint32_t now =
            (write ? handle->write_seq : handle->read_seq).load(std::memory_order_relaxed);
        if (now != seq_) {
            return false;  // an event came in since the caller's attempt: try again
        }
        st = state::waiting;
        tag_.set(h, wait_kind::io);
        readiness_waiter*& list = write ? handle->writers : handle->readers;
        next_waiter = list;
        list = this;
        handle->owner->waiting_changed(+1);
        return true;
    }

    /// ok, operation_canceled, or a registration failure.
    auto await_resume() noexcept -> std::error_code {
        tag_.clear();
        if (registered) {
            stop->remove(this);
            registered = false;
        }
        if (error_) {
            return error_;
        }
        if (st == state::cancelled) {
            return std::make_error_code(std::errc::operation_canceled);
        }
        return {};
    }

private:
    std::uint32_t seq_;
    wait_tag tag_;  // runtime::dump: waiting on IO
    std::error_code error_;
};

/// The current readiness sequence of `h` (snapshot before a non-blocking attempt; see
/// epoll_socket for why no lock is needed).
inline auto readiness_seq(epoll_socket& h, bool for_write) -> std::uint32_t {
    return (for_write ? h.write_seq : h.read_seq).load(std::memory_order_acquire);
}

/// A snapshot of `h`'s readiness before a stream transfer: the sequence, and whether a short
/// transfer already spent the socket at this sequence (then an attempt would only fail with
/// EAGAIN: wait for the next event instead).
struct stream_readiness {
    std::uint32_t seq;
    bool spent;
};

inline auto stream_snapshot(epoll_socket& h, bool for_write) -> stream_readiness {
    const std::uint32_t seq = readiness_seq(h, for_write);
    const auto& spent_at = for_write ? h.write_spent_at : h.read_spent_at;
    // final is set before the sequence moves (under mu) and read after it: a snapshot that
    // sees the event's sequence sees its hang-up too.
    const bool final = (for_write ? h.write_final : h.read_final).load(std::memory_order_relaxed);
    const std::uint32_t at = spent_at.load(std::memory_order_relaxed);
    return {seq, !final && at != 0 && at == seq + 1};
}

/// Records that a stream transfer attempted at `seq` moved `n` of the `want` bytes it asked
/// for. Fewer (and not 0: end of stream stays readable, and no further edge would announce it)
/// means the receive queue was empty or the send buffer full when it ran.
inline void stream_moved(
    epoll_socket& h, bool for_write, std::uint32_t seq, std::size_t n, std::size_t want) noexcept {
    // seq + 1 == 0 (the sequence about to wrap) would read as "none": skip that one.
    if (n != 0 && n < want && seq + 1 != 0) {
        (for_write ? h.write_spent_at : h.read_spent_at).store(seq + 1, std::memory_order_relaxed);
    }
}

/// What one epoll attempt came to: a result, or "wait for the next readiness event after
/// `seq`, then try again".
struct attempt_outcome {
    bool wait;
    std::uint32_t seq;
    result<std::size_t> value;
};

/// epoll: one try of `attempt()` (a non-blocking system call: a count, or -1 and errno),
/// repeated on EINTR; EAGAIN, or a socket a short transfer already spent, says wait.
/// `stream_want` is the byte count a stream transfer asks for (0 for datagrams, where a short
/// transfer says nothing about what is left): see epoll_socket::read_spent_at.
/// Not a coroutine, and always inlined: the hot paths build no frame and make no call unless
/// they must wait.
template <typename Attempt>
[[gnu::always_inline]] inline auto attempt_once(epoll_socket& h,
                                                bool for_write,
                                                std::size_t stream_want,
                                                Attempt& attempt) -> attempt_outcome {
    for (;;) {
        const stream_readiness snap = stream_want != 0
                                          ? stream_snapshot(h, for_write)
                                          : stream_readiness{readiness_seq(h, for_write), false};
        if (snap.spent) {
            return {true, snap.seq, std::size_t{0}};
        }
        const auto n = attempt();
        if (n >= 0) {
            if (stream_want != 0) {
                stream_moved(h, for_write, snap.seq, static_cast<std::size_t>(n), stream_want);
            }
            return {false, snap.seq, static_cast<std::size_t>(n)};
        }
        const int e = errno;
        if (e == EINTR) {
            continue;
        }
        if (e != EAGAIN && e != EWOULDBLOCK) {
            return {false, snap.seq, std::error_code(e, std::system_category())};
        }
        return {true, snap.seq, std::size_t{0}};
    }
}

/// epoll: the slow half of an operation whose attempt_once said wait: waits for the readiness
/// event after `seq`, then attempts again, until a result. Every epoll operation is
///
///     auto o = attempt_once(h, write, want, attempt);   // inline: no frame on the fast path
///     if (o.wait) { o.value = co_await wait_then_retry(h, write, want, o.seq, attempt); }
template <typename Attempt>
auto wait_then_retry(
    epoll_socket& h, bool for_write, std::size_t stream_want, std::uint32_t seq, Attempt attempt)
    -> task<result<std::size_t>> {
    for (;;) {
        if (auto ec = co_await readiness(h, for_write, seq); ec) {
            co_return ec;
        }
        attempt_outcome o = attempt_once(h, for_write, stream_want, attempt);
        if (!o.wait) {
            co_return std::move(o.value);
        }
        seq = o.seq;
    }
}

}  // namespace weft::detail
