#include "weft/sync/errc.hpp"

#include <string>

namespace weft {
namespace {
class sync_category_impl final : public std::error_category {
public:
    [[nodiscard]] auto name() const noexcept -> const char* override { return "weft.sync"; }
    [[nodiscard]] auto message(int ev) const -> std::string override {
        switch (static_cast<sync_errc>(ev)) {
            case sync_errc::closed:
                return "channel closed";
        }
        return "unknown weft.sync error";
    }
};
}  // namespace

auto sync_category() noexcept -> const std::error_category& {
    static const sync_category_impl cat;
    return cat;
}

}  // namespace weft
