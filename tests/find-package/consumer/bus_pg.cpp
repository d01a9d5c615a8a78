// A user's program on weft::bus_pg, built against the installed tree. Given no server, it asks
// libpq (driven by weft's reactor) to connect to a port where nothing listens and expects
// `connection_failed`; given a conninfo string, it expects `SELECT 1` to answer.
#include <cstdio>
#include <string>
#include <weft/bus/pg_connection.hpp>
#include <weft/io/reactor.hpp>
#include <weft/sched/runtime.hpp>

auto main(int argc, char** argv) -> int {
    const std::string conninfo =
        argc > 1 ? argv[1] : "host=127.0.0.1 port=1 connect_timeout=2 dbname=none";
    weft::runtime rt{weft::io_runtime_options(2)};
    const int rc = rt.block_on([&]() -> weft::task<int> {
        auto c = co_await weft::bus::pg_connection::connect(conninfo);
        if (!c) {
            std::printf("bus_pg: %s\n", c.error().message().c_str());
            co_return argc == 1 && c.error() == weft::bus::pg_errc::connection_failed ? 0 : 1;
        }
        auto rows = co_await (*c)->query("SELECT 1");
        std::printf("bus_pg: SELECT 1 %s\n", rows ? "answered" : "failed");
        co_return argc > 1 && rows ? 0 : 1;
    }());
    return rc;
}
