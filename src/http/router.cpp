#include "weft/http/router.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "swar.hpp"

namespace weft::http {

// A tree with one level per path segment. Each node has its static children (a short vector:
// a handful per node in real route sets, where a linear scan beats hashing), at most one
// `{param}` child and at most one `{*rest}` handler set.
struct router::node {
    struct route {
        std::string method;
        handler h;
        route_options options;
        std::size_t index = 0;  // router::match::route
    };
    std::vector<std::pair<std::string, std::unique_ptr<node>>> statics;
    std::unique_ptr<node> param;
    std::string param_name;
    std::vector<route> routes;       // for a path ending at this node
    std::vector<route> rest_routes;  // `{*rest_name}` here
    std::string rest_name;

    static auto pick(const std::vector<route>& rs, std::string_view method) -> const route* {
        for (const auto& r : rs) {
            if (r.method.size() == method.size() &&
                detail::swar::same_bytes(r.method.data(), method.data(), method.size())) {
                return &r;
            }
        }
        if (method == "HEAD") {
            for (const auto& r : rs) {
                if (r.method == "GET") {
                    return &r;
                }
            }
        }
        return nullptr;
    }
};

router::router() : root_(std::make_unique<node>()) {}
router::router(router&&) noexcept = default;
auto router::operator=(router&&) noexcept -> router& = default;
router::~router() = default;

namespace {

[[noreturn]] void bad(std::string_view pattern, const char* why) {
    throw std::invalid_argument("weft::http::router: pattern \"" + std::string(pattern) +
                                "\": " + why);
}

// Splits "/a/b/c" after the leading '/' into its segments; "/" has one empty segment.
template <typename Fn>
void for_each_segment(std::string_view path, Fn&& fn) {
    std::size_t i = 1;
    for (;;) {
        const std::size_t slash = path.find('/', i);
        const bool last = slash == std::string_view::npos;
        fn(path.substr(i, last ? std::string_view::npos : slash - i), last);
        if (last) {
            return;
        }
        i = slash + 1;
    }
}

}  // namespace

void router::add(std::string_view method, std::string_view pattern, handler h, route_options o) {
    if (pattern.empty() || pattern.front() != '/') {
        bad(pattern, "must start with '/'");
    }
    if (method.empty()) {
        throw std::invalid_argument("weft::http::router: empty method");
    }
    node* n = root_.get();
    bool rest = false;
    std::string rest_name;
    for_each_segment(pattern, [&](std::string_view seg, bool last) {
        if (rest) {
            bad(pattern, "{*name} must be the last segment");
        }
        if (!seg.empty() && seg.front() == '{') {
            if (seg.size() < 3 || seg.back() != '}') {
                bad(pattern, "unclosed or empty {}");
            }
            std::string_view name = seg.substr(1, seg.size() - 2);
            if (name.front() == '*') {
                name.remove_prefix(1);
                if (name.empty() || !last) {
                    bad(pattern, "{*name} must be named and last");
                }
                rest = true;
                rest_name = name;
                return;
            }
            if (!n->param) {
                n->param = std::make_unique<node>();
                n->param_name = name;
            } else if (n->param_name != name) {
                bad(pattern, "two parameter names at one place");
            }
            n = n->param.get();
            return;
        }
        if (seg.find_first_of("{}") != std::string_view::npos) {
            bad(pattern, "'{' or '}' inside a segment");
        }
        for (auto& [s, child] : n->statics) {
            if (s == seg) {
                n = child.get();
                return;
            }
        }
        n->statics.emplace_back(std::string(seg), std::make_unique<node>());
        n = n->statics.back().second.get();
    });
    auto& list = rest ? n->rest_routes : n->routes;
    if (rest) {
        if (!n->rest_routes.empty() && n->rest_name != rest_name) {
            bad(pattern, "two catch-all names at one place");
        }
        n->rest_name = rest_name;
    }
    for (const auto& r : list) {
        if (r.method == method) {
            bad(pattern, "this method and pattern are already routed");
        }
    }
    list.push_back(node::route{std::string(method), std::move(h), o, added_++});
    if (!rest && pattern.find('{') == std::string_view::npos &&
        std::none_of(exact_.begin(), exact_.end(), [&](const auto& e) { return e.second == n; })) {
        exact_.emplace_back(std::string(pattern), n);
    }
}

auto router::find(std::string_view method, std::string_view path, request& req) const -> match {
    match out;
    if (path.empty() || path.front() != '/') {
        return out;  // "*" (OPTIONS) and authority-form have no routes
    }
    // Depth-first: statics, then the parameter, then a catch-all; the first full match wins.
    // Parameters are pushed as the walk descends; every branch that fails puts the count back
    // to what it was before the branch (a mark, never a decrement: a parameter over
    // max_params was not pushed), so a match holds exactly its route's parameters.
    std::size_t& np = req.param_count_;
    np = 0;
    for (const auto& [p, n] : exact_) {
        if (p.size() == path.size() && detail::swar::same_bytes(p.data(), path.data(), p.size())) {
            if (const node::route* r = node::pick(n->routes, method); r != nullptr) {
                out.status = 200;
                out.h = &r->h;
                out.options = &r->options;
                out.route = r->index;
                return out;
            }
            break;  // the walk tells 405 from a parameter's or catch-all's route
        }
    }
    const node::route* found = nullptr;
    const std::vector<node::route>* path_routes = nullptr;  // for 405's Allow
    const auto put_param = [&req, &np](std::string_view name, std::string_view value) {
        // Lengths fit in 32 bits: a path is bounded by the request line's limit (< 1 GiB).
        req.params_[np++] = {name.data(), value.data(), static_cast<std::uint32_t>(name.size()),
                             static_cast<std::uint32_t>(value.size())};
    };

    const auto walk = [&](auto&& self, const node* n, std::size_t from) -> bool {
        // `from` is the index of the segment's first byte in `path`.
        const std::size_t slash = path.find('/', from);
        const bool last = slash == std::string_view::npos;
        const std::string_view seg =
            path.substr(from, last ? std::string_view::npos : slash - from);
        const auto at_child = [&](const node* c) -> bool {
            if (last) {
                if (c->routes.empty()) {
                    // "/a/" style: a catch-all of the child matches the empty rest
                    if (!c->rest_routes.empty()) {
                        const std::size_t mark = np;
                        if (np < request::max_params) {
                            put_param(c->rest_name, {});
                        }
                        path_routes = &c->rest_routes;
                        found = node::pick(c->rest_routes, method);
                        if (found != nullptr) {
                            return true;
                        }
                        np = mark;
                    }
                    return false;
                }
                path_routes = &c->routes;
                found = node::pick(c->routes, method);
                return found != nullptr;
            }
            return self(self, c, slash + 1);
        };
        for (const auto& [s, child] : n->statics) {
            if (s == seg) {
                if (at_child(child.get())) {
                    return true;
                }
                break;
            }
        }
        if (n->param && !seg.empty()) {
            const std::size_t mark = np;
            if (np < request::max_params) {
                put_param(n->param_name, seg);
            }
            if (at_child(n->param.get())) {
                return true;
            }
            np = mark;
        }
        if (!n->rest_routes.empty()) {
            const std::size_t mark = np;
            if (np < request::max_params) {
                put_param(n->rest_name, path.substr(from));
            }
            path_routes = &n->rest_routes;
            found = node::pick(n->rest_routes, method);
            if (found != nullptr) {
                return true;
            }
            np = mark;
        }
        return false;
    };
    if (walk(walk, root_.get(), 1)) {
        out.status = 200;
        out.h = &found->h;
        out.options = &found->options;
        out.route = found->index;
        return out;
    }
    np = 0;
    if (path_routes != nullptr && !path_routes->empty()) {
        out.status = 405;
        bool get = false;
        bool head = false;
        for (const auto& r : *path_routes) {
            if (!out.allow.empty()) {
                out.allow += ", ";
            }
            out.allow += r.method;
            get = get || r.method == "GET";
            head = head || r.method == "HEAD";
        }
        if (get && !head) {
            out.allow += ", HEAD";
        }
    }
    return out;
}

auto request::param(std::string_view name) const noexcept -> std::string_view {
    for (std::size_t i = 0; i < param_count_; ++i) {
        const param_slot& p = params_[i];
        if (std::string_view{p.name, p.name_len} == name) {
            return {p.value, p.value_len};
        }
    }
    return {};
}

}  // namespace weft::http
