#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

namespace weft {

namespace detail {
/// The shared owner of a bytes' memory. `release` runs when the last reference goes (any
/// thread): it frees the block or gives a pooled buffer back to its pool.
struct bytes_block {
    std::atomic<std::uint32_t> refs{1};
    void (*release)(bytes_block*) noexcept = nullptr;
};
/// A heap block with room for `capacity` bytes (its reference count is 1); `data` points at
/// the room.
[[nodiscard]] auto make_heap_block(std::size_t capacity, std::byte*& data) -> bytes_block*;
}  // namespace detail

/// An immutable, reference-counted slice of bytes: copying shares the memory (no copy of the
/// data), so received data can be handed from task to task and thread to thread without
/// copying. Memory received with tcp_stream::receive may belong to a worker's buffer pool: it
/// goes back there when the last bytes referring to it is destroyed.
///
///     weft::bytes b = (co_await s.receive()).value();
///     auto head = b.slice(0, 4);   // shares b's memory
class bytes {
public:
    bytes() noexcept = default;
    /// Adopts one reference of `block`, viewing [data, data + size).
    bytes(detail::bytes_block* block, const std::byte* data, std::size_t size) noexcept
        : block_(block), data_(data), size_(size) {}
    bytes(const bytes& o) noexcept : block_(o.block_), data_(o.data_), size_(o.size_) {
        if (block_ != nullptr) {
            // relaxed: taking another reference needs no ordering (the one we copy from holds).
            block_->refs.fetch_add(1, std::memory_order_relaxed);
        }
    }
    bytes(bytes&& o) noexcept
        : block_(std::exchange(o.block_, nullptr)),
          data_(std::exchange(o.data_, nullptr)),
          size_(std::exchange(o.size_, 0)) {}
    auto operator=(bytes o) noexcept -> bytes& {
        swap(o);
        return *this;
    }
    ~bytes() { reset(); }

    /// A heap copy of `data`.
    [[nodiscard]] static auto copy_of(std::span<const std::byte> data) -> bytes;

    [[nodiscard]] auto data() const noexcept -> const std::byte* { return data_; }
    [[nodiscard]] auto size() const noexcept -> std::size_t { return size_; }
    [[nodiscard]] auto empty() const noexcept -> bool { return size_ == 0; }
    [[nodiscard]] auto span() const noexcept -> std::span<const std::byte> {
        return {data_, size_};
    }
    /// [offset, offset + count) of this view (clamped), sharing the memory.
    [[nodiscard]] auto slice(std::size_t offset, std::size_t count) const -> bytes;

    void reset() noexcept {
        if (block_ != nullptr &&
            // acq_rel: the last owner sees every other owner's reads finished before it
            // releases the memory.
            block_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            block_->release(block_);
        }
        block_ = nullptr;
        data_ = nullptr;
        size_ = 0;
    }
    void swap(bytes& o) noexcept {
        std::swap(block_, o.block_);
        std::swap(data_, o.data_);
        std::swap(size_, o.size_);
    }

private:
    detail::bytes_block* block_ = nullptr;
    const std::byte* data_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace weft
