#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "weft/bus/dead_letters.hpp"
#include "weft/bus/pg_outbox.hpp"

namespace weft::bus {

/// The dead letters of a pg_outbox: the rows of `<table>_dead` (events the broker refused for
/// good). `ref` is the row's seq; `reason` the broker's refusal; `topic` the event's. requeue
/// moves the row back into `<table>` in one transaction, with a new seq (after every row
/// there, so a running relay reads it), the partition the outbox computes for its key (so
/// `options.table` and `options.partitions` must be the outbox's) and the envelope's bytes as
/// they were staged; with `options.listen_notify` it wakes the relays as stage() does.
/// Only `conninfo`, `table`, `partitions` and `listen_notify` of the options are used.
/// Its own blocking libpq connection, opened per call (so a server restarted between calls
/// is no error): blocking, like every dead_letters; call it from a tool or spawn_blocking.
/// Errors: pg_errc::connection_failed when the server cannot be reached, query_failed when it
/// refuses (no such table...).
///
///     weft::bus::pg_dead_letters dead{{.conninfo = "host=db user=app", .table = "weft_outbox"}};
///     for (const auto& d : dead.list(100).value()) { std::cout << d.ref << ' ' << d.reason; }
class pg_dead_letters final : public dead_letters {
public:
    /// Throws std::invalid_argument for a bad table name.
    explicit pg_dead_letters(pg_outbox_options options);
    ~pg_dead_letters() override;

    auto list(std::size_t limit) -> result<std::vector<dead_letter>> override;
    auto show(std::string_view ref) -> result<dead_letter> override;
    auto requeue(std::string_view ref) -> result<void> override;
    auto drop(std::string_view ref) -> result<void> override;

private:
    pg_outbox_options options_;
    pg_outbox outbox_;  // its partition_of
};

}  // namespace weft::bus
