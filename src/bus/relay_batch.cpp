#include "relay_batch.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "weft/bus/backend.hpp"
#include "weft/bus/errc.hpp"
#include "weft/bus/message_id.hpp"
#include "weft/core/when_all.hpp"
#include "weft/sched/timer.hpp"

namespace weft::bus::detail {
namespace {

auto default_permanent(std::error_code ec) -> bool {
    return ec == bus_errc::message_too_large || ec == bus_errc::malformed_envelope ||
           ec == bus_errc::unsupported_version || ec == std::errc::invalid_argument;
}

auto wait_task(event& e) -> task<result<void>> { co_return co_await e.wait(); }

/// What one chain did, read by publish_batch after every chain finished (so the chains, which
/// run concurrently, never touch the shared retry map).
struct chain_outcome {
    bool published_any = false;
    bool deferred = false;  // a transient failure left the rest of the chain pending
};

void note_peak(relay_counters& counters, std::uint64_t unacked) {
    auto peak = counters.peak_unacked_per_key.load(std::memory_order_relaxed);
    while (unacked > peak && !counters.peak_unacked_per_key.compare_exchange_weak(
                                 peak, unacked, std::memory_order_relaxed)) {
    }
}

auto publish_chain(publisher& pub,
                   std::vector<relay_row>& rows,
                   std::vector<std::size_t> chain,
                   const relay_options& options,
                   relay_counters& counters,
                   relay_stop& stop,
                   bool defer,
                   chain_outcome& out) -> task<void> {
    for (const std::size_t i : chain) {
        relay_row& row = rows[i];
        auto backoff = std::max(options.min_backoff, std::chrono::milliseconds{1});
        for (;;) {
            if (stop.requested()) {
                co_return;
            }
            note_peak(counters, 1);
            auto a = co_await pub.publish(row.env);
            if (a) {
                row.outcome = relay_row::fate::published;
                counters.published.fetch_add(1, std::memory_order_relaxed);
                out.published_any = true;
                break;
            }
            const std::error_code ec = a.error();
            if (ec == std::errc::operation_canceled || ec == bus_errc::publisher_closed) {
                co_return;
            }
            const bool permanent =
                options.is_permanent ? options.is_permanent(ec) : default_permanent(ec);
            if (permanent) {
                row.outcome = relay_row::fate::dead;
                row.reason = ec.message();
                counters.dead_lettered.fetch_add(1, std::memory_order_relaxed);
                break;
            }
            counters.retries.fetch_add(1, std::memory_order_relaxed);
            if (defer) {
                out.deferred = true;
                co_return;  // this row and the rest of the chain stay pending
            }
            co_await wait_for_event(stop.wake, backoff);
            backoff = std::min(backoff * 2, options.max_backoff);
        }
    }
}

/// publish_batch with a window of more than one event per key (relay_batch.hpp). Every
/// chain's events are started with try_publish_async, in the chain's order and at most
/// `window` unacknowledged; outcomes come back (in any order) through pub.results() and are
/// matched by id. A result whose id is not in this batch is left over from a batch that
/// returned early (stopping); it is dropped.
auto publish_windowed(publisher& pub,
                      std::vector<relay_row>& rows,
                      std::vector<std::vector<std::size_t>>& chains,
                      const relay_options& options,
                      relay_counters& counters,
                      relay_stop& stop,
                      std::uint32_t window,
                      std::vector<chain_outcome>& outs) -> task<void> {
    constexpr std::size_t none = static_cast<std::size_t>(-1);
    struct chain_state {
        std::size_t next = 0;       // position of the next event to send
        std::uint32_t unacked = 0;  // sent, outcome not read
        std::size_t failed = none;  // the first position that failed transiently
    };
    std::vector<chain_state> st(chains.size());
    std::unordered_map<message_id, std::pair<std::size_t, std::size_t>> sent;  // chain, pos
    sent.reserve(rows.size());
    std::size_t in_flight = 0;
    auto permanent = [&](std::error_code ec) {
        return options.is_permanent ? options.is_permanent(ec) : default_permanent(ec);
    };
    // A failed outcome of chain c's event at `pos`: dead-lettered, or the chain stops there.
    auto failed = [&](std::size_t c, std::size_t pos, std::error_code ec) {
        relay_row& row = rows[chains[c][pos]];
        if (permanent(ec)) {
            row.outcome = relay_row::fate::dead;
            row.reason = ec.message();
            return;
        }
        counters.retries.fetch_add(1, std::memory_order_relaxed);
        st[c].failed = std::min(st[c].failed, pos);
    };
    // Chains [from, to) may send: all of them at first and after the bound was reached, else
    // only the one whose outcome was just read.
    std::size_t from = 0;
    std::size_t to = chains.size();
    for (;;) {
        if (stop.requested()) {
            co_return;  // what was not decided stays pending
        }
        bool blocked = false;
        for (std::size_t c = from; c < to && !blocked; ++c) {
            chain_state& k = st[c];
            while (k.failed == none && k.unacked < window && k.next < chains[c].size()) {
                relay_row& row = rows[chains[c][k.next]];
                auto id = pub.try_publish_async(row.env);
                if (!id) {
                    const std::error_code ec = id.error();
                    if (ec == std::errc::operation_would_block) {
                        blocked = true;  // max_pending reached: read an outcome first
                        break;
                    }
                    if (ec == std::errc::operation_canceled || ec == bus_errc::publisher_closed) {
                        co_return;
                    }
                    failed(c, k.next, ec);
                    ++k.next;
                    continue;
                }
                sent.emplace(*id, std::pair{c, k.next});
                ++k.next;
                ++k.unacked;
                ++in_flight;
                note_peak(counters, k.unacked);
            }
        }
        from = blocked ? 0 : chains.size();
        to = chains.size();
        if (in_flight == 0) {
            if (!blocked) {
                break;  // every chain sent all it may
            }
            // The bound is held by someone else's publishes: wait for room.
            co_await wait_for_event(stop.wake, std::chrono::milliseconds{1});
            continue;
        }
        auto r = co_await pub.results().recv();
        if (!r) {
            co_return;  // closed or cancelled: the rest stay pending
        }
        auto it = sent.find(r->id);
        if (it == sent.end()) {
            continue;
        }
        const auto [c, pos] = it->second;
        sent.erase(it);
        if (!blocked) {
            from = c;
            to = c + 1;
        }
        --in_flight;
        --st[c].unacked;
        if (r->outcome) {
            rows[chains[c][pos]].outcome = relay_row::fate::published;
        } else {
            const std::error_code ec = r->outcome.error();
            if (ec == std::errc::operation_canceled || ec == bus_errc::publisher_closed) {
                co_return;
            }
            failed(c, pos, ec);
        }
    }
    // Every outcome read. A chain that failed at n keeps n and everything after it pending,
    // even what the broker took (sent again from n, in order).
    for (std::size_t c = 0; c < chains.size(); ++c) {
        const std::size_t cut = std::min(st[c].failed, chains[c].size());
        bool gap = false;
        for (std::size_t pos = 0; pos < chains[c].size(); ++pos) {
            relay_row& row = rows[chains[c][pos]];
            if (row.outcome == relay_row::fate::dead) {
                // Rejected for good wherever it stands: never stored, so it orders nothing.
                counters.dead_lettered.fetch_add(1, std::memory_order_relaxed);
            } else if (pos >= cut) {
                // Acknowledged after an earlier event of its key failed: the broker stored it
                // ahead of that one (counted: the order the consumer sees is broken here).
                gap = gap || (pos > cut && row.outcome == relay_row::fate::published);
                row.outcome = relay_row::fate::pending;
            } else if (row.outcome == relay_row::fate::published) {
                counters.published.fetch_add(1, std::memory_order_relaxed);
                outs[c].published_any = true;
            }
        }
        outs[c].deferred = st[c].failed != none;
        if (gap) {
            counters.window_gaps.fetch_add(1, std::memory_order_relaxed);
        }
    }
}

}  // namespace

auto effective_window(const relay_options& options) -> std::uint32_t {
    const std::uint32_t asked = std::max<std::uint32_t>(1, options.max_unacked_per_key);
    if (asked == 1) {
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

auto now_ms() noexcept -> std::int64_t {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

auto wait_for_event(event& e, std::chrono::milliseconds d) -> task<void> {
    auto r = co_await with_timeout(d, wait_task(e));
    (void)r;  // set, timed out or cancelled: the caller looks at its own state next
}

auto publish_batch(publisher& pub,
                   std::vector<relay_row>& rows,
                   const relay_options& options,
                   relay_counters& counters,
                   relay_stop& stop,
                   retry_map* deferred,
                   std::uint32_t window) -> task<void> {
    const auto now = std::chrono::steady_clock::now();
    std::unordered_map<std::string_view, std::size_t> chain_of;
    std::vector<std::vector<std::size_t>> chains;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        if (rows[i].outcome != relay_row::fate::pending) {
            continue;  // dead already (undecodable)
        }
        if (deferred != nullptr) {
            auto d = find_retry(*deferred, rows[i]);
            if (d != deferred->end() && d->second.not_before > now) {
                continue;  // its key waits: the row stays pending
            }
        }
        if (fault_unbounded_window()) {
            chains.push_back({i});  // the control's broken relay: no order per key
            continue;
        }
        auto [it, fresh] = chain_of.try_emplace(rows[i].env.key, chains.size());
        if (fresh) {
            chains.emplace_back();
        }
        chains[it->second].push_back(i);
    }
    std::vector<std::size_t> first;  // a row of each chain, for its key afterwards
    first.reserve(chains.size());
    for (const auto& c : chains) {
        first.push_back(c.front());
    }
    std::vector<chain_outcome> outs(chains.size());
    const bool defer = deferred != nullptr;
    if (window > 1 && defer && !fault_unbounded_window()) {
        co_await publish_windowed(pub, rows, chains, options, counters, stop, window, outs);
    } else if (chains.size() == 1) {
        co_await publish_chain(pub, rows, std::move(chains.front()), options, counters, stop, defer,
                               outs.front());
    } else if (!chains.empty()) {
        std::vector<task<void>> tasks;
        tasks.reserve(chains.size());
        for (std::size_t c = 0; c < chains.size(); ++c) {
            tasks.push_back(publish_chain(pub, rows, std::move(chains[c]), options, counters, stop,
                                          defer, outs[c]));
        }
        co_await when_all(std::move(tasks));
    }
    if (deferred == nullptr) {
        co_return;
    }
    const auto min_backoff = std::max(options.min_backoff, std::chrono::milliseconds{1});
    const auto after = std::chrono::steady_clock::now();
    for (std::size_t c = 0; c < outs.size(); ++c) {
        const relay_row& head = rows[first[c]];
        const std::string own =
            fault_unbounded_window() ? "#" + std::to_string(head.seq) : std::string{};
        const std::string& key = fault_unbounded_window() ? own : head.env.key;
        if (outs[c].deferred) {
            auto [it, fresh] = deferred->try_emplace(key, key_retry{after, min_backoff});
            if (outs[c].published_any) {
                it->second.backoff = min_backoff;  // it moved: this is a new failure
            }
            it->second.not_before = after + it->second.backoff;
            it->second.backoff = std::min(it->second.backoff * 2, options.max_backoff);
        } else if (outs[c].published_any) {
            deferred->erase(key);
        }
    }
}

}  // namespace weft::bus::detail
