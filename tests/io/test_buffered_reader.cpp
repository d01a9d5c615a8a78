// buffered_reader over real TCP connections on both backends: delimiters split across reads at
// every position, line endings, the limit, eof, and the byte-level reads mixed with records.

#include <gtest/gtest.h>

#include <array>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend_test.hpp"
#include "weft/core/scope.hpp"
#include "weft/io/buffered_reader.hpp"
#include "weft/io/error.hpp"
#include "weft/io/tcp_listener.hpp"
#include "weft/io/tcp_stream.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/yield.hpp"

namespace {

class buffered_reader : public weft::test::backend_test {};

auto as_bytes(std::string_view s) -> std::span<const std::byte> {
    return std::as_bytes(std::span{s});
}

auto to_string(std::span<const std::byte> b) -> std::string {
    return {reinterpret_cast<const char*>(b.data()), b.size()};
}

// A connected pair: {client, server}.
auto connected_pair() -> weft::task<std::pair<weft::tcp_stream, weft::tcp_stream>> {
    auto l = weft::tcp_listener::bind(weft::socket_address::parse("127.0.0.1", 0).value()).value();
    auto client = (co_await weft::tcp_stream::connect(l.local_address().value())).value();
    auto server = (co_await l.accept()).value();
    co_return std::pair{std::move(client), std::move(server)};
}

auto send(weft::tcp_stream& s, std::string_view v) -> weft::task<void> {
    (co_await s.write_all(as_bytes(v))).value();
}

// Every position at which a record (two header lines and the blank line) can be cut in two:
// the first part is in the reader's buffer, and the reader waiting for more, before the second
// is sent. One worker: the writer sees the reader's state between its steps.
TEST_P(buffered_reader, a_delimiter_split_at_every_position_is_found) {
    weft::runtime rt{options(1)};
    const std::string msg = "Host: a\r\nX: bb\r\n\r\n";
    std::vector<std::string> records;
    rt.block_on([&]() -> weft::task<void> {
        auto [client, server] = co_await connected_pair();
        weft::buffered_reader in(server, 64);  // small: the buffer wraps and compacts
        std::size_t consumed = 0;
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {
                for (std::size_t k = 1; k < msg.size(); ++k) {
                    auto r = co_await in.read_until("\r\n\r\n", 1024);
                    records.emplace_back(r ? std::string(*r) : r.error().message());
                    consumed += msg.size();
                }
            });
            for (std::size_t k = 1; k < msg.size(); ++k) {
                const std::size_t round_start = (k - 1) * msg.size();
                co_await send(client, std::string_view(msg).substr(0, k));
                while (consumed + in.buffered().size() < round_start + k) {
                    co_await weft::yield();  // until the reader holds the first part
                }
                co_await send(client, std::string_view(msg).substr(k));
                while (consumed < round_start + msg.size()) {
                    co_await weft::yield();  // until the reader returned this record
                }
            }
        });
    }());
    ASSERT_EQ(records.size(), msg.size() - 1);
    for (const auto& r : records) {
        EXPECT_EQ(r, msg);
    }
}

TEST_P(buffered_reader, lines_end_with_crlf_or_lf_and_eof_keeps_the_partial_line) {
    weft::runtime rt{options(1)};
    std::vector<std::string> lines;
    std::error_code end;
    std::string rest;
    rt.block_on([&]() -> weft::task<void> {
        auto [client, server] = co_await connected_pair();
        weft::buffered_reader in(server);
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {
                for (;;) {
                    auto line = co_await in.read_line(100);
                    if (!line) {
                        end = line.error();
                        rest = std::string(in.buffered());
                        co_return;
                    }
                    lines.emplace_back(*line);
                }
            });
            co_await send(client, "one\r\ntwo\nthree\r");
            while (in.buffered() != "three\r") {
                co_await weft::yield();  // CR read, LF not yet
            }
            co_await send(client, "\n\r\n\nfour");
            (void)client.shutdown_write();
        });
    }());
    EXPECT_EQ(lines, (std::vector<std::string>{"one", "two", "three", "", ""}));
    EXPECT_EQ(end, weft::io_errc::eof);
    EXPECT_EQ(rest, "four");
}

TEST_P(buffered_reader, the_limit_counts_the_delimiter_and_is_an_error_value) {
    weft::runtime rt{options(2)};
    rt.block_on([&]() -> weft::task<void> {
        auto [client, server] = co_await connected_pair();
        weft::buffered_reader in(server, 16);

        co_await send(client, "0123456\r\n");  // 9 bytes with the delimiter
        auto exact = co_await in.read_until("\r\n", 9);
        EXPECT_TRUE(exact);
        EXPECT_EQ(exact ? *exact : "", "0123456\r\n");

        co_await send(client, "0123456\r\n");
        auto over = co_await in.read_until("\r\n", 8);
        EXPECT_EQ(over.error(), weft::io_errc::too_long);
        EXPECT_EQ(over.error(), std::errc::message_size);
        EXPECT_EQ(in.buffered().substr(0, 8), "0123456\r");  // nothing consumed
        while (in.buffered().size() < 9) {
            (co_await in.fill()).value();
        }
        EXPECT_EQ(in.buffered(), "0123456\r\n");
        in.consume(9);

        // A delimiter that starts inside the limit but ends past it does not count.
        co_await send(client, "abcd\r\n");
        auto straddles = co_await in.read_until("\r\n", 5);
        EXPECT_EQ(straddles.error(), weft::io_errc::too_long);
        auto line = co_await in.read_line(6);
        EXPECT_EQ(line ? *line : "", "abcd");

        // More than the limit without a delimiter: the error comes without waiting for more
        // (the writer sends nothing else, and does not close).
        const std::string no_newline(100, 'x');
        co_await send(client, no_newline);
        auto long_line = co_await in.read_line(50);
        EXPECT_EQ(long_line.error(), weft::io_errc::too_long);
        EXPECT_GE(in.buffered().size(), 50U);

        auto empty_delim = co_await in.read_until("", 10);
        EXPECT_EQ(empty_delim.error(), std::errc::invalid_argument);
    }());
}

TEST_P(buffered_reader, byte_reads_take_the_buffered_bytes_first_and_keep_the_order) {
    weft::runtime rt{options(2)};
    rt.block_on([&]() -> weft::task<void> {
        auto [client, server] = co_await connected_pair();
        weft::buffered_reader in(server);
        co_await send(client, "HEAD\r\n0123456789");
        auto head = co_await in.read_line(64);
        EXPECT_EQ(head ? *head : "", "HEAD");

        std::array<std::byte, 4> four{};
        (co_await in.read_exact(four)).value();
        EXPECT_EQ(to_string(four), "0123");

        std::string some;
        while (some.size() < 6) {
            std::array<std::byte, 100> buf{};
            auto n = (co_await in.read_some(buf)).value();
            some += to_string(std::span(buf).first(n));
        }
        EXPECT_EQ(some, "456789");
        EXPECT_TRUE(in.buffered().empty());

        // Part buffered, part still in the socket.
        co_await send(client, "abc\nDEFGHIJ");
        auto abc = co_await in.read_line(64);
        EXPECT_EQ(abc ? *abc : "", "abc");
        auto later = weft::spawn([&]() -> weft::task<void> {
            co_await send(client, "KLMNOP");
            (void)client.shutdown_write();
        });
        std::array<std::byte, 13> thirteen{};
        (co_await in.read_exact(thirteen)).value();
        EXPECT_EQ(to_string(thirteen), "DEFGHIJKLMNOP");
        co_await std::move(later);

        std::array<std::byte, 5> past_end{};
        EXPECT_EQ((co_await in.read_exact(past_end)).error(), weft::io_errc::eof);
        std::array<std::byte, 5> again{};
        EXPECT_EQ((co_await in.read_some(again)).error(), weft::io_errc::eof);
    }());
}

// Many lines of random lengths written in large chunks by a concurrent writer, and one line far
// longer than the buffer: every line arrives whole and in order.
TEST_P(buffered_reader, many_lines_and_one_longer_than_the_buffer_arrive_intact) {
    constexpr int count = 20000;
    weft::runtime rt{options(2)};
    std::mt19937 rng(11);
    std::vector<std::string> sent;
    std::string wire;
    for (int i = 0; i < count; ++i) {
        std::string line(rng() % 300, '\0');
        for (auto& c : line) {
            c = static_cast<char>('a' + rng() % 26);
        }
        if (i == count / 2) {
            line.assign(100'000, 'L');
        }
        wire += line;
        wire += (i % 2 == 0) ? "\r\n" : "\n";
        sent.push_back(std::move(line));
    }
    std::vector<std::string> got;
    std::error_code end;
    rt.block_on([&]() -> weft::task<void> {
        auto [client, server] = co_await connected_pair();
        auto writer = weft::spawn([&]() -> weft::task<void> {
            co_await send(client, wire);
            (void)client.shutdown_write();
        });
        weft::buffered_reader in(server, 512);
        for (;;) {
            auto line = co_await in.read_line(1 << 20);
            if (!line) {
                end = line.error();
                break;
            }
            got.emplace_back(*line);
        }
        co_await std::move(writer);
    }());
    EXPECT_EQ(end, weft::io_errc::eof);
    ASSERT_EQ(got.size(), sent.size());
    EXPECT_TRUE(got == sent);
}

}  // namespace

WEFT_TEST_ON_BOTH_BACKENDS(buffered_reader);
