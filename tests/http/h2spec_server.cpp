// The server h2spec runs against (tests/http/h2spec.sh): GET and POST on every path, h2c, or h2
// over TLS when given a certificate and key. Listens on 127.0.0.1, port 0, prints the port on
// a line of its own once listening, serves until SIGTERM or SIGINT (then drains).
//
//     h2spec_server [CERT.pem KEY.pem]

#include <csignal>
#include <cstdio>
#include <string>

#include "weft/http.hpp"
#include "weft/weft.hpp"

namespace http = weft::http;

auto echo(http::request& req) -> weft::task<http::response> {
    auto body = co_await req.body().read_all();
    if (!body) {
        co_return http::response::text("bad body\n", 400);
    }
    co_return http::response::text(body->empty() ? std::string{"Hello, World!"} : *body);
}

auto main(int argc, char** argv) -> int {
    http::server_options o;
    if (argc == 3) {
        weft::tls_server_options to;
        to.certificate = weft::tls_certificate::from_files(argv[1], argv[2]);
        to.alpn = {"h2", "http/1.1"};
        o.tls = weft::tls_context::server(to);
    }
    o.on_listening = [](const weft::socket_address& a) {
        std::printf("%u\n", static_cast<unsigned>(a.port()));
        std::fflush(stdout);
    };
    http::server srv{o};
    for (auto m : {http::method::get, http::method::post, http::method::head}) {
        srv.route(m, "/", echo);
        srv.route(m, "/{*rest}", echo);
    }
    weft::runtime rt{{.workers = 2}};
    return rt.block_on([&]() -> weft::task<int> {
        int rc = 0;
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {
                auto r = co_await srv.listen(weft::socket_address::parse("127.0.0.1", 0).value());
                rc = r ? 0 : 1;
            });
            (void)co_await weft::wait_for_signal({SIGINT, SIGTERM});
            co_await srv.shutdown();
        });
        co_return rc;
    }());
}
