#pragma once

// A name server for tests, on a private UDP port of 127.0.0.1, so resolver tests never depend
// on the machine's: it answers A and AAAA questions from a table (with the TTL given), NXDOMAIN
// for names marked missing and for names it does not know, and nothing at all for names marked
// silent. It counts the questions per name, so a test can tell a cache hit from a query.

#include <arpa/inet.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "weft/core/task.hpp"
#include "weft/io/udp_socket.hpp"

namespace weft::test {

class dns_responder {
public:
    struct host {
        std::vector<std::string> a{};     ///< IPv4 addresses
        std::vector<std::string> aaaa{};  ///< IPv6 addresses
        std::uint32_t ttl = 300;
        bool silent = false;  ///< never answer
    };

    dns_responder()
        : sock_(udp_socket::bind(socket_address::parse("127.0.0.1", 0).value()).value()) {}

    void add(const std::string& name, host h) {
        const std::lock_guard lock(m_);
        hosts_[name] = std::move(h);
    }
    /// "127.0.0.1:port", for resolve_options::servers.
    [[nodiscard]] auto servers() const -> std::string {
        return "127.0.0.1:" + std::to_string(sock_.local_address().value().port());
    }
    /// Questions received for `name` (each of A and AAAA counts one).
    [[nodiscard]] auto questions(const std::string& name) -> int {
        const std::lock_guard lock(m_);
        return counts_[name];
    }
    [[nodiscard]] auto total_questions() const -> int { return total_.load(); }

    /// Answers until cancelled.
    auto serve() -> task<void> {
        std::array<std::byte, 512> buf{};
        for (;;) {
            auto got = co_await sock_.recv_from(buf);
            if (!got) {
                co_return;
            }
            std::string reply =
                answer(reinterpret_cast<const std::uint8_t*>(buf.data()), got->size);
            if (!reply.empty()) {
                (void)co_await sock_.send_to(std::as_bytes(std::span{reply}), got->from);
            }
        }
    }

private:
    auto answer(const std::uint8_t* q, std::size_t n) -> std::string {
        if (n < 17) {
            return {};
        }
        std::string name;
        std::size_t at = 12;
        while (at < n && q[at] != 0) {
            const std::size_t len = q[at];
            if (at + 1 + len >= n) {
                return {};
            }
            if (!name.empty()) {
                name += '.';
            }
            name.append(reinterpret_cast<const char*>(q + at + 1), len);
            at += 1 + len;
        }
        if (at + 5 > n) {
            return {};
        }
        const std::size_t question_end = at + 5;
        const int qtype = (q[at + 1] << 8) | q[at + 2];
        host h;
        bool known = false;
        {
            const std::lock_guard lock(m_);
            ++counts_[name];
            total_.fetch_add(1);
            if (auto it = hosts_.find(name); it != hosts_.end()) {
                h = it->second;
                known = true;
            }
        }
        if (known && h.silent) {
            return {};
        }
        std::string out(reinterpret_cast<const char*>(q), question_end);
        out[2] = static_cast<char>(0x81);                           // QR, RD
        out[3] = static_cast<char>(known ? 0x80 : 0x83);            // RA; NXDOMAIN when unknown
        out[6] = out[7] = out[8] = out[9] = out[10] = out[11] = 0;  // an/ns/ar counts
        out[5] = 1;
        int count = 0;
        auto add = [&](int type, const void* rdata, std::uint16_t len) {
            const std::uint8_t rr[] = {0xC0,
                                       0x0C,
                                       0,
                                       static_cast<std::uint8_t>(type),
                                       0,
                                       1,
                                       static_cast<std::uint8_t>(h.ttl >> 24),
                                       static_cast<std::uint8_t>(h.ttl >> 16),
                                       static_cast<std::uint8_t>(h.ttl >> 8),
                                       static_cast<std::uint8_t>(h.ttl),
                                       0,
                                       static_cast<std::uint8_t>(len)};
            out.append(reinterpret_cast<const char*>(rr), sizeof rr);
            out.append(static_cast<const char*>(rdata), len);
            ++count;
        };
        if (known && qtype == 1) {
            for (const auto& a : h.a) {
                in_addr v{};
                ::inet_pton(AF_INET, a.c_str(), &v);
                add(1, &v, 4);
            }
        } else if (known && qtype == 28) {
            for (const auto& a : h.aaaa) {
                in6_addr v{};
                ::inet_pton(AF_INET6, a.c_str(), &v);
                add(28, &v, 16);
            }
        }
        out[7] = static_cast<char>(count);
        return out;
    }

    udp_socket sock_;
    std::mutex m_;
    std::map<std::string, host> hosts_;
    std::map<std::string, int> counts_;
    std::atomic<int> total_{0};
};

}  // namespace weft::test
