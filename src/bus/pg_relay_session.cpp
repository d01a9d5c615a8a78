#include "pg_relay_session.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

#include "pg_literals.hpp"
#include "pg_outbox_claim.hpp"
#include "sql_identifier.hpp"

namespace weft::bus::detail {

namespace {

/// The presence key's second half: (lock_class, presence_objid) is held shared by every live
/// relay of the table; partitions are 0 .. partitions-1, never this.
constexpr std::int32_t presence_objid = 2147483647;

/// The condition on pg_locks for the granted advisory lock (lock_class $1, `objid`) in this
/// database (two-int keys: objsubid 2): what the relay count and the partition take both read.
auto advisory_lock_held(std::string_view objid) -> std::string {
    return "locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE "
           "datname = current_database()) AND classid = $1::int::oid AND objsubid = 2 AND objid "
           "= " +
           std::string(objid);
}

}  // namespace

pg_relay_session::pg_relay_session(const pg_outbox_options& options,
                                   std::int32_t lock_class,
                                   std::atomic<std::uint32_t>& owned_count)
    : options_(options), lock_class_(lock_class), owned_count_(owned_count) {}

void pg_relay_session::lose() {
    conn.reset();
    owned.clear();
    releasing.clear();
    parts.clear();
    share = 0;
    take_due = true;
    owned_count_.store(0, std::memory_order_relaxed);
}

auto pg_relay_session::open() -> task<result<void>> {
    auto c = co_await pg_connection::connect(options_.conninfo);
    if (!c) {
        co_return c.error();
    }
    std::string settings(detail::pg_relay_planner_settings);
    if (!options_.durable_deletes) {
        settings += "; SET synchronous_commit = off";
    }
    auto a = co_await (*c)->query(std::move(settings));
    if (!a) {
        co_return a.error();
    }
    // Presence: held as long as the session (a killed relay's goes with its connection);
    // shared, so every relay holds it at once and pg_locks counts them.
    std::vector<pg_param> key;
    key.push_back(text_param(std::to_string(lock_class_)));
    key.push_back(text_param(std::to_string(presence_objid)));
    auto p =
        co_await (*c)->query("SELECT pg_advisory_lock_shared($1::int, $2::int)", std::move(key));
    if (!p) {
        co_return p.error();
    }
    if (options_.listen_notify) {
        auto l = co_await (*c)->query("LISTEN " + detail::quoted(options_.table + "_wake"));
        if (!l) {
            co_return l.error();
        }
    }
    conn = std::move(*c);
    co_return result<void>{};
}

auto pg_relay_session::count_relays() -> task<result<void>> {
    const auto now = std::chrono::steady_clock::now();
    if (share != 0 && now < next_count) {
        co_return result<void>{};
    }
    next_count = now + options_.rebalance_interval;
    std::vector<pg_param> key;
    key.push_back(text_param(std::to_string(lock_class_)));
    key.push_back(text_param(std::to_string(presence_objid)));
    auto r = co_await conn->query(
        "SELECT count(*) FROM pg_locks WHERE " + advisory_lock_held("$2::int::oid"),
        std::move(key));
    if (!r) {
        co_return r.error();
    }
    const std::uint32_t n = options_.partitions;
    const auto live = std::max<std::uint32_t>(
        1,
        static_cast<std::uint32_t>(std::strtoul(std::string(r->text(0, 0)).c_str(), nullptr, 10)));
    std::uint32_t fair = (n + live - 1) / live;
    if (options_.max_owned_partitions != 0) {
        fair = std::min(fair, options_.max_owned_partitions);
    }
    share = std::max<std::uint32_t>(1, fair);
    take_due = true;
    if (owned.size() > share) {
        std::sort(owned.begin(), owned.end());
        while (owned.size() > share) {
            releasing.push_back(owned.back());
            owned.pop_back();
        }
        owned_count_.store(static_cast<std::uint32_t>(owned.size()), std::memory_order_relaxed);
    }
    co_return result<void>{};
}

auto pg_relay_session::release_drained(const std::vector<std::int64_t>& held)
    -> task<result<void>> {
    std::unordered_map<std::int64_t, std::int64_t> kept;
    kept.reserve(held.size());
    std::vector<std::int64_t> busy;
    for (const std::int64_t seq : held) {
        auto it = parts.find(seq);
        if (it == parts.end()) {
            continue;  // not claimed in this session (cannot happen): nothing to wait for
        }
        kept.emplace(seq, it->second);
        busy.push_back(it->second);
    }
    parts = std::move(kept);
    if (releasing.empty()) {
        co_return result<void>{};
    }
    std::vector<std::int64_t> still;
    std::vector<pg_statement> unlocks;
    for (const std::int64_t p : releasing) {
        if (std::find(busy.begin(), busy.end(), p) != busy.end()) {
            still.push_back(p);
            continue;
        }
        unlocks.push_back(
            {"SELECT pg_advisory_unlock($1::int, $2::int)",
             {text_param(std::to_string(lock_class_)), text_param(std::to_string(p))}});
    }
    if (unlocks.empty()) {
        co_return result<void>{};
    }
    auto u = co_await conn->pipeline(std::move(unlocks));
    if (!u) {
        co_return u.error();
    }
    releasing = std::move(still);
    co_return result<void>{};
}

auto pg_relay_session::release_due() const -> bool {
    const std::size_t batch = std::max<std::uint32_t>(1, options_.relay.batch_size);
    return !releasing.empty() || parts.size() > 16 * batch;
}

auto pg_relay_session::take_partitions() -> task<result<void>> {
    const std::uint32_t n = options_.partitions;
    const std::uint32_t target = share;
    if (!take_due || owned.size() >= target) {
        co_return result<void>{};
    }
    take_due = false;
    std::vector<std::int64_t> mine = owned;
    mine.insert(mine.end(), releasing.begin(), releasing.end());
    std::vector<pg_param> args;
    args.push_back(text_param(std::to_string(lock_class_)));
    args.push_back(text_param(std::to_string(n)));
    args.push_back(text_param(int_array(mine)));
    args.push_back(text_param(std::to_string(target - owned.size())));
    auto r = co_await conn->query(
        "WITH free AS MATERIALIZED (SELECT p FROM generate_series(0, $2::int - 1) p WHERE p <> "
        "ALL($3::int[]) AND NOT EXISTS (SELECT 1 FROM pg_locks WHERE " +
            advisory_lock_held("p::oid") +
            ") ORDER BY p) SELECT p FROM free WHERE pg_try_advisory_lock($1::int, p) LIMIT "
            "$4::int",
        std::move(args));
    if (!r) {
        co_return r.error();
    }
    for (int i = 0; i < r->size(); ++i) {
        owned.push_back(std::strtol(std::string(r->text(i, 0)).c_str(), nullptr, 10));
    }
    owned_count_.store(static_cast<std::uint32_t>(owned.size()), std::memory_order_relaxed);
    co_return result<void>{};
}

}  // namespace weft::bus::detail
