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

auto publish_chain(publisher& pub,
                   std::vector<relay_row>& rows,
                   std::vector<std::size_t> chain,
                   const relay_options& options,
                   relay_counters& counters,
                   relay_stop& stop) -> task<void> {
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
                   relay_stop& stop) -> task<void> {
    std::unordered_map<std::string_view, std::size_t> chain_of;
    std::vector<std::vector<std::size_t>> chains;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        auto [it, fresh] = chain_of.try_emplace(rows[i].env.key, chains.size());
        if (fresh) {
            chains.emplace_back();
        }
        chains[it->second].push_back(i);
    }
    if (chains.size() == 1) {
        co_await publish_chain(pub, rows, std::move(chains.front()), options, counters, stop);
        co_return;
    }
    std::vector<task<void>> tasks;
    tasks.reserve(chains.size());
    for (auto& c : chains) {
        tasks.push_back(publish_chain(pub, rows, std::move(c), options, counters, stop));
    }
    co_await when_all(std::move(tasks));
}

}  // namespace weft::bus::detail
