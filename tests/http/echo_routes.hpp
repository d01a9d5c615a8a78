#pragma once

// The routes the split tests and the server fuzz target serve: an echo that reads the head
// after the whole body (so a head whose bytes moved while the body was received must still be
// right), a handler that never reads its body, and two small GET routes. Every response is a
// function of the request alone, so two runs of one stream must read the same bytes.

#include <string>
#include <utility>

#include "weft/core/task.hpp"
#include "weft/http/request.hpp"
#include "weft/http/response.hpp"
#include "weft/http/server.hpp"

namespace weft::http::test {

/// The method, target and fields, read after the whole body, then "body N:" and the body.
inline auto echo(request& req) -> task<response> {
    auto body = co_await req.body().read_all();
    if (!body) {
        co_return response::text("body error\n", 400);  // not sent: the server rejects
    }
    std::string out;
    out.append(req.method_name()).append(" ").append(req.target()).append("\n");
    for (header_field f : req.head().fields()) {
        out.append(f.name).append(": ").append(f.value).append("\n");
    }
    out.append("body ").append(std::to_string(body->size())).append(":").append(*body);
    co_return response::text(std::move(out));
}

/// "/" (GET, POST, PUT, OPTIONS, CONNECT) and POST "/echo": echo; GET "/hello": Hello, World!;
/// GET "/n/{n}": n; POST "/ignore": answers without reading the body (the server skips it, or
/// closes when the client waits for 100 Continue).
inline void echo_routes(server& srv) {
    for (const char* m : {"GET", "POST", "PUT", "OPTIONS", "CONNECT"}) {
        srv.route(m, "/", echo);
    }
    srv.route(method::post, "/echo", echo);
    srv.route(method::get, "/hello",
              [](request&) -> task<response> { co_return response::text("Hello, World!"); });
    srv.route(method::get, "/n/{n}", [](request& req) -> task<response> {
        co_return response::text(std::string(req.param("n")));
    });
    srv.route(method::post, "/ignore",
              [](request&) -> task<response> { co_return response::text("ignored"); });
}

}  // namespace weft::http::test
