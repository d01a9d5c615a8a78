#pragma once

// A WebSocket route (server::websocket): the handler the router holds, which checks the
// upgrade request and answers 101 (or refuses it), and the session the connection hands its
// socket to once that 101 is the answer. Internal to weft::http.

#include <memory>
#include <string_view>

#include "transport.hpp"
#include "weft/core/task.hpp"
#include "weft/http/request.hpp"
#include "weft/http/response.hpp"
#include "weft/http/server.hpp"
#include "weft/http/websocket.hpp"

namespace weft::http::detail {

struct websocket_route_data {
    websocket_handler handler;
    websocket_options opts;
};

/// The router's handler of a WebSocket route. The connection recognises it by its type
/// (std::function::target) when a response is 101, and then calls serve(): a 101 from any
/// other handler is refused as a 1xx is, so no socket is ever handed to nothing.
struct websocket_route {
    std::shared_ptr<const websocket_route_data> d;

    /// The handshake (RFC 6455 4.2): 101 with Sec-WebSocket-Accept, or 400 (not a valid
    /// upgrade), 403 (check_origin refused), 426 (another version: 13 is named).
    auto operator()(request& req) const -> task<response>;

    /// Writes the 101 `r`, then runs the handler over `t` until the close handshake is done.
    /// `early`: bytes the client sent after its request (its first frames). Never throws.
    auto serve(server::state& st, response& r, transport& t, std::string_view early) const
        -> task<void>;
};

/// A session's side of the server's drain: shutdown() calls drain() on each one registered
/// (server::state::sessions), from its own thread.
class websocket_session {
public:
    virtual void drain() noexcept = 0;

protected:
    ~websocket_session() = default;
};

}  // namespace weft::http::detail
