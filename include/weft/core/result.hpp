#pragma once

#include <cassert>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

namespace weft {

/// The value of an operation that can fail in an expected way (cancelled, timed out, closed,
/// refused...): either a `T` or a `std::error_code`. Never throws on construction; `value()`
/// throws `std::system_error` when called on an error, so `co_await op().value()` is the
/// "I do not handle this" spelling.
///
///     weft::result<void> r = co_await weft::sleep_for(10ms);
///     if (!r) { co_return; }   // r.error() == std::errc::operation_canceled
template <typename T>
class [[nodiscard]] result {
public:
    result(T value) : v_(std::in_place_index<0>, std::move(value)) {}
    result(std::error_code ec) : v_(std::in_place_index<1>, ec) { assert(ec); }
    result(std::errc e) : result(std::make_error_code(e)) {}

    [[nodiscard]] auto has_value() const noexcept -> bool { return v_.index() == 0; }
    explicit operator bool() const noexcept { return has_value(); }

    [[nodiscard]] auto error() const noexcept -> std::error_code {
        return has_value() ? std::error_code{} : std::get<1>(v_);
    }
    auto value() & -> T& {
        check();
        return std::get<0>(v_);
    }
    auto value() && -> T&& {
        check();
        return std::get<0>(std::move(v_));
    }
    auto value() const& -> const T& {
        check();
        return std::get<0>(v_);
    }
    auto operator*() & -> T& { return value(); }
    auto operator*() && -> T&& { return std::move(*this).value(); }
    auto operator*() const& -> const T& { return value(); }
    auto operator->() -> T* { return &value(); }
    auto operator->() const -> const T* { return &value(); }

private:
    void check() const {
        if (!has_value()) {
            throw std::system_error(std::get<1>(v_));
        }
    }
    std::variant<T, std::error_code> v_;
};

template <>
class [[nodiscard]] result<void> {
public:
    result() = default;
    result(std::error_code ec) : ec_(ec) {}
    result(std::errc e) : ec_(std::make_error_code(e)) {}

    [[nodiscard]] auto has_value() const noexcept -> bool { return !ec_; }
    explicit operator bool() const noexcept { return has_value(); }
    [[nodiscard]] auto error() const noexcept -> std::error_code { return ec_; }
    void value() const {
        if (ec_) {
            throw std::system_error(ec_);
        }
    }

private:
    std::error_code ec_;
};

}  // namespace weft
