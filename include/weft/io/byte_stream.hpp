#pragma once

#include <cstddef>
#include <memory>
#include <span>

#include "weft/core/result.hpp"
#include "weft/core/task.hpp"
#include "weft/io/bytes.hpp"
#include "weft/io/socket_address.hpp"

namespace weft {

/// A connected byte stream that is not a kernel socket: the seam through which weft::http
/// serves and connects over something other than TCP (weft::testing's simulated network).
/// Its operations follow tcp_stream's contracts: results are values, the peer's close is
/// `io_errc::eof`, a reset is `std::errc::connection_reset`, a stopped task ends its operation
/// with `operation_canceled`; one reader and one writer at a time.
///
/// A virtual interface on purpose: a tcp_stream never goes through it (weft::http keeps its
/// direct path for sockets), so only streams that choose it pay the indirect call.
///
///     std::unique_ptr<weft::byte_stream> s = ...;        // e.g. sim_network::connect
///     co_await s->write_all(std::as_bytes(std::span{msg}));
///     auto b = co_await s->receive();                    // result<bytes>
class byte_stream {
public:
    byte_stream() = default;
    byte_stream(const byte_stream&) = delete;
    auto operator=(const byte_stream&) -> byte_stream& = delete;
    virtual ~byte_stream() = default;

    /// What has arrived (at least 1 byte), as shared bytes.
    [[nodiscard]] virtual auto receive() -> task<result<bytes>> = 0;
    /// Reads what has arrived (at least 1 byte), up to buf.size().
    [[nodiscard]] virtual auto read_some(std::span<std::byte> buf) -> task<result<std::size_t>> = 0;
    /// Writes all of several buffers, in order.
    [[nodiscard]] virtual auto write_all(std::span<const std::span<const std::byte>> bufs)
        -> task<result<void>> = 0;
    [[nodiscard]] auto write_all(std::span<const std::byte> buf) -> task<result<void>> {
        const std::span<const std::byte> one[1] = {buf};
        co_return co_await write_all(std::span<const std::span<const std::byte>>{one});
    }
    /// Waits until the stream may take more bytes (or has failed).
    [[nodiscard]] virtual auto wait_writable() -> task<result<void>> = 0;
    /// Half-close: no more writes; the peer reads eof once it has read the rest.
    [[nodiscard]] virtual auto shutdown_write() noexcept -> result<void> = 0;
    [[nodiscard]] virtual auto peer_address() const -> result<socket_address> = 0;
};

}  // namespace weft
