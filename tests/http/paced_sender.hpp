#pragma once

// Sends a byte stream to weft's HTTP server in pieces that each arrive as receives of their
// own: a piece is sent only once the server's connection has taken every byte before it
// (detail::receive_counts_for_test, which the caller sets), so the kernel never joins two
// pieces into one receive. It may still cut a piece (a receive holds at most 4 KiB). Meanwhile
// everything the server answers is read until it closes. Two runs over the same stream, cut
// differently, must read the same bytes: that is how the tests and the fuzz target check the
// server's own receive-buffer code (src/http/connection.cpp), not a copy of it.
//
// Shared by tests/http/test_connection_splits.cpp and tests/fuzz/fuzz_server_splits.cpp.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "connection.hpp"
#include "weft/core/scope.hpp"
#include "weft/core/task.hpp"
#include "weft/io/socket_address.hpp"
#include "weft/io/tcp_stream.hpp"
#include "weft/sched/yield.hpp"

namespace weft::http::test {

/// What one connection gave back, and how the server took the stream.
struct paced_exchange {
    std::string received;        ///< every byte the server sent, Date values blanked
    bool connected = false;      ///< false: the connection could not be made (nothing else is set)
    std::uint64_t receives = 0;  ///< receives the connection's request buffer took
    std::uint64_t bytes = 0;     ///< their bytes
    std::uint64_t carried = 0;   ///< of them, appended to a gathering buffer (carry)
    std::size_t sent = 0;        ///< bytes of the stream sent before the server closed
};

/// Replaces each Date field's value (IMF-fixdate, 29 characters) with "-": the only bytes of a
/// response that depend on when it was sent.
inline void blank_dates(std::string& s) {
    constexpr std::string_view field = "\r\nDate: ";
    constexpr std::size_t date_len = 29;
    for (std::size_t at = s.find(field); at != std::string::npos; at = s.find(field, at + 1)) {
        const std::size_t value = at + field.size();
        const std::size_t end = s.find("\r\n", value);
        if (end == value + date_len) {
            s.replace(value, date_len, "-");
        }
    }
}

/// Cut offsets (ascending, distinct, each in 1..size-1): `count` of them drawn from `seed`.
[[nodiscard]] inline auto random_cuts(std::size_t size, std::size_t count, std::uint64_t seed)
    -> std::vector<std::size_t> {
    std::vector<std::size_t> cuts;
    if (size < 2) {
        return cuts;
    }
    std::mt19937_64 rng{seed};
    for (std::size_t i = 0; i < count; ++i) {
        cuts.push_back(1 + static_cast<std::size_t>(rng() % (size - 1)));
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    return cuts;
}

/// Every offset: the stream one byte per receive.
[[nodiscard]] inline auto every_byte(std::size_t size) -> std::vector<std::size_t> {
    std::vector<std::size_t> cuts;
    for (std::size_t i = 1; i < size; ++i) {
        cuts.push_back(i);
    }
    return cuts;
}

namespace detail_paced {

inline auto read_to_close(tcp_stream& s, std::string& out, std::atomic<bool>& ended) -> task<void> {
    std::vector<std::byte> buf(64 * 1024);
    for (;;) {
        auto n = co_await s.read_some(buf);
        if (!n) {
            break;  // eof, or a reset after the server closed with bytes unread
        }
        out.append(reinterpret_cast<const char*>(buf.data()), *n);
    }
    ended.store(true, std::memory_order_release);  // pairs with the sender's acquire
}

}  // namespace detail_paced

/// Connects to `addr` and sends `stream` cut at `cuts` (ascending, each in 1..size-1): each
/// piece once the server's connections have taken every earlier byte, or not at all once the
/// server has closed. Half-closes after the last piece and reads until the server closes.
/// Needs detail::receive_counts_for_test set, and no other connection to the server receiving
/// meanwhile (the counts are the process's, not this connection's).
[[nodiscard]] inline auto exchange(socket_address addr,
                                   std::string stream,
                                   std::vector<std::size_t> cuts) -> task<paced_exchange> {
    using detail::receive_counts;
    receive_counts& counts = *detail::receive_counts_for_test.load(std::memory_order_relaxed);
    const std::uint64_t receives0 = counts.receives.load(std::memory_order_relaxed);
    const std::uint64_t bytes0 = counts.bytes.load(std::memory_order_relaxed);
    const std::uint64_t carried0 = counts.carried.load(std::memory_order_relaxed);

    paced_exchange out{};
    auto connected = co_await tcp_stream::connect(addr);
    if (!connected) {
        co_return out;
    }
    out.connected = true;
    tcp_stream s = std::move(*connected);
    std::atomic<bool> ended{false};
    co_await with_scope([&](scope& sc) -> task<void> {
        sc.spawn(detail_paced::read_to_close(s, out.received, ended));
        std::size_t from = 0;
        for (std::size_t i = 0; i <= cuts.size(); ++i) {
            const std::size_t to = i < cuts.size() ? cuts[i] : stream.size();
            const std::string_view piece = std::string_view{stream}.substr(from, to - from);
            auto w = co_await s.write_all(std::as_bytes(std::span{piece.data(), piece.size()}));
            if (!w) {
                break;  // the server has closed
            }
            from = to;
            out.sent = from;
            for (;;) {
                const std::uint64_t taken = counts.bytes.load(std::memory_order_relaxed) - bytes0;
                if (taken >= from || ended.load(std::memory_order_acquire)) {
                    break;
                }
                co_await yield();
            }
            if (ended.load(std::memory_order_acquire)) {
                break;
            }
        }
        (void)s.shutdown_write();
    });
    out.receives = counts.receives.load(std::memory_order_relaxed) - receives0;
    out.bytes = counts.bytes.load(std::memory_order_relaxed) - bytes0;
    out.carried = counts.carried.load(std::memory_order_relaxed) - carried0;
    blank_dates(out.received);
    co_return out;
}

}  // namespace weft::http::test
