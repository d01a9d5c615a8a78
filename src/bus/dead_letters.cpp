#include "weft/bus/dead_letters.hpp"

#include <algorithm>
#include <array>
#include <string_view>

namespace weft::bus {

auto original_of(const envelope& dead) -> envelope {
    // The headers a broker adds when it dead-letters a message (subscriber_options).
    static constexpr std::array<std::string_view, 4> added{
        "weftdeadletterreason", "weftoriginaltopic", "weftoriginalgroup", "weftdeliveries"};
    envelope e = dead;
    if (const header* t = dead.find_header("weftoriginaltopic")) {
        e.topic = t->value;
    }
    std::erase_if(e.headers, [](const header& h) {
        return std::find(added.begin(), added.end(), h.name) != added.end();
    });
    return e;
}

}  // namespace weft::bus
