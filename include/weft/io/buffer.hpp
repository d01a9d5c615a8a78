#pragma once

#include <cstddef>
#include <span>
#include <utility>

#include "weft/io/bytes.hpp"

namespace weft {

/// A growable byte buffer whose storage comes from a per-thread pool (power-of-two blocks from
/// 1 KiB to 1 MiB; larger ones from malloc): building a response or collecting a message costs
/// no allocation in steady state. `freeze()` turns it into a `bytes` that shares the storage
/// (no copy), for handing it to another task; the storage returns to a pool when the last bytes
/// referring to it goes, on whichever thread that is.
///
///     weft::buffer b;
///     b.append(header); b.append(body);
///     co_await stream.write_all(b.span());
///     weft::bytes frozen = std::move(b).freeze();
///
/// Not thread-safe (a buffer belongs to one task at a time); move-only.
class buffer {
public:
    buffer() noexcept = default;
    explicit buffer(std::size_t capacity) { reserve(capacity); }
    buffer(buffer&& o) noexcept
        : block_(std::exchange(o.block_, nullptr)),
          data_(std::exchange(o.data_, nullptr)),
          size_(std::exchange(o.size_, 0)),
          capacity_(std::exchange(o.capacity_, 0)) {}
    auto operator=(buffer&& o) noexcept -> buffer& {
        if (this != &o) {
            release();
            block_ = std::exchange(o.block_, nullptr);
            data_ = std::exchange(o.data_, nullptr);
            size_ = std::exchange(o.size_, 0);
            capacity_ = std::exchange(o.capacity_, 0);
        }
        return *this;
    }
    buffer(const buffer&) = delete;
    auto operator=(const buffer&) -> buffer& = delete;
    ~buffer() { release(); }

    [[nodiscard]] auto data() noexcept -> std::byte* { return data_; }
    [[nodiscard]] auto data() const noexcept -> const std::byte* { return data_; }
    [[nodiscard]] auto size() const noexcept -> std::size_t { return size_; }
    [[nodiscard]] auto capacity() const noexcept -> std::size_t { return capacity_; }
    [[nodiscard]] auto empty() const noexcept -> bool { return size_ == 0; }
    [[nodiscard]] auto span() const noexcept -> std::span<const std::byte> {
        return {data_, size_};
    }

    /// Makes room for at least `n` bytes in total (keeps the content).
    void reserve(std::size_t n);
    void append(std::span<const std::byte> more);
    /// Writable room for `n` more bytes after the content (e.g. to receive into); then
    /// commit() how many were written.
    [[nodiscard]] auto prepare(std::size_t n) -> std::span<std::byte>;
    void commit(std::size_t n) noexcept { size_ += n; }
    void clear() noexcept { size_ = 0; }

    /// The content as bytes, sharing this buffer's storage; the buffer is left empty.
    [[nodiscard]] auto freeze() && -> bytes;

private:
    void release() noexcept;

    detail::bytes_block* block_ = nullptr;
    std::byte* data_ = nullptr;
    std::size_t size_ = 0;
    std::size_t capacity_ = 0;
};

/// Blocks this thread took from / gave to malloc for buffers (tests check the pool works).
struct buffer_pool_stats {
    std::size_t mallocs = 0;
    std::size_t reused = 0;
};
[[nodiscard]] auto this_thread_buffer_stats() noexcept -> buffer_pool_stats;

}  // namespace weft
