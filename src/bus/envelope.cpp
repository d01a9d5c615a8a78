#include "weft/bus/envelope.hpp"

namespace weft::bus {

auto envelope::find_header(std::string_view name) const noexcept -> const header* {
    for (const header& h : headers) {
        if (h.name == name) {
            return &h;
        }
    }
    return nullptr;
}

}  // namespace weft::bus
