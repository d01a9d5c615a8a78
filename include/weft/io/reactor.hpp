#pragma once

#include <functional>
#include <memory>
#include <string_view>

#include "weft/sched/driver.hpp"
#include "weft/sched/runtime.hpp"

namespace weft {

/// Which kernel interface a runtime's workers use for IO.
enum class io_backend {
    automatic,  ///< io_uring when the kernel allows it (probed at start), else epoll
    io_uring,
    epoll,
};

[[nodiscard]] auto to_string(io_backend b) noexcept -> std::string_view;

/// The backend `automatic` resolves to on this machine: WEFT_IO_BACKEND=io_uring|epoll in the
/// environment forces one; otherwise io_uring if a ring can be created, else epoll.
[[nodiscard]] auto resolve_io_backend(io_backend requested = io_backend::automatic) -> io_backend;

/// A runtime_options::make_driver that gives every worker its own reactor (an io_uring ring or
/// an epoll instance) as the place it sleeps: the worker waits for IO and for its next timer in
/// one system call, and is woken through the reactor. Throws std::system_error at start-up if
/// the forced backend is unavailable. A runtime whose options name no make_driver gets
/// `make_reactor_factory(io_backend::automatic)` when the program links weft::io.
[[nodiscard]] auto make_reactor_factory(io_backend b = io_backend::automatic)
    -> std::function<std::unique_ptr<park_driver>(unsigned worker)>;

/// runtime_options with a reactor per worker of backend `b`:
/// `weft::runtime rt{weft::io_runtime_options(2, weft::io_backend::epoll)}`. With `automatic`
/// it is what `weft::runtime rt{{.workers = workers}}` gives.
[[nodiscard]] inline auto io_runtime_options(unsigned workers = 0,
                                             io_backend b = io_backend::automatic)
    -> runtime_options {
    runtime_options o;
    o.workers = workers;
    o.make_driver = make_reactor_factory(b);
    return o;
}

/// Grows this process's descriptor table now to hold `n` descriptors (capped at RLIMIT_NOFILE),
/// for a process about to open many (a server about to accept a storm of connections, a load
/// client); true when it holds that many (it never shrinks). Linux grows the table by doubling
/// when a new descriptor does not fit, and in a process with more than one thread each growth
/// waits for an RCU grace period, while every other thread that opens a descriptor waits too
/// (accept4 in `expand_files`): a fresh server taking 1,000 connections at once paid several
/// of them before its first responses (docs/design/decisions.md). Called before the
/// process starts threads, it waits for none. The table costs 8 bytes of kernel memory per
/// descriptor. http::server::serve calls it for its max_connections.
auto reserve_descriptors(std::size_t n) noexcept -> bool;

/// The backend of the reactor running on this thread (throws std::logic_error when this thread
/// is not a worker of a runtime with reactors: off the runtime, or on one given a futex driver).
[[nodiscard]] auto current_io_backend() -> io_backend;

}  // namespace weft
