#include "weft/io/socket_address.hpp"

#include <arpa/inet.h>

#include <cstring>
#include <string>

namespace weft {

auto socket_address::parse(std::string_view host, std::uint16_t port) -> result<socket_address> {
    socket_address a;
    const std::string h(host);
    auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage_);
    if (::inet_pton(AF_INET, h.c_str(), &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
        a.len_ = sizeof(sockaddr_in);
        return a;
    }
    a.storage_ = {};
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage_);
    if (::inet_pton(AF_INET6, h.c_str(), &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        a.len_ = sizeof(sockaddr_in6);
        return a;
    }
    return std::errc::invalid_argument;
}

auto socket_address::from(const sockaddr* sa, socklen_t len) noexcept -> socket_address {
    socket_address a;
    if (len > sizeof(a.storage_)) {
        len = sizeof(a.storage_);
    }
    std::memcpy(&a.storage_, sa, len);
    a.len_ = len;
    return a;
}

auto socket_address::port() const noexcept -> std::uint16_t {
    if (storage_.ss_family == AF_INET) {
        return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
    }
    if (storage_.ss_family == AF_INET6) {
        return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
    }
    return 0;
}

auto socket_address::to_string() const -> std::string {
    char buf[INET6_ADDRSTRLEN] = {};
    if (storage_.ss_family == AF_INET) {
        ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr, buf,
                    sizeof(buf));
        std::string out = buf;
        out.append(":").append(std::to_string(port()));
        return out;
    }
    if (storage_.ss_family == AF_INET6) {
        ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr, buf,
                    sizeof(buf));
        // append, not operator+ chains: g++ 12 -O3 warns (-Wrestrict) on the chain here.
        std::string out = "[";
        out.append(buf).append("]:").append(std::to_string(port()));
        return out;
    }
    return "(unset)";
}

}  // namespace weft
