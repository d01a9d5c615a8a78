#pragma once

#include <cstdint>
#include <string_view>
#include <type_traits>

namespace weft::log {

/// One key-value pair of a log record: a key and a string, integer, floating-point or boolean
/// value. Both are views: a field is built at the call and used before log() returns.
///
///     logger.info("order stored", {{"order", 42}, {"item", "tea"}, {"ms", 1.5}});
class field {
public:
    enum class kind : std::uint8_t { string, signed_int, unsigned_int, floating, boolean };

    constexpr field(std::string_view k, std::string_view v) noexcept
        : key_(k), kind_(kind::string), s_(v) {}
    constexpr field(std::string_view k, const char* v) noexcept
        : key_(k), kind_(kind::string), s_(v) {}
    constexpr field(std::string_view k, bool v) noexcept : key_(k), kind_(kind::boolean), b_(v) {}
    constexpr field(std::string_view k, double v) noexcept
        : key_(k), kind_(kind::floating), d_(v) {}
    template <typename Int>
        requires(std::is_integral_v<Int> && !std::is_same_v<Int, bool>)
    constexpr field(std::string_view k, Int v) noexcept : key_(k), i_(0) {
        if constexpr (std::is_signed_v<Int>) {
            kind_ = kind::signed_int;
            i_ = v;
        } else {
            kind_ = kind::unsigned_int;
            u_ = v;
        }
    }

    [[nodiscard]] constexpr auto key() const noexcept -> std::string_view { return key_; }
    [[nodiscard]] constexpr auto type() const noexcept -> kind { return kind_; }
    [[nodiscard]] constexpr auto as_string() const noexcept -> std::string_view { return s_; }
    [[nodiscard]] constexpr auto as_signed() const noexcept -> std::int64_t { return i_; }
    [[nodiscard]] constexpr auto as_unsigned() const noexcept -> std::uint64_t { return u_; }
    [[nodiscard]] constexpr auto as_double() const noexcept -> double { return d_; }
    [[nodiscard]] constexpr auto as_bool() const noexcept -> bool { return b_; }

private:
    std::string_view key_;
    kind kind_ = kind::string;
    union {
        std::string_view s_;
        std::int64_t i_;
        std::uint64_t u_;
        double d_;
        bool b_;
    };
};

}  // namespace weft::log
