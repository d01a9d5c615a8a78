// Which reactor a worker gets: io_uring when the kernel allows it (probed once), else epoll;
// WEFT_IO_BACKEND forces one.

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <system_error>

#include "epoll_reactor.hpp"
#include "reactor.hpp"
#include "uring_reactor.hpp"
#include "weft/io/error.hpp"
#include "weft/io/reactor.hpp"
#include "weft/sched/detail/default_driver.hpp"

namespace weft {

// A duplicate at the lowest free number >= n - 1 makes the kernel size the table for n at once
// (F_DUPFD never replaces an open descriptor, unlike dup2); it is closed again, and the table
// keeps its size.
auto reserve_descriptors(std::size_t n) noexcept -> bool {
    rlimit rl{};
    if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        return false;
    }
    if (rl.rlim_cur != RLIM_INFINITY) {
        n = std::min<std::size_t>(n, static_cast<std::size_t>(rl.rlim_cur));
    }
    n = std::min<std::size_t>(n, static_cast<std::size_t>(std::numeric_limits<int>::max()));
    if (n < 2) {
        return true;
    }
    const int base = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (base < 0) {
        return false;
    }
    const int dup = ::fcntl(base, F_DUPFD_CLOEXEC, static_cast<int>(n - 1));
    ::close(base);
    if (dup < 0) {
        return false;
    }
    ::close(dup);
    return true;
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

namespace {
// Every IO operation asks current_io_backend which backend it runs on, so this object file is
// in every program that does IO: such a program's runtimes get reactors by default
// (sched/detail/default_driver.hpp).
[[maybe_unused]] const bool reactors_by_default = [] {
    detail::install_default_driver([] { return make_reactor_factory(io_backend::automatic); });
    return true;
}();
}  // namespace

auto current_io_backend() -> io_backend {
    detail::reactor* r = detail::reactor::current();
    if (r == nullptr) {
        throw std::logic_error(
            "weft IO: this thread is not a worker of a runtime with reactors (IO runs on the "
            "workers of a runtime whose runtime_options::make_driver is empty or a reactor)");
    }
    return r->backend();
}

}  // namespace weft
