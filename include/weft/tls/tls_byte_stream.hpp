#pragma once

#include <cstddef>
#include <span>

#include "weft/core/result.hpp"
#include "weft/core/task.hpp"
#include "weft/io/byte_stream.hpp"
#include "weft/io/bytes.hpp"
#include "weft/tls/tls_stream.hpp"

namespace weft {

/// A tls_stream seen as a byte_stream: what takes a byte_stream (weft::http::client, the HTTP
/// server's connections over weft::testing's simulated network) runs over TLS through it, the
/// plaintext in and out. Its operations are the tls_stream's, with tls_stream's contracts (one
/// operation at a time: a reader and a writer may not run at once); shutdown_write sends
/// close_notify as tls_stream::shutdown_write does. Owns the tls_stream.
///
///     auto t = (co_await weft::tls_stream::connect(std::move(sim), ctx, "server")).value();
///     weft::http::client c{std::make_unique<weft::tls_byte_stream>(std::move(t))};
class tls_byte_stream final : public byte_stream {
public:
    explicit tls_byte_stream(tls_stream s) noexcept : s_(std::move(s)) {}

    using byte_stream::write_all;

    [[nodiscard]] auto receive() -> task<result<bytes>> override { return s_.receive(); }
    [[nodiscard]] auto read_some(std::span<std::byte> buf) -> task<result<std::size_t>> override {
        return s_.read_some(buf);
    }
    [[nodiscard]] auto write_all(std::span<const std::span<const std::byte>> bufs)
        -> task<result<void>> override {
        return s_.write_all(bufs);
    }
    [[nodiscard]] auto wait_writable() -> task<result<void>> override { return s_.wait_writable(); }
    [[nodiscard]] auto shutdown_write() noexcept -> result<void> override {
        return s_.shutdown_write();
    }
    [[nodiscard]] auto peer_address() const -> result<socket_address> override {
        return s_.peer_address();
    }

    [[nodiscard]] auto tls() noexcept -> tls_stream& { return s_; }

private:
    tls_stream s_;
};

}  // namespace weft
