#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "weft/bus/envelope.hpp"
#include "weft/trace/span.hpp"

namespace weft::bus::detail {

/// One staged event the relay claimed. `fate` starts pending; the relay sets it to published or
/// dead (with `reason`), or leaves it pending (its row stays staged for the next relay).
struct relay_row {
    enum class fate : unsigned char { pending, published, dead };
    std::int64_t seq = 0;
    std::int64_t staged_ms = 0;
    envelope env;
    /// The envelope's encoding as the outbox stored it: the relay forwards it as it is
    /// (try_publish_encoded_async); `env` holds only id, topic and key.
    std::string encoded;
    fate outcome = fate::pending;
    std::string reason;
    /// relay_options::tracer's publish span for the send in flight; null without a tracer. Shared
    /// because rows are copied (a copy's span is the same send).
    std::shared_ptr<trace::span> span;

    /// Fills `encoded` and env's id, topic and key (read out of it, checked as decode checks)
    /// from a row's stored encoding. A row that does not decode is marked dead with the reason:
    /// stage() wrote it, so only an edited table gets here, and a dead letter beats stopping
    /// its key forever.
    void load(std::string_view stored);
};

/// Milliseconds since the epoch, as rows record when they were staged (`staged_ms`).
[[nodiscard]] auto now_ms() noexcept -> std::int64_t;

}  // namespace weft::bus::detail
