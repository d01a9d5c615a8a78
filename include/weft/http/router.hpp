#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "weft/core/task.hpp"
#include "weft/http/request.hpp"
#include "weft/http/response.hpp"

namespace weft::http {

/// A request handler: runs in the connection's task, may await anything, returns the response.
using handler = std::function<task<response>(request&)>;

/// Per-route settings.
struct route_options {
    /// This route's body limit, instead of server_options::limits.body, larger or smaller (a
    /// Content-Length over it is 413 before the body is read; a chunked body is 413 once its
    /// chunk sizes cross it). Heads are parsed under the largest limit of any route.
    std::optional<std::uint64_t> body_limit;
};

/// Maps method and path to a handler. Patterns are made of `/`-separated segments: a static
/// segment matches itself; `{name}` matches any one non-empty segment; a final `{*name}`
/// matches the rest of the path (possibly empty). Static segments win over parameters, which
/// win over a catch-all, whatever the order routes were added in. Built once, before serving:
/// a tree of segments, matched without allocating.
///
///     r.add("GET", "/users/{id}/posts/{post}", h);
///     r.add("GET", "/static/{*path}", files);
class router {
public:
    router();
    router(router&&) noexcept;
    auto operator=(router&&) noexcept -> router&;
    ~router();

    /// Adds a route. Throws std::invalid_argument for a malformed pattern (not starting with
    /// `/`, an unclosed or empty `{}`, a catch-all before the end, two parameters of different
    /// names at one place) or for a method and pattern already routed.
    void add(std::string_view method, std::string_view pattern, handler h, route_options o = {});

    struct match {
        int status = 404;  ///< 200: found; 404: no such path; 405: the path, not this method
        const handler* h = nullptr;
        const route_options* options = nullptr;
        std::string allow;  ///< for 405: the methods the path has, comma-separated
        /// The route's number: 0 for the first add()ed, and so on; npos when none matched.
        std::size_t route = static_cast<std::size_t>(-1);
    };
    /// Finds the route for `method` and `path`, filling `req`'s path parameters. A HEAD request
    /// takes the GET route when there is no HEAD one.
    [[nodiscard]] auto find(std::string_view method, std::string_view path, request& req) const
        -> match;

private:
    struct node;
    std::unique_ptr<node> root_;
    std::size_t added_ = 0;  // routes added so far
    // The nodes of patterns made of static segments only, by their whole path: a request for
    // one of them is found by comparing its path with these (the tree walk tries the static
    // child first at every level, so it would find the same route), without a walk.
    std::vector<std::pair<std::string, const node*>> exact_;
};

}  // namespace weft::http
