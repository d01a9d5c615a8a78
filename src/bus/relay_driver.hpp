#pragma once

#include <cstdint>

#include "relay_counters.hpp"
#include "relay_stop.hpp"
#include "relay_store.hpp"
#include "weft/bus/publisher.hpp"
#include "weft/bus/relay_options.hpp"
#include "weft/core/result.hpp"
#include "weft/core/task.hpp"
#include "weft/sync/event.hpp"

namespace weft::bus::detail {

/// The per-key window the relay uses: options.max_unacked_per_key where options.broker keeps a
/// partition prefix, else 1 (and a line on stderr when more was asked for). Unbounded under
/// fault_unbounded_window (test builds' order control), 1 under fault_mark_done_first.
[[nodiscard]] auto relay_window(const relay_options& options) -> std::uint32_t;

/// The one outbox relay, for every store and every window: a relay_pipeline publishes, and the
/// database side here, one round trip at a time, deletes what the pipeline finished and claims
/// the next batch when it wants rows, while the pipeline's earlier rows are still being
/// acknowledged.
/// - Idle: a claim shorter than a batch makes the next wait for `notified` (or the store's own
///   wake-up) or the poll interval, doubling from min_poll to max_poll while nothing comes.
/// - A failed round or prepare: tried again after a back-off (min_backoff doubling to
///   max_backoff); when the store lost its claim (relay_store::lost) every row held is
///   forgotten first: they stay staged, published again by whoever claims them (at least
///   once).
/// - Ends at stop_relay (`stop`): ok, once the outcomes of the sends in flight are in and the
///   rows they finished are deleted (where the store still can). Ends when the awaiting task
///   is stopped: ok, at once (rows in flight stay staged). Ends when the publisher closed (it
///   refuses every send, its results channel is closed): `publisher_closed`, the rows held
///   left staged.
/// `counters.window` is set to the window used.
auto run_relay(relay_store& store,
               publisher& pub,
               const relay_options& options,
               relay_counters& counters,
               relay_stop& stop,
               event& notified) -> task<result<void>>;

}  // namespace weft::bus::detail
