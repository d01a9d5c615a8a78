#pragma once

#include <chrono>

#include "weft/core/result.hpp"
#include "weft/core/task.hpp"

namespace weft {

/// Waits, through the awaiting worker's reactor, until a descriptor that someone else owns is
/// readable (`wait_readable`) or writable (`wait_writable`): the socket of a C client library
/// (libpq, cnats), the eventfd librdkafka signals its queue on, a pipe. The library keeps doing
/// its own reads and writes; weft only tells it when to try, and no worker ever blocks inside it.
///
/// Ownership: weft never closes, reads or writes `fd` and leaves its flags (blocking or not)
/// alone. Once the wait has returned, whatever its result, the reactor holds no registration
/// of `fd` from this wait (io_uring: a one-shot poll that has completed or been cancelled in the
/// kernel; epoll: the descriptor is removed from the worker's epoll before the task resumes,
/// unless another task still waits on it there), so the library may close it at once. The
/// library must not close it while a wait on it is pending.
///
/// Readiness is level-triggered: a descriptor that is ready already returns at once. Hang-up
/// and error conditions count as ready (the library's own call then reports them). A wake-up
/// means "try now": the library's call may still find nothing (another reader was first), and
/// the caller simply waits again. Several tasks may wait on one descriptor at the same time;
/// every waiter whose condition holds is woken.
///
/// For descriptors weft does not own: on epoll, a socket that a weft tcp_stream or listener
/// also waits on may be refused (EEXIST); use its own operations (tcp_stream::wait_writable).
///
/// Results: ok; `operation_canceled` when the task's stop is requested (on io_uring the poll is
/// cancelled in the kernel first); the system error of a bad descriptor (EBADF). A regular file
/// is always ready.
///
///     const std::uint64_t one = 1;                  // librdkafka writes it to efd (an eventfd)
///     rd_kafka_queue_io_event_enable(q, efd, &one, sizeof(one));
///     for (;;) {
///         if (auto r = co_await weft::wait_readable(efd); !r) break;   // cancelled
///         drain(efd); while (auto* ev = rd_kafka_queue_poll(q, 0)) handle(ev);
///     }
[[nodiscard]] auto wait_readable(int fd) -> task<result<void>>;

/// As wait_readable, for room to write (a libpq connection flushing, a non-blocking connect).
///
///     while (PQflush(conn) == 1) {
///         (co_await weft::wait_writable(PQsocket(conn))).value();
///     }
[[nodiscard]] auto wait_writable(int fd) -> task<result<void>>;

/// wait_readable that gives up with `timed_out` after `timeout` (the registration is removed
/// then too).
///
///     auto r = co_await weft::wait_readable(PQsocket(conn), 5s);   // r.error() == timed_out
[[nodiscard]] auto wait_readable(int fd, std::chrono::milliseconds timeout) -> task<result<void>>;

/// wait_writable that gives up with `timed_out` after `timeout`.
[[nodiscard]] auto wait_writable(int fd, std::chrono::milliseconds timeout) -> task<result<void>>;

}  // namespace weft
