#include "weft/io/error.hpp"

#include <string>

namespace weft {

namespace {
class io_category_impl final : public std::error_category {
public:
    [[nodiscard]] auto name() const noexcept -> const char* override { return "weft.io"; }
    [[nodiscard]] auto message(int c) const -> std::string override {
        switch (static_cast<io_errc>(c)) {
            case io_errc::eof:
                return "connection closed by peer";
            case io_errc::backend_unavailable:
                return "IO backend unavailable on this kernel";
            case io_errc::too_long:
                return "record longer than the limit";
        }
        return "unknown weft.io error";
    }
    [[nodiscard]] auto default_error_condition(int c) const noexcept
        -> std::error_condition override {
        if (static_cast<io_errc>(c) == io_errc::too_long) {
            return std::errc::message_size;
        }
        return {c, *this};
    }
};
}  // namespace

auto io_category() noexcept -> const std::error_category& {
    static const io_category_impl c;
    return c;
}

}  // namespace weft
