#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "pg_relay_session.hpp"
#include "relay_store.hpp"
#include "weft/bus/pg_outbox.hpp"
#include "weft/sync/event.hpp"

namespace weft::bus::detail {

/// The PostgreSQL side of the relay (relay_store), for several relays on one table: a session
/// (pg_relay_session) owns partitions, and each round trip is one transaction in one pipeline:
/// BEGIN, the dead-letter moves and DELETE of what the pipeline finished, the claim of the next
/// batch (pg_claim: the owned partitions' oldest rows, leaving out the rows the pipeline holds
/// and its parked keys), COMMIT. The claims commit at once (the rows' FOR UPDATE lock ends with
/// the round trip): what keeps other relays away from the rows held is the partitions' advisory
/// locks, which live as long as the session. A lost session loses them: the driver then drops
/// every row held (relay_store::lost), and they are claimed again, by whoever owns their
/// partition next, in seq order.
class pg_relay_store final : public relay_store {
public:
    pg_relay_store(const pg_outbox_options& options,
                   std::int32_t lock_class,
                   std::atomic<std::uint32_t>& owned_count,
                   event& notified);

    auto prepare(relay_pipeline& pipe, const std::vector<relay_row>& unfinished, bool stopping)
        -> task<result<void>> override;
    [[nodiscard]] auto can_claim() const -> bool override;
    auto round(const std::vector<relay_row>& finished, bool claim, const relay_pipeline& pipe)
        -> task<result<std::vector<relay_row>>> override;
    auto lost() -> bool override;
    auto wait_idle(std::chrono::milliseconds d) -> task<void> override;
    [[nodiscard]] auto max_wait() const -> std::chrono::milliseconds override;
    void end() noexcept override;

private:
    const pg_outbox_options& options_;
    pg_relay_session session_;
    event& notified_;
};

}  // namespace weft::bus::detail
