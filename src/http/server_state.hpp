#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "connection.hpp"
#include "weft/core/stop.hpp"
#include "weft/http/router.hpp"
#include "weft/http/server.hpp"
#include "weft/sync/event.hpp"
#include "weft/sync/semaphore.hpp"

namespace weft::http {

struct server::state {
    explicit state(server_options o);

    /// The handler chain for a matched route: the middleware, outermost first, then `h`.
    auto call(request& req, const handler& h) -> task<response>;
    auto call_from(std::size_t i, request& req, const handler& h) -> task<response>;

    /// A connection starts (false: the server is draining; close it) / ends.
    auto enter(detail::connection* c) -> bool;
    void leave(detail::connection* c);

    server_options opts;
    router routes;
    std::vector<middleware> layers;
    semaphore slots;  // one per connection that may be open

    std::atomic<std::uint64_t> accepted{0};
    std::atomic<std::uint64_t> requests{0};
    std::atomic<std::uint64_t> rejected{0};
    std::atomic<std::uint64_t> timed_out{0};
    std::atomic<std::uint64_t> writes{0};
    std::atomic<bool> draining{false};

    std::mutex mu;  // guards what follows
    std::uint64_t open = 0;
    detail::connection* conns = nullptr;  // registered connections (intrusive list)
    std::vector<stop_state*> acceptors;
    event drained;  // set once draining and no connection is open
};

}  // namespace weft::http
