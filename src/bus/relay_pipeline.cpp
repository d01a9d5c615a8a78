#include "relay_pipeline.hpp"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <limits>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "weft/bus/envelope_codec.hpp"
#include "weft/bus/errc.hpp"
#include "weft/bus/message_id.hpp"
#include "weft/bus/trace_headers.hpp"
#include "weft/core/stop.hpp"
#include "weft/sched/timer.hpp"

namespace weft::bus::detail {

namespace {

auto default_permanent(std::error_code ec) -> bool {
    return ec == bus_errc::message_too_large || ec == bus_errc::malformed_envelope ||
           ec == bus_errc::unsupported_version || ec == std::errc::invalid_argument;
}

void note_peak(relay_counters& counters, std::uint64_t unacked) {
    auto peak = counters.peak_unacked_per_key.load(std::memory_order_relaxed);
    while (unacked > peak && !counters.peak_unacked_per_key.compare_exchange_weak(
                                 peak, unacked, std::memory_order_relaxed)) {
    }
}

/// One key's rows in staging order: a vector read from `head_`. pop_front only advances
/// `head_` (the popped row was moved out); the consumed front is cut away once it is at least
/// half of the vector, so a queue that keeps flowing allocates nothing once its capacity is
/// reached. (std::deque allocated a block per row: a relay_row is above the 256 bytes of which
/// libstdc++'s 512-byte deque blocks hold two.)
class row_queue {
public:
    [[nodiscard]] auto size() const noexcept -> std::size_t { return rows_.size() - head_; }
    [[nodiscard]] auto empty() const noexcept -> bool { return rows_.size() == head_; }
    auto front() noexcept -> relay_row& { return rows_[head_]; }
    [[nodiscard]] auto front() const noexcept -> const relay_row& { return rows_[head_]; }
    auto operator[](std::size_t i) noexcept -> relay_row& { return rows_[head_ + i]; }
    void push_back(relay_row&& r) { rows_.push_back(std::move(r)); }
    void pop_front() {
        ++head_;
        if (head_ == rows_.size()) {
            rows_.clear();  // keeps the capacity
            head_ = 0;
        } else if (head_ >= 16 && 2 * head_ >= rows_.size()) {
            rows_.erase(rows_.begin(), rows_.begin() + static_cast<std::ptrdiff_t>(head_));
            head_ = 0;
        }
    }
    [[nodiscard]] auto begin() const noexcept {
        return rows_.begin() + static_cast<std::ptrdiff_t>(head_);
    }
    [[nodiscard]] auto end() const noexcept { return rows_.end(); }

private:
    std::vector<relay_row> rows_;
    std::size_t head_ = 0;
};

}  // namespace

// Invariants, with mu_ held (per key k; sums over keys):
//   k.rows = [0, k.next): sent or decided, [k.next, size): not yet sent
//   k.unacked = |k.sent| <= window;   in_flight = sum k.unacked
//   unsent = sum over keys not parked of (size - next)
//   held = sum size + |finished|
// A key is open (failed == none), failing (failed set, outcomes of its window still coming)
// or parked (failed cleared, not sent before not_before). Only an open key sends or pops.
struct relay_pipeline::state {
    static constexpr std::uint64_t none = std::numeric_limits<std::uint64_t>::max();
    struct key_state {
        row_queue rows;
        // Outcomes to come: (envelope id, ordinal) of each row sent and not yet answered. A
        // list, not a set: two rows staged with one id (a caller's choice) each get an outcome,
        // and each outcome ends one of them (the earliest).
        std::vector<std::pair<message_id, std::uint64_t>> sent;
        std::uint64_t front_ord = 0;  // ordinal of rows.front() among the key's rows
        std::size_t next = 0;
        std::uint32_t unacked = 0;
        std::uint64_t failed = none;  // ordinal of the first transient failure
        bool parked = false;
        std::chrono::steady_clock::time_point not_before{};
        std::chrono::milliseconds backoff{1};
    };

    state(publisher& p,
          const relay_options& o,
          relay_counters& c,
          relay_stop& st,
          std::uint32_t w,
          event& wake)
        : pub(p), options(o), counters(c), stop(st), window(w), db_wake(wake) {
        min_backoff = std::max(options.min_backoff, std::chrono::milliseconds{1});
        batch = std::max<std::uint32_t>(1, options.batch_size);
    }

    publisher& pub;
    const relay_options& options;
    relay_counters& counters;
    relay_stop& stop;
    const std::uint32_t window;
    event& db_wake;
    event pump_wake{event::reset_mode::automatic};
    std::chrono::milliseconds min_backoff{1};
    std::size_t batch = 1;

    mutable std::mutex mu;
    std::unordered_map<std::string, key_state> keys;
    std::vector<relay_row> finished;
    std::size_t in_flight = 0;
    std::size_t unsent = 0;
    std::size_t held = 0;
    std::size_t parked = 0;  // keys parked
    std::chrono::steady_clock::time_point next_due = std::chrono::steady_clock::time_point::max();
    bool blocked = false;  // the publisher's bound was hit: every key is filled after an outcome
    bool dry = false;
    bool closed = false;
    bool pub_closed = false;  // the publisher refused a send or closed: publisher_closed()
    bool ended = false;
    bool db_asked = false;

    [[nodiscard]] auto permanent(std::error_code ec) const -> bool {
        return options.is_permanent ? options.is_permanent(ec) : default_permanent(ec);
    }

    [[nodiscard]] auto wants_rows() const -> bool { return unsent < batch && held < 4 * batch; }

    [[nodiscard]] auto db_work() const -> bool {
        return ended || finished.size() >= batch || (!finished.empty() && in_flight == 0) ||
               (!dry && wants_rows());
    }

    void ask_db() {
        if (!db_asked && db_work()) {
            db_asked = true;
            db_wake.set();
        }
    }

    // The decided prefix of an open key goes to `finished`.
    void pop_finished(key_state& k) {
        while (k.failed == none && !k.rows.empty() &&
               k.rows.front().outcome != relay_row::fate::pending) {
            relay_row& row = k.rows.front();
            if (row.outcome == relay_row::fate::published) {
                counters.published.fetch_add(1, std::memory_order_relaxed);
            } else {
                counters.dead_lettered.fetch_add(1, std::memory_order_relaxed);
            }
            if (k.next > 0) {
                --k.next;
            } else if (!k.parked) {
                --unsent;  // dead before it was sent (undecodable)
            }
            finished.push_back(std::move(row));
            k.rows.pop_front();
            ++k.front_ord;
        }
    }

    // Sends what k's window allows.
    void fill(key_state& k) {
        pop_finished(k);
        if (closed || stop.requested()) {
            return;
        }
        while (!k.parked && k.failed == none && k.unacked < window && k.next < k.rows.size()) {
            relay_row& row = k.rows[k.next];
            const std::uint64_t ord = k.front_ord + k.next;
            if (row.outcome == relay_row::fate::dead) {
                ++k.next;  // rejected before (undecodable, or re-queued after a failure)
                --unsent;
                continue;
            }
            auto id = pub.try_publish_encoded_async(
                encoded_envelope{row.env.id, row.env.topic, row.env.key, row.encoded});
            if (!id) {
                const std::error_code ec = id.error();
                if (ec == std::errc::operation_would_block) {
                    blocked = true;  // max_pending reached: after the next outcome
                    return;
                }
                if (ec == std::errc::operation_canceled || ec == bus_errc::publisher_closed) {
                    closed = true;
                    pub_closed = pub_closed || ec == bus_errc::publisher_closed;
                    return;
                }
                ++k.next;
                --unsent;
                if (permanent(ec)) {
                    row.outcome = relay_row::fate::dead;
                    row.reason = ec.message();
                    continue;
                }
                counters.retries.fetch_add(1, std::memory_order_relaxed);
                k.failed = ord;
                if (k.unacked == 0) {
                    park(k);
                }
                return;
            }
            if (options.tracer != nullptr) {
                row.span = std::make_shared<trace::span>(publish_span(row));
            }
            k.sent.emplace_back(*id, ord);
            ++k.next;
            --unsent;
            ++k.unacked;
            ++in_flight;
            note_peak(counters, k.unacked);
        }
        pop_finished(k);
    }

    void fill_all() {
        for (auto& [key, k] : keys) {
            fill(k);
            if (blocked || closed) {
                return;
            }
        }
    }

    // A failing key whose window's outcomes are all in: n and everything after it go back to
    // the queue, not sent before the back-off.
    void park(key_state& k) {
        const auto cut = static_cast<std::size_t>(k.failed - k.front_ord);
        bool gap = false;
        for (std::size_t pos = cut; pos < k.next; ++pos) {
            relay_row& row = k.rows[pos];
            if (row.outcome == relay_row::fate::published) {
                gap = gap || pos > cut;
                row.outcome = relay_row::fate::pending;
            }
        }
        if (gap) {
            counters.window_gaps.fetch_add(1, std::memory_order_relaxed);
        }
        unsent -= k.rows.size() - k.next;
        k.next = cut;
        k.failed = none;
        k.parked = true;
        ++parked;
        k.not_before = runtime_clock::now() + k.backoff;
        k.backoff = std::min(k.backoff * 2, options.max_backoff);
        next_due = std::min(next_due, k.not_before);
        pop_ahead_of_cut(k, cut);
    }

    // Pops the decided rows ahead of position `cut` of a parked key (they precede its failed
    // row; their outcomes came after the failure's).
    void pop_ahead_of_cut(key_state& k, std::size_t cut) {
        for (std::size_t i = 0; i < cut; ++i) {
            relay_row& row = k.rows.front();
            if (row.outcome == relay_row::fate::pending) {
                return;  // never acknowledged (the publisher closed): stays staged
            }
            if (row.outcome == relay_row::fate::published) {
                counters.published.fetch_add(1, std::memory_order_relaxed);
            } else {
                counters.dead_lettered.fetch_add(1, std::memory_order_relaxed);
            }
            finished.push_back(std::move(row));
            k.rows.pop_front();
            ++k.front_ord;
            --k.next;
        }
    }

    // Parked keys whose back-off has passed are opened and filled.
    void unpark_due() {
        if (parked == 0) {
            return;
        }
        const auto now = runtime_clock::now();
        if (now < next_due) {
            return;
        }
        next_due = std::chrono::steady_clock::time_point::max();
        for (auto& [key, k] : keys) {
            if (!k.parked) {
                continue;
            }
            if (k.not_before > now) {
                next_due = std::min(next_due, k.not_before);
                continue;
            }
            k.parked = false;
            --parked;
            unsent += k.rows.size() - k.next;
            fill(k);
        }
    }

    // The stored encoding decoded whole for its trace headers: only with a tracer.
    [[nodiscard]] auto publish_span(const relay_row& row) const -> trace::span {
        auto env = decode(row.encoded);
        return env ? start_publish_span(options.tracer, *env) : trace::span{};
    }

    void apply(const publish_result& r) {
        // Found by its key (the publisher reports the key it was given) and then its id among
        // the key's few unanswered sends (at most `window`).
        auto kit = keys.find(r.key);
        if (kit == keys.end()) {
            return;  // not ours (an earlier relay's, or sent before reset)
        }
        key_state& k = kit->second;
        auto it = std::find_if(k.sent.begin(), k.sent.end(),
                               [&r](const auto& e) { return e.first == r.id; });
        if (it == k.sent.end()) {
            return;  // not ours
        }
        const std::uint64_t ord = it->second;
        k.sent.erase(it);
        --k.unacked;
        --in_flight;
        relay_row& row = k.rows[static_cast<std::size_t>(ord - k.front_ord)];
        if (row.span) {
            if (!r.outcome) {
                row.span->set_status(trace::status_code::error, r.outcome.error().message());
            }
            row.span->end();
            row.span.reset();
        }
        if (r.outcome) {
            row.outcome = relay_row::fate::published;
            k.backoff = min_backoff;  // the key moved: a later failure starts over
        } else {
            const std::error_code ec = r.outcome.error();
            if (ec == std::errc::operation_canceled || ec == bus_errc::publisher_closed) {
                pub_closed = pub_closed || ec == bus_errc::publisher_closed;
                closed = true;  // the row stays pending, is never deleted: the next relay's
            } else if (permanent(ec)) {
                row.outcome = relay_row::fate::dead;
                row.reason = ec.message();
            } else {
                counters.retries.fetch_add(1, std::memory_order_relaxed);
                k.failed = std::min(k.failed, ord);
            }
        }
        if (k.failed != none) {
            if (k.unacked == 0) {
                park(k);
            }
        } else if (blocked) {
            blocked = false;
            fill(k);
            fill_all();
        } else {
            fill(k);
        }
        unpark_due();
    }
};

relay_pipeline::relay_pipeline(publisher& pub,
                               const relay_options& options,
                               relay_counters& counters,
                               relay_stop& stop,
                               std::uint32_t window,
                               event& db_wake)
    : s_(std::make_unique<state>(pub, options, counters, stop, window, db_wake)) {}

relay_pipeline::~relay_pipeline() = default;

void relay_pipeline::add(std::vector<relay_row> rows) {
    std::lock_guard lock(s_->mu);
    state& s = *s_;
    s.dry = false;
    std::vector<state::key_state*> touched;
    for (auto& row : rows) {
        auto [it, fresh] = s.keys.try_emplace(row.env.key);
        state::key_state& k = it->second;
        if (fresh) {
            k.backoff = s.min_backoff;
        }
        if (k.rows.size() == k.next && !k.parked) {
            touched.push_back(&k);  // its window may have room: the first new row of it
        }
        if (!k.parked) {
            ++s.unsent;
        }
        ++s.held;
        k.rows.push_back(std::move(row));
    }
    for (state::key_state* k : touched) {
        s.fill(*k);
        if (s.blocked || s.closed) {
            break;
        }
    }
    s.db_asked = false;
    s.pump_wake.set();
}

auto relay_pipeline::take_finished(std::vector<relay_row>& into) -> std::size_t {
    std::lock_guard lock(s_->mu);
    state& s = *s_;
    const std::size_t n = s.finished.size();
    into.insert(into.end(), std::make_move_iterator(s.finished.begin()),
                std::make_move_iterator(s.finished.end()));
    s.finished.clear();
    s.held -= n;
    std::erase_if(s.keys, [](const auto& kv) {
        const state::key_state& k = kv.second;
        return k.rows.empty() && k.unacked == 0 && k.failed == state::none && !k.parked;
    });
    s.db_asked = false;
    return n;
}

auto relay_pipeline::wants_rows() const -> bool {
    std::lock_guard lock(s_->mu);
    return !s_->closed && !s_->stop.requested() && s_->wants_rows();
}

void relay_pipeline::set_dry(bool dry) {
    std::lock_guard lock(s_->mu);
    s_->dry = dry;
    s_->db_asked = false;
}

auto relay_pipeline::db_work() const -> bool {
    std::lock_guard lock(s_->mu);
    return s_->db_work();
}

auto relay_pipeline::held_seqs() const -> std::vector<std::int64_t> {
    std::lock_guard lock(s_->mu);
    std::vector<std::int64_t> seqs;
    seqs.reserve(s_->held);
    for (const auto& [key, k] : s_->keys) {
        for (const auto& r : k.rows) {
            seqs.push_back(r.seq);
        }
    }
    for (const auto& r : s_->finished) {
        seqs.push_back(r.seq);
    }
    return seqs;
}

auto relay_pipeline::parked_keys() const -> std::vector<std::string> {
    std::lock_guard lock(s_->mu);
    std::vector<std::string> keys;
    for (const auto& [key, k] : s_->keys) {
        if (k.parked || k.failed != state::none) {
            keys.push_back(key);
        }
    }
    return keys;
}

auto relay_pipeline::drop_parked(const std::function<bool(const relay_row&)>& gone) -> std::size_t {
    std::lock_guard lock(s_->mu);
    state& s = *s_;
    std::size_t dropped = 0;
    for (auto it = s.keys.begin(); it != s.keys.end();) {
        state::key_state& k = it->second;
        // Parked: failed cleared, nothing unacknowledged, its rows left out of `unsent`.
        if (!k.parked || k.unacked != 0 || k.rows.empty() || !gone(k.rows.front())) {
            ++it;
            continue;
        }
        dropped += k.rows.size();
        s.held -= k.rows.size();
        --s.parked;
        it = s.keys.erase(it);
    }
    return dropped;
}

auto relay_pipeline::size() const -> std::size_t {
    std::lock_guard lock(s_->mu);
    return s_->held;
}

auto relay_pipeline::oldest_staged_ms() const -> std::int64_t {
    std::lock_guard lock(s_->mu);
    std::int64_t oldest = 0;
    for (const auto& [key, k] : s_->keys) {
        if (!k.rows.empty() && (oldest == 0 || k.rows.front().staged_ms < oldest)) {
            oldest = k.rows.front().staged_ms;
        }
    }
    return oldest;
}

void relay_pipeline::reset() {
    std::lock_guard lock(s_->mu);
    state& s = *s_;
    s.keys.clear();
    s.finished.clear();
    s.in_flight = 0;
    s.unsent = 0;
    s.held = 0;
    s.parked = 0;
    s.blocked = false;
    s.dry = false;
    s.next_due = std::chrono::steady_clock::time_point::max();
    s.pump_wake.set();
}

void relay_pipeline::wake() {
    std::lock_guard lock(s_->mu);
    s_->pump_wake.set();
}

void relay_pipeline::close() {
    std::lock_guard lock(s_->mu);
    s_->closed = true;
    s_->pump_wake.set();
}

auto relay_pipeline::publisher_closed() const -> bool {
    std::lock_guard lock(s_->mu);
    return s_->pub_closed;
}

auto relay_pipeline::ended() const -> bool {
    std::lock_guard lock(s_->mu);
    return s_->ended;
}

auto relay_pipeline::pump() -> task<void> {
    state& s = *s_;
    for (;;) {
        std::chrono::milliseconds wait{0};
        {
            std::lock_guard lock(s.mu);
            // Stopping: nothing more is sent (fill), and the outcomes of what is in flight are
            // read first, so that what the broker took is deleted rather than sent again by
            // the next relay (which would then write the key beside this one's late sends).
            if (s.closed || (s.stop.requested() && s.in_flight == 0)) {
                break;
            }
            s.unpark_due();
            // Results not ours (sent before reset(), or by an earlier relay on this publisher)
            // are read too even when nothing of ours is in flight: unread, they would hold
            // places of max_pending.
            if (s.in_flight == 0 && s.pub.results().size() == 0) {
                if (s.blocked) {
                    // The bound is held by someone else's publishes: try again shortly.
                    s.blocked = false;
                    s.fill_all();
                    wait = std::chrono::milliseconds{1};
                } else if (s.next_due != std::chrono::steady_clock::time_point::max()) {
                    wait = std::max(std::chrono::milliseconds{1},
                                    std::chrono::ceil<std::chrono::milliseconds>(
                                        s.next_due - runtime_clock::now()));
                } else {
                    wait = s.options.max_poll;
                }
                if (s.in_flight != 0 || s.pub.results().size() != 0) {
                    wait = std::chrono::milliseconds{0};
                }
            }
        }
        if (wait.count() > 0) {
            co_await wait_for_event(s.pump_wake, wait);
            const stop_token token = co_await get_stop_token();
            if (token.stop_requested()) {
                break;
            }
            continue;
        }
        auto r = co_await s.pub.results().recv();
        const bool stopped = !r && (co_await get_stop_token()).stop_requested();
        std::lock_guard lock(s.mu);
        if (!r) {
            s.closed = true;
            s.pub_closed = s.pub_closed || !stopped;  // the publisher closed its results
            break;
        }
        s.apply(*r);
        // The outcomes already waiting are applied under the same lock: one wake of the
        // database side and one lock per burst of acks, not per ack (Kafka's delivery reports
        // arrive in bursts).
        for (;;) {
            auto more = s.pub.results().try_recv();
            if (!more) {
                break;
            }
            s.apply(*more);
        }
        s.ask_db();
    }
    std::lock_guard lock(s.mu);
    s.ended = true;
    s.db_wake.set();
}

}  // namespace weft::bus::detail
