#pragma once

#include <cstddef>
#include <memory>
#include <utility>

namespace weft::detail {

/// A growable FIFO ring (power-of-two slots). Grows by doubling and never shrinks, so a channel
/// in steady state never allocates. Not thread-safe: guarded by its channel's lock.
/// Invariant: size_ <= cap_, live elements are slots [head_, head_ + size_) mod cap_.
template <typename T>
class ring {
public:
    ring() = default;
    ring(const ring&) = delete;
    auto operator=(const ring&) -> ring& = delete;
    ~ring() {
        while (size_ != 0) {
            (void)pop_front();
        }
        if (slots_ != nullptr) {
            std::allocator<T>{}.deallocate(slots_, cap_);
        }
    }

    [[nodiscard]] auto size() const noexcept -> std::size_t { return size_; }
    [[nodiscard]] auto empty() const noexcept -> bool { return size_ == 0; }
    /// True when push_back will not allocate (a free slot exists).
    [[nodiscard]] auto has_free_slot() const noexcept -> bool { return size_ != cap_; }

    template <typename U>
    void push_back(U&& v) {
        if (size_ == cap_) [[unlikely]] {
            grow();
        }
        push_back_no_grow(std::forward<U>(v));
    }
    /// Precondition: has_free_slot().
    template <typename U>
    void push_back_no_grow(U&& v) {
        std::construct_at(slots_ + ((head_ + size_) & (cap_ - 1)), std::forward<U>(v));
        ++size_;
    }
    /// Moves the front item straight into `out` (one move, where `out.emplace(pop_front())`
    /// costs two). Precondition: !empty().
    template <typename Slot>
    void pop_front_into(Slot& out) {
        T* p = slots_ + head_;
        out.emplace(std::move(*p));
        std::destroy_at(p);
        head_ = (head_ + 1) & (cap_ - 1);
        --size_;
    }
    auto pop_front() noexcept(std::is_nothrow_move_constructible_v<T>) -> T {
        T* p = slots_ + head_;
        T v = std::move(*p);
        std::destroy_at(p);
        head_ = (head_ + 1) & (cap_ - 1);
        --size_;
        return v;
    }

private:
    [[gnu::noinline, gnu::cold]] void grow() {
        const std::size_t cap = cap_ == 0 ? 8 : cap_ * 2;
        T* slots = std::allocator<T>{}.allocate(cap);
        for (std::size_t i = 0; i < size_; ++i) {
            T* p = slots_ + ((head_ + i) & (cap_ - 1));
            std::construct_at(slots + i, std::move(*p));
            std::destroy_at(p);
        }
        if (slots_ != nullptr) {
            std::allocator<T>{}.deallocate(slots_, cap_);
        }
        slots_ = slots;
        cap_ = cap;
        head_ = 0;
    }

    T* slots_ = nullptr;
    std::size_t cap_ = 0;
    std::size_t head_ = 0;
    std::size_t size_ = 0;
};

}  // namespace weft::detail
