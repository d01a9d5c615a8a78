#pragma once

#include <coroutine>
#include <exception>
#include <iterator>
#include <memory>
#include <type_traits>
#include <utility>

#include "weft/core/frame_allocator.hpp"

namespace weft {

/// A synchronous, lazy sequence: `co_yield` values, iterate with range-for. Single pass,
/// move-only; an exception thrown in the body is rethrown from the iterator increment.
///
///     weft::generator<int> iota(int n) { for (int i = 0; i < n; ++i) co_yield i; }
///     for (int i : iota(3)) { ... }
template <typename T>
class [[nodiscard]] generator {
public:
    using value_type = std::remove_cvref_t<T>;
    using reference = std::conditional_t<std::is_reference_v<T>, T, const value_type&>;

    class promise_type {
    public:
        static auto operator new(std::size_t n) -> void* {
            return detail::allocate_frame(n, nullptr);
        }
        static void operator delete(void* p, std::size_t n) noexcept {
            detail::deallocate_frame(p, n);
        }
        auto get_return_object() noexcept -> generator {
            return generator{std::coroutine_handle<promise_type>::from_promise(*this)};
        }
        auto initial_suspend() noexcept -> std::suspend_always { return {}; }
        auto final_suspend() noexcept -> std::suspend_always { return {}; }
        auto yield_value(std::remove_reference_t<reference>& v) noexcept -> std::suspend_always {
            current_ = std::addressof(v);
            return {};
        }
        auto yield_value(std::remove_reference_t<reference>&& v) noexcept -> std::suspend_always {
            current_ = std::addressof(v);
            return {};
        }
        void return_void() noexcept {}
        void unhandled_exception() { error_ = std::current_exception(); }
        template <typename U>
        auto await_transform(U&&) -> std::suspend_never = delete;  // no co_await in generators

        std::add_pointer_t<reference> current_ = nullptr;
        std::exception_ptr error_;
    };

    class iterator {
    public:
        using iterator_category = std::input_iterator_tag;
        using difference_type = std::ptrdiff_t;
        using value_type = generator::value_type;

        iterator() noexcept = default;
        explicit iterator(std::coroutine_handle<promise_type> h) noexcept : h_(h) {}
        auto operator*() const noexcept -> reference {
            return static_cast<reference>(*h_.promise().current_);
        }
        auto operator++() -> iterator& {
            h_.resume();
            rethrow_if_failed();
            return *this;
        }
        void operator++(int) { ++*this; }
        friend auto operator==(const iterator& it, std::default_sentinel_t) noexcept -> bool {
            return !it.h_ || it.h_.done();
        }
        void rethrow_if_failed() const {
            if (h_.done() && h_.promise().error_) {
                std::rethrow_exception(h_.promise().error_);
            }
        }

    private:
        std::coroutine_handle<promise_type> h_;
    };

    generator(generator&& o) noexcept : h_(std::exchange(o.h_, {})) {}
    auto operator=(generator&& o) noexcept -> generator& {
        if (this != &o) {
            if (h_) {
                h_.destroy();
            }
            h_ = std::exchange(o.h_, {});
        }
        return *this;
    }
    ~generator() {
        if (h_) {
            h_.destroy();
        }
    }

    auto begin() -> iterator {
        h_.resume();
        iterator it{h_};
        it.rethrow_if_failed();
        return it;
    }
    auto end() noexcept -> std::default_sentinel_t { return {}; }

private:
    explicit generator(std::coroutine_handle<promise_type> h) noexcept : h_(h) {}
    std::coroutine_handle<promise_type> h_;
};

}  // namespace weft
