#include "weft/tls/kernel_tls.hpp"

#include <fstream>
#include <iterator>
#include <string>

namespace weft {

namespace detail {
auto ulp_list_has_tls(std::string_view list) noexcept -> bool {
    while (!list.empty()) {
        const auto start = list.find_first_not_of(" \t\n");
        if (start == std::string_view::npos) {
            return false;
        }
        list.remove_prefix(start);
        const auto end = std::min(list.find_first_of(" \t\n"), list.size());
        if (list.substr(0, end) == "tls") {
            return true;
        }
        list.remove_prefix(end);
    }
    return false;
}
}  // namespace detail

auto kernel_tls_available() noexcept -> bool {
    static const bool available = [] {
        try {
            std::ifstream f("/proc/sys/net/ipv4/tcp_available_ulp");
            const std::string list{std::istreambuf_iterator<char>(f),
                                   std::istreambuf_iterator<char>()};
            return detail::ulp_list_has_tls(list);
        } catch (...) {
            return false;
        }
    }();
    return available;
}

}  // namespace weft
