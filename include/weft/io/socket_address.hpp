#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "weft/core/result.hpp"

namespace weft {

/// An IPv4 or IPv6 address and port (a sockaddr_storage).
///
///     auto a = weft::socket_address::parse("127.0.0.1", 8080).value();
class socket_address {
public:
    socket_address() noexcept = default;
    /// A numeric IPv4 ("127.0.0.1") or IPv6 ("::1") address; no name resolution.
    [[nodiscard]] static auto parse(std::string_view host, std::uint16_t port)
        -> result<socket_address>;
    [[nodiscard]] static auto from(const sockaddr* sa, socklen_t len) noexcept -> socket_address;

    [[nodiscard]] auto data() const noexcept -> const sockaddr* {
        return reinterpret_cast<const sockaddr*>(&storage_);
    }
    [[nodiscard]] auto size() const noexcept -> socklen_t { return len_; }
    [[nodiscard]] auto family() const noexcept -> int { return storage_.ss_family; }
    [[nodiscard]] auto port() const noexcept -> std::uint16_t;
    [[nodiscard]] auto to_string() const -> std::string;

private:
    sockaddr_storage storage_{};
    socklen_t len_ = 0;
};

}  // namespace weft
