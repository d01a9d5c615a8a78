// UDP on both reactors.

#include <gtest/gtest.h>

#include <string>

#include "backend_test.hpp"
#include "io_waits.hpp"
#include "weft/core/scope.hpp"
#include "weft/io/reactor.hpp"
#include "weft/io/udp_socket.hpp"
#include "weft/sched/runtime.hpp"

namespace {

class udp : public weft::test::io_wait_test {};

auto loopback() -> weft::socket_address {
    return weft::socket_address::parse("127.0.0.1", 0).value();
}

TEST_P(udp, datagrams_round_trip_with_sender_address) {
    weft::runtime rt{options()};
    auto ok = rt.block_on([]() -> weft::task<bool> {
        auto a = weft::udp_socket::bind(loopback()).value();
        auto b = weft::udp_socket::bind(loopback()).value();
        const auto a_addr = a.local_address().value();
        const auto b_addr = b.local_address().value();
        bool all = true;
        for (int i = 0; i < 50; ++i) {
            const std::string msg = "datagram " + std::to_string(i);
            auto sent = co_await a.send_to(std::as_bytes(std::span{msg}), b_addr);
            all = all && sent && *sent == msg.size();
            std::array<std::byte, 64> buf{};
            auto got = co_await b.recv_from(buf);
            all = all && got && got->size == msg.size() && got->from.port() == a_addr.port() &&
                  std::string(reinterpret_cast<const char*>(buf.data()), got->size) == msg;
        }
        co_return all;
    }());
    EXPECT_TRUE(ok);
}

TEST_P(udp, pending_receive_is_cancelled) {
    weft::runtime rt{options()};
    auto err = rt.block_on([]() -> weft::task<std::error_code> {
        auto s = weft::udp_socket::bind(loopback()).value();
        std::error_code ec;
        co_await weft::with_scope([&](weft::scope& sc) -> weft::task<void> {
            sc.spawn([&]() -> weft::task<void> {
                std::array<std::byte, 16> buf{};
                ec = (co_await s.recv_from(buf)).error();
            });
            co_await weft::test::until([] { return weft::test::io_waits() >= 1; });  // parked
            sc.request_stop();
        });
        co_return ec;
    }());
    EXPECT_EQ(err, std::errc::operation_canceled);
}

WEFT_TEST_ON_BOTH_BACKENDS(udp);

}  // namespace
