#include "relay_row.hpp"

#include <chrono>
#include <system_error>

#include "weft/bus/envelope_codec.hpp"

namespace weft::bus::detail {

void relay_row::load(std::string_view stored) {
    if (auto e = decode_routing(stored)) {
        env.id = e->id;
        env.topic.assign(e->topic);
        env.key.assign(e->key);
        encoded.assign(stored);
    } else {
        outcome = fate::dead;
        reason = "undecodable outbox row: " + e.error().message();
    }
}

auto now_ms() noexcept -> std::int64_t {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

}  // namespace weft::bus::detail
