#include "pg_relay_store.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

#include "pg_literals.hpp"
#include "pg_outbox_claim.hpp"
#include "relay_faults.hpp"
#include "sql_identifier.hpp"
#include "weft/core/when_any.hpp"
#include "weft/sched/timer.hpp"

namespace weft::bus::detail {

namespace {

auto wait_event(event& e) -> task<result<void>> { co_return co_await e.wait(); }

auto wait_notify(pg_connection& c) -> task<result<void>> {
    auto r = co_await c.wait_notification();
    if (!r) {
        co_return r.error();
    }
    co_return result<void>{};
}

auto be_int64(std::string_view b) -> std::int64_t {
    std::uint64_t v = 0;
    for (const char c : b.substr(0, 8)) {
        v = v << 8 | static_cast<unsigned char>(c);
    }
    return static_cast<std::int64_t>(v);
}

/// The claimed rows (relay_row::load). Each row's partition goes to `parts` (release_drained
/// waits for the rows of a partition).
auto claimed_rows(const pg_rows& claimed, std::unordered_map<std::int64_t, std::int64_t>& parts)
    -> std::vector<relay_row> {
    std::vector<relay_row> rows;
    rows.reserve(static_cast<std::size_t>(claimed.size()));
    for (int i = 0; i < claimed.size(); ++i) {
        relay_row row;
        row.seq = be_int64(claimed.text(i, 0));
        row.staged_ms = be_int64(claimed.text(i, 2));
        parts[row.seq] = be_int64(claimed.text(i, 3));  // int4: 4 bytes big-endian
        row.load(claimed.text(i, 1));
        rows.push_back(std::move(row));
    }
    return rows;
}

/// Whether this process's chaos test asked for the "mid_commit" crash (test builds only):
/// then the finishing DELETE goes to the server alone, and the crash comes after it and before
/// COMMIT; otherwise DELETE and COMMIT travel in one pipeline.
auto split_mid_commit() -> bool {
#if defined(WEFT_OUTBOX_CRASH_POINTS)
    static const bool split = [] {
        const char* p = std::getenv("WEFT_OUTBOX_CRASH_POINT");
        return p != nullptr && std::string_view{p} == "mid_commit";
    }();
    return split;
#else
    return false;
#endif
}

/// The statements that delete (and dead-letter) finished rows.
auto finish_statements(const std::string& name, const std::vector<relay_row>& rows)
    -> std::vector<pg_statement> {
    const std::string t = detail::quoted(name);
    const std::string dead = detail::quoted(name + "_dead");
    std::vector<pg_statement> finish;
    std::vector<std::int64_t> finished;
    for (const auto& row : rows) {
        if (row.outcome == relay_row::fate::dead) {
            finish.push_back({"INSERT INTO " + dead +
                                  " (seq, id, topic, key, envelope, staged_at, reason) "
                                  "SELECT seq, id, topic, key, envelope, staged_at, $1 FROM " +
                                  t + " WHERE seq = $2",
                              {text_param(row.reason), text_param(std::to_string(row.seq))}});
        }
        if (row.outcome != relay_row::fate::pending) {
            finished.push_back(row.seq);
        }
    }
    if (!finished.empty()) {
        finish.push_back({"DELETE FROM " + t + " WHERE seq = ANY($1::bigint[])",
                          {text_param(int_array(finished))}});
    }
    return finish;
}

}  // namespace

pg_relay_store::pg_relay_store(const pg_outbox_options& options,
                               std::int32_t lock_class,
                               std::atomic<std::uint32_t>& owned_count,
                               event& notified)
    : options_(options), session_(options, lock_class, owned_count), notified_(notified) {}

auto pg_relay_store::prepare(relay_pipeline& pipe,
                             const std::vector<relay_row>& unfinished,
                             bool stopping) -> task<result<void>> {
    pg_relay_session& rs = session_;
    if (!rs.conn) {
        if (stopping) {
            co_return result<void>{};  // nothing held (lost with the last session)
        }
        auto opened = co_await rs.open();
        if (!opened) {
            co_return opened.error();
        }
    }
    if (!stopping) {
        auto counted = co_await rs.count_relays();
        if (!counted) {
            co_return counted.error();
        }
        auto taken = co_await rs.take_partitions();
        if (!taken) {
            co_return taken.error();
        }
    }
    if (!rs.release_due()) {
        co_return result<void>{};
    }
    if (!rs.releasing.empty()) {
        // A parked key (in back-off, nothing of it in flight) of a partition being given up is
        // dropped, not waited for: it could fail for longer than any rebalance (claims no
        // longer read the partition, so only the pipeline's own re-sends could drain it). Its
        // rows stay staged, this relay never sends them again, and the next owner claims them
        // from the oldest, in order.
        pipe.drop_parked([&rs](const relay_row& row) {
            const auto it = rs.parts.find(row.seq);
            return it != rs.parts.end() && std::find(rs.releasing.begin(), rs.releasing.end(),
                                                     it->second) != rs.releasing.end();
        });
    }
    // Held: in the pipeline, or finished by it and not yet deleted (`unfinished`); what an
    // earlier round deleted is committed.
    std::vector<std::int64_t> held = pipe.held_seqs();
    for (const auto& row : unfinished) {
        held.push_back(row.seq);
    }
    co_return co_await rs.release_drained(held);
}

auto pg_relay_store::can_claim() const -> bool { return !session_.owned.empty(); }

auto pg_relay_store::round(const std::vector<relay_row>& finished,
                           bool claim,
                           const relay_pipeline& pipe) -> task<result<std::vector<relay_row>>> {
    if (!session_.conn) {
        co_return make_error_code(pg_errc::connection_lost);
    }
    pg_connection& c = *session_.conn;
    std::vector<pg_statement> round;
    round.push_back({"BEGIN"});
    for (auto& st : finish_statements(options_.table, finished)) {
        round.push_back(std::move(st));
    }
    if (split_mid_commit() && !finished.empty()) {
        auto d = co_await c.pipeline(std::move(round));
        if (!d) {
            co_return d.error();
        }
        round.clear();
        crash_point("mid_commit");  // deleted inside the transaction, not committed
    }
    std::size_t claimed_at = 0;
    if (claim) {
        const std::vector<std::int64_t> held = pipe.held_seqs();
        claimed_at = round.size();
        round.push_back(pg_claim(options_.table, session_.owned, options_.relay.batch_size,
                                 pipe.parked_keys(), &held));
    }
    round.push_back({"COMMIT"});
    auto f = co_await c.pipeline(std::move(round));
    if (!f) {
        co_return f.error();
    }
    if (!claim) {
        co_return std::vector<relay_row>{};
    }
    co_return claimed_rows((*f)[claimed_at], session_.parts);
}

auto pg_relay_store::lost() -> bool {
    session_.lose();
    return true;
}

auto pg_relay_store::wait_idle(std::chrono::milliseconds d) -> task<void> {
    if (!session_.conn || !options_.listen_notify) {
        co_await wait_for_event(notified_, d);
        co_return;
    }
    auto r = co_await with_timeout(d, when_any(wait_event(notified_), wait_notify(*session_.conn)));
    (void)r;  // woken, timed out or cancelled: the relay looks at the table next
}

auto pg_relay_store::max_wait() const -> std::chrono::milliseconds {
    return options_.rebalance_interval;
}

void pg_relay_store::end() noexcept { session_.lose(); }

}  // namespace weft::bus::detail
