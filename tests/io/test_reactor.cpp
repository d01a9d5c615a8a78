// Which driver a runtime's workers park in: a program that links weft::io gets a reactor per
// worker from the default runtime_options, and a futex driver given as make_driver opts out.

#include <gtest/gtest.h>

#include <array>
#include <stdexcept>
#include <string>
#include <string_view>

#include "test_util.hpp"
#include "weft/core/scope.hpp"
#include "weft/io/reactor.hpp"
#include "weft/io/tcp_listener.hpp"
#include "weft/io/tcp_stream.hpp"
#include "weft/sched/driver.hpp"
#include "weft/sched/runtime.hpp"

namespace {

auto as_bytes(std::string_view s) -> std::span<const std::byte> {
    return std::as_bytes(std::span{s});
}

// Accepts one connection and answers its 5 bytes with "re:" and them; the client's reply.
auto serve_one_exchange() -> weft::task<std::string> {
    auto listener =
        weft::tcp_listener::bind(weft::socket_address::parse("127.0.0.1", 0).value()).value();
    auto addr = listener.local_address().value();
    std::string reply;
    co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
        s.spawn([&]() -> weft::task<void> {
            auto conn = (co_await listener.accept()).value();
            std::array<std::byte, 5> in{};
            (co_await conn.read_exact(in)).value();
            const std::string answer =
                "re:" + std::string(reinterpret_cast<const char*>(in.data()), in.size());
            (co_await conn.write_all(as_bytes(answer))).value();
        });
        auto client = (co_await weft::tcp_stream::connect(addr)).value();
        (co_await client.write_all(as_bytes("hello"))).value();
        std::array<std::byte, 8> out{};
        (co_await client.read_exact(out)).value();
        reply.assign(reinterpret_cast<const char*>(out.data()), out.size());
    });
    co_return reply;
}

TEST(reactor, default_runtime_has_reactors_and_serves_tcp) {
    weft::runtime rt{{.workers = 2}};
    const auto backend = rt.block_on(
        []() -> weft::task<weft::io_backend> { co_return weft::current_io_backend(); }());
    EXPECT_EQ(backend, weft::resolve_io_backend());
    EXPECT_EQ(rt.block_on(serve_one_exchange()), "re:hello");
}

TEST(reactor, runtime_with_default_options_has_reactors) {
    weft::runtime rt;
    EXPECT_EQ(rt.block_on(serve_one_exchange()), "re:hello");
}

TEST(reactor, futex_driver_opts_out_of_reactors) {
    weft::runtime rt{
        {.workers = 2, .make_driver = [](unsigned) { return weft::make_futex_driver(); }}};
    EXPECT_THROW(rt.block_on([]() -> weft::task<void> {
        (void)weft::current_io_backend();
        co_return;
    }()),
                 std::logic_error);
}

TEST(reactor, io_runtime_options_still_names_the_backend) {
    weft::runtime rt{weft::io_runtime_options(2, weft::io_backend::epoll)};
    const auto backend = rt.block_on(
        []() -> weft::task<weft::io_backend> { co_return weft::current_io_backend(); }());
    EXPECT_EQ(backend, weft::io_backend::epoll);
    EXPECT_EQ(rt.block_on(serve_one_exchange()), "re:hello");
}

}  // namespace
