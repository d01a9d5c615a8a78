#pragma once

// The bytes a connection has yet to write (response heads and small bodies, in order). Internal
// to weft::http (connection.hpp).

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string_view>

namespace weft::http::detail {

/// A growable byte buffer whose room is handed out uninitialised: a response head is written
/// into prepare()'s room and commit()ed at its real length, with no zero-filling of the room
/// first (std::string::resize writes every byte it adds, a memset per response head).
/// Invariant: size_ <= capacity_; data_ is null exactly when capacity_ == 0.
class output_buffer {
public:
    output_buffer() = default;
    output_buffer(const output_buffer&) = delete;
    auto operator=(const output_buffer&) -> output_buffer& = delete;
    ~output_buffer() = default;

    [[nodiscard]] auto data() const noexcept -> const char* { return data_.get(); }
    [[nodiscard]] auto size() const noexcept -> std::size_t { return size_; }
    [[nodiscard]] auto capacity() const noexcept -> std::size_t { return capacity_; }
    void clear() noexcept { size_ = 0; }
    /// Frees the storage (the buffer is empty after).
    void release() noexcept {
        data_.reset();
        size_ = capacity_ = 0;
    }

    /// At least `n` writable bytes at the end (uninitialised; their contents count once
    /// commit()ed). Moves the buffer when it grows: pointers into it are lost.
    [[nodiscard]] auto prepare(std::size_t n) -> char* {
        if (capacity_ - size_ < n) {
            grow(n);
        }
        return data_.get() + size_;
    }
    /// The first `n` bytes of the last prepare()'s room are now part of the buffer.
    void commit(std::size_t n) noexcept { size_ += n; }
    void append(std::string_view s) {
        char* const p = prepare(s.size());
        if (!s.empty()) {
            std::memcpy(p, s.data(), s.size());
        }
        size_ += s.size();
    }

private:
    void grow(std::size_t n) {
        const std::size_t cap = std::max({capacity_ * 2, size_ + n, std::size_t{512}});
        auto fresh = std::make_unique_for_overwrite<char[]>(cap);  // not zero-filled
        if (size_ != 0) {
            std::memcpy(fresh.get(), data_.get(), size_);
        }
        data_ = std::move(fresh);
        capacity_ = cap;
    }

    std::unique_ptr<char[]> data_;
    std::size_t size_ = 0;
    std::size_t capacity_ = 0;
};

}  // namespace weft::http::detail
