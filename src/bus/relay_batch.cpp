#include "relay_batch.hpp"

#include <algorithm>
#include <chrono>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "weft/bus/errc.hpp"
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

}  // namespace

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
                   retry_map* deferred) -> task<void> {
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
    if (chains.size() == 1) {
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
