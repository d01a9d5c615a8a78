#include "relay_driver.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <utility>
#include <vector>

#include "relay_faults.hpp"
#include "relay_pipeline.hpp"
#include "weft/bus/backend.hpp"
#include "weft/bus/errc.hpp"
#include "weft/core/stop.hpp"
#include "weft/core/when_all.hpp"

namespace weft::bus::detail {

auto relay_window(const relay_options& options) -> std::uint32_t {
    if (fault_unbounded_window()) {
        return std::numeric_limits<std::uint32_t>::max();
    }
    const std::uint32_t asked = std::max<std::uint32_t>(1, options.max_unacked_per_key);
    if (asked == 1 || fault_mark_done_first()) {
        return 1;
    }
    if (options.broker != nullptr && options.broker->features().keeps_partition_prefix) {
        return asked;
    }
    std::fprintf(stderr,
                 "weft::bus relay: max_unacked_per_key=%u needs a broker that keeps a partition "
                 "prefix (relay_options::broker, e.g. Kafka); using 1\n",
                 asked);
    return 1;
}

namespace {

/// The database side (see run_relay). Every row it claimed is in the pipeline, or finished by
/// it and in `unfinished` until a round deleted it, or forgotten with a lost claim.
auto database_side(relay_store& store,
                   relay_pipeline& pipe,
                   const relay_options& o,
                   relay_counters& counters,
                   relay_stop& stop,
                   event& notified) -> task<void> {
    const stop_token token = co_await get_stop_token();
    const std::size_t batch = std::max<std::uint32_t>(1, o.batch_size);
    std::vector<relay_row> unfinished;  // finished by the pipeline, not yet deleted
    bool dry = false;  // the last claim was short: wait (poll) before claiming again
    auto poll = o.min_poll;
    auto backoff = o.min_backoff;
    auto failed = [&]() -> task<void> {
        if (store.lost()) {
            pipe.reset();
            unfinished.clear();  // not deleted: claimed and published again (at least once)
        }
        co_await wait_for_event(stop.wake, backoff);
        backoff = std::min(backoff * 2, o.max_backoff);
    };
    for (;;) {
        const bool stopping = stop.requested() || token.stop_requested() || pipe.ended();
        if (stopping) {
            pipe.wake();  // it ends once the outcomes of what is in flight are in
        }
        if (pipe.take_finished(unfinished) != 0) {
            crash_point("after_ack");
        }
        auto ready = co_await store.prepare(pipe, unfinished, stopping);
        if (!ready) {
            if (stopping) {
                break;
            }
            co_await failed();
            continue;
        }
        const bool claim = !stopping && !dry && store.can_claim() && pipe.wants_rows();
        if (unfinished.empty() && !claim) {
            if (stopping) {
                // A stop waits for the pump, whose last outcomes may finish rows to delete
                // here; a cancellation ends at once (what is in flight stays staged).
                if (pipe.ended() || token.stop_requested()) {
                    break;
                }
                co_await wait_for_event(notified, o.max_poll);
                continue;
            }
            const std::int64_t oldest = pipe.oldest_staged_ms();
            counters.oldest_pending_staged_ms.store(oldest, std::memory_order_relaxed);
            if (dry && oldest == 0) {
                counters.idle_waits.fetch_add(1, std::memory_order_relaxed);
                co_await store.wait_idle(std::min(poll, store.max_wait()));
            } else {
                // notify(), stop_relay() or the pipeline (rows finished, room for rows).
                co_await wait_for_event(notified,
                                        std::min(dry ? poll : o.max_poll, store.max_wait()));
            }
            if (dry) {
                poll = std::min(poll * 2, o.max_poll);
                dry = false;  // claim again
            }
            continue;
        }
        auto rows = co_await store.round(unfinished, claim, pipe);
        if (!rows) {
            if (stopping) {
                break;  // not deleted: published again by the next relay
            }
            co_await failed();
            continue;
        }
        backoff = o.min_backoff;
        unfinished.clear();
        if (!claim) {
            continue;
        }
        dry = rows->size() < batch;
        pipe.set_dry(dry);
        if (rows->empty()) {
            continue;
        }
        poll = o.min_poll;
        if (fault_mark_done_first()) {
            // The positive control's broken relay (test builds only): rows deleted first.
            std::vector<relay_row> marked = *rows;
            for (auto& r : marked) {
                r.outcome = relay_row::fate::published;
            }
            auto done = co_await store.round(marked, /*claim=*/false, pipe);
            if (!done) {
                co_await failed();
                continue;  // not added: they stay staged for the next relay
            }
            crash_point("after_mark_done");
        }
        pipe.add(std::move(*rows));
    }
    pipe.close();
    store.end();
}

}  // namespace

auto run_relay(relay_store& store,
               publisher& pub,
               const relay_options& options,
               relay_counters& counters,
               relay_stop& stop,
               event& notified) -> task<result<void>> {
    const std::uint32_t window = relay_window(options);
    counters.window.store(window, std::memory_order_relaxed);
    relay_pipeline pipe{pub, options, counters, stop, window, notified};
    co_await when_all(database_side(store, pipe, options, counters, stop, notified), pipe.pump());
    if (pipe.publisher_closed()) {
        co_return make_error_code(bus_errc::publisher_closed);
    }
    co_return result<void>{};
}

}  // namespace weft::bus::detail
