#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <span>
#include <stdexcept>
#include <utility>

namespace weft {

/// A zero-filled heap buffer whose address is a multiple of `alignment` (a power of two), for
/// O_DIRECT transfers (see file::alignment()). Move-only; owns its memory. The size is not
/// rounded: an O_DIRECT transfer also needs a length that is a multiple of the offset
/// alignment, which round_up() gives.
///
///     auto buf = weft::aligned_buffer(weft::aligned_buffer::round_up(n, 4096), 4096);
///     auto r = co_await f.read_at(buf.span(), 0);
class aligned_buffer {
public:
    aligned_buffer() noexcept = default;
    /// Throws std::bad_alloc when out of memory, std::invalid_argument for a bad alignment.
    aligned_buffer(std::size_t size, std::size_t alignment) : size_(size) {
        if (alignment == 0 || (alignment & (alignment - 1)) != 0 ||
            alignment % sizeof(void*) != 0) {
            throw std::invalid_argument("weft::aligned_buffer: alignment must be a power of two");
        }
        void* p = nullptr;
        if (::posix_memalign(&p, alignment, size == 0 ? alignment : size) != 0) {
            throw std::bad_alloc();
        }
        data_ = static_cast<std::byte*>(std::memset(p, 0, size));
    }
    aligned_buffer(aligned_buffer&& o) noexcept
        : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
    auto operator=(aligned_buffer&& o) noexcept -> aligned_buffer& {
        if (this != &o) {
            std::free(data_);
            data_ = std::exchange(o.data_, nullptr);
            size_ = std::exchange(o.size_, 0);
        }
        return *this;
    }
    aligned_buffer(const aligned_buffer&) = delete;
    auto operator=(const aligned_buffer&) -> aligned_buffer& = delete;
    ~aligned_buffer() { std::free(data_); }

    [[nodiscard]] auto data() noexcept -> std::byte* { return data_; }
    [[nodiscard]] auto data() const noexcept -> const std::byte* { return data_; }
    [[nodiscard]] auto size() const noexcept -> std::size_t { return size_; }
    [[nodiscard]] auto span() noexcept -> std::span<std::byte> { return {data_, size_}; }
    [[nodiscard]] auto span() const noexcept -> std::span<const std::byte> {
        return {data_, size_};
    }

    /// `n` rounded up to a multiple of `alignment` (a power of two).
    [[nodiscard]] static constexpr auto round_up(std::size_t n, std::size_t alignment) noexcept
        -> std::size_t {
        return (n + alignment - 1) & ~(alignment - 1);
    }

private:
    std::byte* data_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace weft
