#include "weft/bus/memory_broker.hpp"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "weft/bus/errc.hpp"
#include "weft/core/detail/spin_lock.hpp"
#include "weft/core/join_handle.hpp"
#include "weft/sched/timer.hpp"
#include "weft/sync/event.hpp"

namespace weft::bus {

// Locks: memory_broker::state::topics_mu guards the topic map (topics are never removed, so a
// topic_state* stays valid for the broker's life); topic_state::mu guards the topic and every
// group on it, members' waiting state included; state::pause_mu guards the held publishes. Order:
// pause_mu before a topic's mu; never two topics' mu at once (dead letters are stored after the
// source topic's lock is released). topics_mu, pause_mu and fault_mu are std::mutex (taken
// rarely); a topic's mu, taken by every publish, delivery and ack, is weft's spin_lock: its
// sections are short (the store of one message, now and then an allocation), and with awaited
// publishes from 1,000 tasks it beat a spin-then-futex lock (docs/design/decisions.md).

namespace {

// The runtime's clock: a runtime with a manual clock (weft::testing) moves ack waits,
// redeliveries and delayed nacks with it.
using clock = runtime_clock;

// Ack deadlines are issued from the kernel's coarse monotonic clock, not clock::now(): reading
// it is a few loads from the vDSO page without reading the CPU's counter (a clock::now() per
// publish was a tenth of one here). It runs on CLOCK_MONOTONIC's time line (steady_clock's)
// and lags it by less than its resolution (one tick), so
//   deadline = coarse reading + resolution + ack_wait  >=  real hand-out time + ack_wait:
// no delivery expires before ack_wait; one expires at most two ticks late (8 ms at HZ=250,
// nothing beside ack timeouts of seconds). Expiry checks and a member's sleep use the precise
// clock, so no member wakes for a deadline and then finds it not yet due. The coarse clock
// never goes back, so deadlines are still issued in order, which the FIFO of deadlines needs.
// Under a manual clock (a test runtime) the deadline is the clock's own reading: it never
// moves between reads unless the runtime steps it.
auto deadline_base() noexcept -> clock::time_point {
    if (clock::manual() != nullptr) {
        return clock::now();
    }
    auto read = [](clockid_t id, auto get) {
        timespec ts{};
        get(id, &ts);
        return std::chrono::duration_cast<clock::duration>(std::chrono::seconds(ts.tv_sec) +
                                                           std::chrono::nanoseconds(ts.tv_nsec));
    };
    static const clock::duration tick = read(CLOCK_MONOTONIC_COARSE, ::clock_getres);
    return clock::time_point(read(CLOCK_MONOTONIC_COARSE, ::clock_gettime) + tick);
}

struct stored_message {
    std::uint64_t seq = 0;
    std::shared_ptr<const envelope> env;
};

struct pending_message {
    stored_message msg;
    std::uint32_t deliveries = 0;  // handed out so far
};

class memory_member;

/// Ids that arrived out of order, with their sequences and ordinals (see recent_ids): a FIFO ring
/// (the order of expiry) indexed by an open-addressing table (linear probing, backward-shift
/// deletion, no tombstones).
///   ring_: entries [head_, head_ + count_) (mod ring_.size(), a power of two) in arrival order
///   table_: each slot 0 (empty) or (tag << 32 | ring index + 1); every ring entry has exactly
///           one slot, reachable from its home slot (hash & mask) without crossing an empty one
///   table_.size() == 2 * ring_.size(), so the table is at most half full and probes stay short.
/// Both grow by doubling (the table rebuilt), so a topic that sees few such ids holds few.
class id_table {
public:
    struct entry {
        message_id id;
        std::uint64_t seq;
        std::uint64_t ordinal;
    };

    [[nodiscard]] auto empty() const noexcept -> bool { return count_ == 0; }
    [[nodiscard]] auto oldest() const noexcept -> const entry& { return ring_[head_]; }

    [[nodiscard]] auto find(const message_id& id) const noexcept -> std::optional<std::uint64_t> {
        if (count_ == 0) {
            return std::nullopt;
        }
        const std::uint64_t h = hash(id);
        for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
            const std::uint64_t e = table_[i];
            if (e == 0) {
                return std::nullopt;
            }
            if ((e >> 32) == (h >> 32) && ring_[ring_index(e)].id == id) {
                return ring_[ring_index(e)].seq;
            }
        }
    }

    /// Remembers `e` (its id not among those held) as the newest.
    void insert(const entry& e) {
        if (count_ == ring_.size()) {
            grow();
        }
        const std::size_t pos = (head_ + count_) & (ring_.size() - 1);
        ring_[pos] = e;
        ++count_;
        place(hash(e.id), pos);
    }

    /// Forgets the oldest entry.
    void pop_oldest() noexcept {
        forget(head_);
        head_ = (head_ + 1) & (ring_.size() - 1);
        --count_;
    }

private:
    static auto hash(const message_id& id) noexcept -> std::uint64_t {
        // All 16 bytes count (a caller's ids need not be random anywhere), mixed by a multiply
        // and a fold so that both the low bits (the home slot) and the high ones (the tag) vary.
        std::uint64_t lo = 0;
        std::uint64_t hi = 0;
        std::memcpy(&lo, id.bytes.data(), 8);
        std::memcpy(&hi, id.bytes.data() + 8, 8);
        std::uint64_t x = (lo * 0x9E3779B97F4A7C15ULL) ^ hi;
        x ^= x >> 32;
        x *= 0xD6E8FEB86659FD93ULL;
        x ^= x >> 29;
        return x;
    }
    static auto ring_index(std::uint64_t e) noexcept -> std::size_t {
        return static_cast<std::size_t>((e & 0xFFFF'FFFFULL) - 1);
    }

    void place(std::uint64_t h, std::size_t pos) noexcept {
        std::size_t i = h & mask_;
        while (table_[i] != 0) {
            i = (i + 1) & mask_;
        }
        table_[i] = ((h >> 32) << 32) | (static_cast<std::uint64_t>(pos) + 1);
    }

    /// Removes ring entry `pos` from the table; later entries of its probe run shift back into
    /// the gap when their home slot allows, so no run is broken by an empty slot.
    void forget(std::size_t pos) noexcept {
        const std::uint64_t h = hash(ring_[pos].id);
        std::size_t i = h & mask_;
        while (ring_index(table_[i]) != pos) {
            i = (i + 1) & mask_;
        }
        for (std::size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
            const std::uint64_t e = table_[j];
            if (e == 0) {
                break;
            }
            const std::size_t home = hash(ring_[ring_index(e)].id) & mask_;
            // e may move to the gap at i iff its home is not in the cyclic range (i, j].
            if (((j - home) & mask_) >= ((j - i) & mask_)) {
                table_[i] = e;
                i = j;
            }
        }
        table_[i] = 0;
    }

    void grow() {
        const std::size_t cap = ring_.empty() ? 8 : ring_.size() * 2;
        std::vector<entry> ring(cap);
        for (std::size_t k = 0; k < count_; ++k) {
            ring[k] = ring_[(head_ + k) & (ring_.size() - 1)];
        }
        ring_.swap(ring);
        head_ = 0;
        table_.assign(2 * cap, 0);
        mask_ = 2 * cap - 1;
        for (std::size_t pos = 0; pos < count_; ++pos) {
            place(hash(ring_[pos].id), pos);
        }
    }

    std::vector<entry> ring_;
    std::vector<std::uint64_t> table_;
    std::size_t mask_ = 0;
    std::size_t head_ = 0;
    std::size_t count_ = 0;
};

/// The ids of a topic's last `window` de-duplicated publishes with their sequences. Ids made by
/// message_id::generate() increase in the order they are made, so nearly all of them arrive
/// above every id seen before; those go to `in_order_`, a FIFO that is therefore sorted by
/// id as well as by arrival, and cost no hashing and no random access: find() answers "new" from
/// one comparison with the largest id ever seen, a repeat is found by binary search, and expiry
/// pops the front. Ids that arrive below that largest one (a caller's own ids, publishes from
/// several threads overtaking each other) go to `out_of_order_`, a hash table. The hash table it
/// replaces for every id missed the cache three times per publish (find, forget the oldest,
/// insert) once the window outgrew it.
///   ordinal: 1, 2, ... in arrival order; live entries are exactly those with
///            ordinal > inserted_ - window_ (both structures are FIFOs by ordinal)
///   in_order_: ids strictly increasing from front to back, each above every id inserted before
///   |in_order_| + |out_of_order_| <= window_
/// Not thread-safe (guarded by the topic's mu).
class recent_ids {
public:
    explicit recent_ids(std::size_t window) : window_(window) {}

    /// The sequence stored for `id`, if it is among the recent ones.
    [[nodiscard]] auto find(const message_id& id) const noexcept -> std::optional<std::uint64_t> {
        if (inserted_ == 0 || largest_ < id) {
            return std::nullopt;  // never seen: above every id inserted so far
        }
        std::size_t lo = 0;
        std::size_t n = in_order_.size();
        while (n > 0) {  // the first entry whose id is not below `id`
            const std::size_t half = n / 2;
            if (in_order_[lo + half].id < id) {
                lo += half + 1;
                n -= half + 1;
            } else {
                n = half;
            }
        }
        if (lo < in_order_.size() && in_order_[lo].id == id) {
            return in_order_[lo].seq;
        }
        return out_of_order_.find(id);
    }

    /// Remembers `id` (not among the recent ones) with `seq`, forgetting the oldest at the window.
    void insert(const message_id& id, std::uint64_t seq) {
        if (window_ == 0) {
            return;
        }
        ++inserted_;
        // Ordinals <= cutoff are past the window once this one is in.
        const std::uint64_t cutoff = inserted_ > window_ ? inserted_ - window_ : 0;
        while (!in_order_.empty() && in_order_.front().ordinal <= cutoff) {
            in_order_.pop_front();
        }
        while (!out_of_order_.empty() && out_of_order_.oldest().ordinal <= cutoff) {
            out_of_order_.pop_oldest();
        }
        const id_table::entry e{id, seq, inserted_};
        if (inserted_ == 1 || largest_ < id) {
            in_order_.push_back(e);
            largest_ = id;
        } else {
            out_of_order_.insert(e);
        }
    }

private:
    std::size_t window_;
    std::uint64_t inserted_ = 0;
    message_id largest_{};  // the largest id ever inserted (meaningful once inserted_ > 0)
    std::deque<id_table::entry> in_order_;
    id_table out_of_order_;
};

/// A group's unsettled deliveries by token, without a node per delivery: a slab of entries and a
/// free list of the unused ones. token = generation << 32 | index, where a slot's generation
/// counts its uses, so the token of an earlier use of a slot (a delivery settled or expired since)
/// finds nothing. Invariant: |used entries| + |free_| == |slots_|, and live_ == |used entries|.
/// NOTE: a token kept across 2^32 later uses of its slot would match again (and only for the
/// same member, which take_unsettled checks); a delivery is not held that long.
class unsettled_table {
public:
    struct entry {
        pending_message p;
        clock::time_point deadline;
        memory_member* member = nullptr;
        std::uint32_t generation = 0;
        bool used = false;
    };

    [[nodiscard]] auto size() const noexcept -> std::size_t { return live_; }

    [[nodiscard]] auto find(std::uint64_t token) noexcept -> entry* {
        const auto index = static_cast<std::size_t>(token & 0xFFFF'FFFFULL);
        if (index >= slots_.size()) {
            return nullptr;
        }
        entry& e = slots_[index];
        return e.used && e.generation == static_cast<std::uint32_t>(token >> 32) ? &e : nullptr;
    }
    [[nodiscard]] auto find(std::uint64_t token) const noexcept -> const entry* {
        return const_cast<unsettled_table*>(this)->find(token);
    }

    /// Holds `p` unsettled; returns its token.
    auto add(pending_message p, clock::time_point deadline, memory_member* member)
        -> std::uint64_t {
        std::size_t index = 0;
        if (free_.empty()) {
            index = slots_.size();
            slots_.emplace_back();
        } else {
            index = free_.back();
            free_.pop_back();
        }
        entry& e = slots_[index];
        e.p = std::move(p);
        e.deadline = deadline;
        e.member = member;
        ++e.generation;
        e.used = true;
        ++live_;
        return (static_cast<std::uint64_t>(e.generation) << 32) | index;
    }

    /// Removes `e` (found by find()) and returns its message.
    auto take(entry& e) -> pending_message {
        pending_message p = std::move(e.p);
        e.p = pending_message{};
        e.used = false;
        free_.push_back(static_cast<std::uint32_t>(&e - slots_.data()));
        --live_;
        return p;
    }

    /// Removes every entry of `member` (nullptr: of every member).
    auto take_all(const memory_member* member) -> std::vector<pending_message> {
        std::vector<pending_message> out;
        for (entry& e : slots_) {
            if (e.used && (member == nullptr || e.member == member)) {
                out.push_back(take(e));
            }
        }
        return out;
    }

private:
    std::vector<entry> slots_;
    std::vector<std::uint32_t> free_;
    std::size_t live_ = 0;
};

/// One consumer group on one topic. Invariants, whenever the topic's lock is free:
///   (fresh or due non-empty)  =>  no member waiting    (each ready message woke one)
///   some member waiting and a deadline exists  =>  some waiting member's planned wake-up is at
///                                                  or before the earliest deadline
/// so no ready message and no deadline is left without a member on its way to it.
struct group_state {
    consumer_config config;
    std::deque<pending_message> fresh;  // never handed out, in sequence order
    std::deque<pending_message> due;    // to hand out again now (served before fresh)
    std::multimap<clock::time_point, pending_message> delayed;  // nacked with a delay
    unsettled_table in_flight;  // handed out, not settled, by delivery token
    // (deadline, token) of in_flight, in the order they were set: every deadline is
    // deadline_base() + ack_wait, read under the topic's lock from a clock that never goes back,
    // so the order of issue is
    // the order of deadlines and a FIFO replaces a sorted set (no node per delivery). A settled
    // delivery, or one whose deadline in_progress() moved, leaves its entry behind (stale: its
    // token is gone from in_flight or has another deadline). Invariants, whenever the lock is
    // free: the front entry is live (so earliest() is exact); size <= 2 * |in_flight| + 64
    // (prune() compacts past it, amortised O(1) per entry).
    std::deque<std::pair<clock::time_point, std::uint64_t>> deadlines;
    std::deque<memory_member*> waiting;  // members parked in next(), FIFO

    [[nodiscard]] auto earliest() const -> std::optional<clock::time_point> {
        std::optional<clock::time_point> e;
        if (!deadlines.empty()) {
            e = deadlines.front().first;
        }
        if (!delayed.empty() && (!e || delayed.begin()->first < *e)) {
            e = delayed.begin()->first;
        }
        return e;
    }
    [[nodiscard]] auto live(const std::pair<clock::time_point, std::uint64_t>& d) const -> bool {
        const auto* u = in_flight.find(d.second);
        return u != nullptr && u->deadline == d.first;
    }
    /// Restores the invariants of `deadlines` after an entry went stale.
    void prune() {
        while (!deadlines.empty() && !live(deadlines.front())) {
            deadlines.pop_front();
        }
        if (deadlines.size() > 2 * in_flight.size() + 64) {
            std::erase_if(deadlines, [this](const auto& d) { return !live(d); });
        }
    }
    inline void wake_one();
    inline void settle_waiters();
};

struct topic_state {
    topic_state(std::string n, std::size_t dedup_window)
        : name(std::move(n)), stream(name), recent(dedup_window) {}
    const std::string name;
    const stream_name stream;  // name, as every ack of this topic shares it
    mutable weft::detail::spin_lock mu;
    std::uint64_t last_seq = 0;                                               // guarded by mu
    std::deque<stored_message> retained;                                      // guarded by mu
    recent_ids recent;                                                        // guarded by mu
    std::map<std::string, std::unique_ptr<group_state>, std::less<>> groups;  // guarded by mu
};

struct held_publish {
    publish_sink* sink;
    envelope env;
    std::uint32_t slot;
};

}  // namespace

struct memory_broker::state {
    explicit state(memory_broker_options o) : options(o) {}

    auto topic(std::string_view name) -> topic_state& {
        std::lock_guard lock(topics_mu);
        auto it = topics.find(name);
        if (it == topics.end()) {
            it = topics
                     .emplace(std::string(name), std::make_unique<topic_state>(
                                                     std::string(name), options.dedup_window))
                     .first;
        }
        return *it->second;
    }
    auto find_topic(std::string_view name) const -> const topic_state* {
        std::lock_guard lock(topics_mu);
        auto it = topics.find(name);
        return it == topics.end() ? nullptr : it->second.get();
    }

    /// Stores `env` in its topic and hands it to every group. `dedupe`: publishes from users;
    /// dead letters keep their id and are never taken for repeats.
    auto store(envelope&& env, bool dedupe) -> ack {
        topic_state& t = topic(env.topic);  // before env is moved from
        return store(t, std::move(env), dedupe);
    }
    /// The same, with env.topic's state already found.
    auto store(topic_state& t, envelope&& env, bool dedupe) -> ack {
        // The stored copy is made, and the message the retention drops is freed, outside the
        // lock: a group's members take it for every delivery and ack, and a section that called
        // malloc and free (up to four blocks per message) kept them waiting.
        stored_message m{0, std::make_shared<const envelope>(std::move(env))};
        stored_message dropped;
        std::uint64_t seq = 0;
        {
            std::lock_guard lock(t.mu);
            if (dedupe) {
                if (const auto original = t.recent.find(m.env->id)) {
                    return ack{t.stream, *original, -1, true};  // m goes after the lock
                }
            }
            seq = ++t.last_seq;
            m.seq = seq;
            if (dedupe) {
                t.recent.insert(m.env->id, seq);
            }
            for (auto& [name, g] : t.groups) {
                g->fresh.push_back(pending_message{m, 0});
                g->settle_waiters();
            }
            if (options.retention > 0) {
                t.retained.push_back(std::move(m));
                if (t.retained.size() > options.retention) {
                    dropped = std::move(t.retained.front());
                    t.retained.pop_front();
                }
            }
        }
        return ack{t.stream, seq, -1, false};
    }

    void store_dead_letters(std::vector<envelope>& dead) {
        for (envelope& e : dead) {
            (void)store(std::move(e), /*dedupe=*/false);
        }
        dead.clear();
    }

    const memory_broker_options options;
    mutable std::mutex topics_mu;
    std::map<std::string, std::unique_ptr<topic_state>, std::less<>> topics;  // guarded
    // paused: written under pause_mu; read without it first (acquire, pairs with the release
    // stores) so an unpaused publish takes no broker-wide lock, then again under pause_mu.
    std::atomic<bool> paused{false};
    std::mutex pause_mu;
    std::deque<held_publish> held;  // guarded by pause_mu
    // The test hook: `faulty` (acquire, pairs with the release in set_publish_fault) lets a
    // publish skip fault_mu when no hook is set.
    std::atomic<bool> faulty{false};
    std::mutex fault_mu;
    std::function<std::error_code(const envelope&)> fault;  // guarded by fault_mu

    // The broker faults (memory_broker::drop_acks ... go_away): `consumer_faults` (relaxed:
    // a fault set while a settlement runs may apply to it or not, as with a real broker) lets
    // acks and deliveries skip the counters when none is set; `away` also raises `faulty`.
    std::atomic<bool> away{false};
    std::atomic<bool> consumer_faults{false};
    std::atomic<std::uint32_t> acks_to_drop{0};
    std::atomic<std::int64_t> ack_delay_ms{0};
    std::atomic<std::uint32_t> deliveries_to_duplicate{0};

    auto injected_fault(const envelope& env) -> std::error_code {
        if (!faulty.load(std::memory_order_acquire)) {
            return {};
        }
        if (away.load(std::memory_order_acquire)) {
            return make_error_code(bus_errc::broker_unreachable);
        }
        std::lock_guard lock(fault_mu);
        return fault ? fault(env) : std::error_code{};
    }
    void refresh_faulty() {  // under fault_mu
        faulty.store(static_cast<bool>(fault) || away.load(std::memory_order_relaxed),
                     std::memory_order_release);
    }
    /// Takes one from `n` if it is not 0.
    static auto take_one(std::atomic<std::uint32_t>& n) noexcept -> bool {
        std::uint32_t v = n.load(std::memory_order_relaxed);
        while (v != 0 && !n.compare_exchange_weak(v, v - 1, std::memory_order_relaxed)) {
        }
        return v != 0;
    }
};

namespace {

auto size_of(const envelope& e) noexcept -> std::size_t {
    std::size_t n = e.topic.size() + e.key.size() + e.type.size() + e.payload.size();
    for (const header& h : e.headers) {
        n += h.name.size() + h.value.size();
    }
    return n;
}

class memory_producer final : public backend_producer {
public:
    memory_producer(memory_broker::state& s, publish_sink& sink) noexcept : s_(&s), sink_(&sink) {}

    void start(envelope env, std::uint32_t slot) override {
        if (size_of(env) > s_->options.max_message_bytes) {
            sink_->complete(slot, make_error_code(bus_errc::message_too_large));
            return;
        }
        if (const std::error_code ec = s_->injected_fault(env)) {
            sink_->complete(slot, ec);
            return;
        }
        if (s_->paused.load(std::memory_order_acquire)) {
            std::lock_guard lock(s_->pause_mu);
            if (s_->paused.load(std::memory_order_relaxed)) {
                s_->held.push_back(held_publish{sink_, std::move(env), slot});
                return;
            }
        }
        // A publisher mostly sends to one topic: its state is looked up (under the broker-wide
        // topics_mu) only when the topic changes. Topics are never removed, so the pointer
        // stays valid. start() may run on several threads at once (publishes from many tasks):
        // last_ is atomic; its release publishes the topic_state (constructed by another
        // thread, under topics_mu) to the acquire of the next start on any thread.
        topic_state* t = last_.load(std::memory_order_acquire);
        if (t == nullptr || t->name != env.topic) {
            t = &s_->topic(env.topic);
            last_.store(t, std::memory_order_release);
        }
        sink_->complete(slot, s_->store(*t, std::move(env), /*dedupe=*/true));
    }
    void close() noexcept override {}

private:
    memory_broker::state* s_;
    publish_sink* sink_;
    std::atomic<topic_state*> last_{nullptr};
};

/// One member of a group. Its fields other than the constants are guarded by its topic's mu.
class memory_member final : public backend_consumer,
                            public std::enable_shared_from_this<memory_member> {
public:
    memory_member(memory_broker::state& s, topic_state& t, group_state& g) noexcept
        : s_(&s), t_(&t), g_(&g) {}
    memory_member(const memory_member&) = delete;
    auto operator=(const memory_member&) -> memory_member& = delete;
    ~memory_member() override { close(); }

    auto next() -> task<result<delivery>> override;
    auto ack(std::uint64_t token) -> result<void> override;
    auto nack(std::uint64_t token, std::chrono::milliseconds delay) -> result<void> override;
    auto term(std::uint64_t token, std::string_view reason) -> result<void> override;
    auto in_progress(std::uint64_t token) -> result<void> override;
    void close() noexcept override;

    // Guarded by the topic's mu; used by group_state.
    bool in_waiting = false;
    std::optional<clock::time_point> planned;  // when a waiting member wakes by itself
    event wake{event::reset_mode::automatic};

private:
    enum class step_kind : unsigned char { delivered, closed, wait };
    struct handed_out {  // a delivery, made into one after the lock (shared_from_this)
        std::shared_ptr<const envelope> env;
        std::uint64_t token = 0;
        std::uint32_t attempt = 0;
    };
    /// Under the lock: expires what is due, then hands out one message, or parks this member
    /// in the waiting list (returning until when it may sleep).
    auto step(std::vector<envelope>& dead, handed_out& out, std::optional<clock::time_point>& until)
        -> step_kind;
    /// Removes the unsettled delivery `token` of this member; nullopt if it is not pending.
    auto take_unsettled(std::uint64_t token) -> std::optional<pending_message>;
    /// A failed delivery (nack, timeout, member gone): again after `delay`, or to the dead
    /// letters if it was the last allowed.
    void fail(pending_message p,
              clock::time_point now,
              clock::duration delay,
              std::vector<envelope>& dead);
    auto dead_letter(const pending_message& p, std::string_view reason) const -> envelope;
    void expire(clock::time_point now, std::vector<envelope>& dead);
    [[gnu::noinline]] auto wait_wake() -> task<result<void>>;

    memory_broker::state* s_;
    topic_state* t_;
    group_state* g_;
    bool closed_ = false;  // guarded by the topic's mu
};

void group_state::wake_one() {
    memory_member* m = waiting.front();
    waiting.pop_front();
    m->in_waiting = false;
    // Resumes nothing inline (the member waits inside a weft task: it is queued), so this is
    // safe under the topic's lock, and the member cannot be destroyed before it runs: closing it
    // takes this lock.
    m->wake.set();
}

void group_state::settle_waiters() {
    for (std::size_t ready = fresh.size() + due.size(); ready > 0 && !waiting.empty(); --ready) {
        wake_one();
    }
    if (waiting.empty()) {
        return;
    }
    const auto e = earliest();
    if (!e) {
        return;
    }
    for (const memory_member* m : waiting) {
        if (m->planned && *m->planned <= *e) {
            return;
        }
    }
    wake_one();  // it plans again, for the new earliest deadline
}

auto memory_member::dead_letter(const pending_message& p, std::string_view reason) const
    -> envelope {
    envelope e = *p.msg.env;
    e.topic = g_->config.dead_letter_topic;
    e.headers.push_back(header{"weftdeadletterreason", std::string(reason)});
    e.headers.push_back(header{"weftoriginaltopic", t_->name});
    e.headers.push_back(header{"weftoriginalgroup", g_->config.group});
    e.headers.push_back(header{"weftdeliveries", std::to_string(p.deliveries)});
    return e;
}

void memory_member::fail(pending_message p,
                         clock::time_point now,
                         clock::duration delay,
                         std::vector<envelope>& dead) {
    const std::uint32_t max = g_->config.max_deliveries;
    if (max != 0 && p.deliveries >= max) {
        dead.push_back(dead_letter(p, "max deliveries (" + std::to_string(max) + ") reached"));
        return;
    }
    if (delay > clock::duration::zero()) {
        g_->delayed.emplace(now + delay, std::move(p));
    } else {
        g_->due.push_back(std::move(p));
    }
}

void memory_member::expire(clock::time_point now, std::vector<envelope>& dead) {
    while (!g_->delayed.empty() && g_->delayed.begin()->first <= now) {
        g_->due.push_back(std::move(g_->delayed.begin()->second));
        g_->delayed.erase(g_->delayed.begin());
    }
    while (!g_->deadlines.empty() && g_->deadlines.front().first <= now) {
        const auto d = g_->deadlines.front();
        g_->deadlines.pop_front();
        if (!g_->live(d)) {
            continue;
        }
        pending_message p = g_->in_flight.take(*g_->in_flight.find(d.second));
        fail(std::move(p), now, clock::duration::zero(), dead);
    }
    g_->prune();
}

auto memory_member::step(std::vector<envelope>& dead,
                         handed_out& out,
                         std::optional<clock::time_point>& until) -> step_kind {
    std::lock_guard lock(t_->mu);
    if (closed_) {
        return step_kind::closed;
    }
    // >= clock::now(): nothing can be due unless the earliest deadline is at or before it.
    const clock::time_point base = deadline_base();
    if (const auto e = g_->earliest(); e && *e <= base) {
        expire(clock::now(), dead);
    }
    const bool away = s_->consumer_faults.load(std::memory_order_relaxed) &&
                      s_->away.load(std::memory_order_relaxed);
    std::deque<pending_message>* from = away                 ? nullptr
                                        : !g_->due.empty()   ? &g_->due
                                        : !g_->fresh.empty() ? &g_->fresh
                                                             : nullptr;
    if (from != nullptr) {
        pending_message p = std::move(from->front());
        from->pop_front();
        ++p.deliveries;
        if (s_->consumer_faults.load(std::memory_order_relaxed) &&
            memory_broker::state::take_one(s_->deliveries_to_duplicate)) {
            g_->due.push_front(p);  // handed out again next, as a redelivery
        }
        out.attempt = p.deliveries;
        out.env = p.msg.env;
        const auto deadline = base + g_->config.ack_wait;
        out.token = g_->in_flight.add(std::move(p), deadline, this);
        g_->deadlines.emplace_back(deadline, out.token);
        g_->settle_waiters();
        return step_kind::delivered;
    }
    until = away ? std::nullopt : g_->earliest();  // away: come_back() wakes it
    planned = until;
    in_waiting = true;
    g_->waiting.push_back(this);
    if (!away) {  // away, what is ready waits for come_back(), which wakes every member
        g_->settle_waiters();  // expiry may have made messages due for others too
    }
    return step_kind::wait;
}

auto memory_member::wait_wake() -> task<result<void>> { co_return co_await wake.wait(); }

auto memory_member::next() -> task<result<delivery>> {
    std::vector<envelope> dead;
    for (;;) {
        handed_out out;
        std::optional<clock::time_point> until;
        const step_kind k = step(dead, out, until);
        s_->store_dead_letters(dead);
        if (k == step_kind::delivered) {
            co_return delivery{shared_from_this(), out.token, std::move(out.env), out.attempt};
        }
        if (k == step_kind::closed) {
            co_return make_error_code(bus_errc::subscription_closed);
        }
        result<void> w{};
        if (until) {
            auto r = co_await with_timeout(*until - clock::now(), wait_wake());
            if (r) {
                w = *r;
            } else if (r.error() != std::errc::timed_out) {
                w = r.error();
            }
        } else {
            w = co_await wake.wait();
        }
        {
            std::lock_guard lock(t_->mu);
            if (in_waiting) {
                std::erase(g_->waiting, this);
                in_waiting = false;
            }
            planned.reset();
            if (!w) {
                g_->settle_waiters();  // pass on anything we were woken for
            }
        }
        if (!w) {
            co_return w.error();
        }
    }
}

auto memory_member::take_unsettled(std::uint64_t token) -> std::optional<pending_message> {
    auto* u = g_->in_flight.find(token);
    if (u == nullptr || u->member != this) {
        return std::nullopt;
    }
    pending_message p = g_->in_flight.take(*u);
    g_->prune();
    return p;
}

auto memory_member::ack(std::uint64_t token) -> result<void> {
    if (s_->consumer_faults.load(std::memory_order_relaxed)) {
        if (s_->away.load(std::memory_order_relaxed)) {
            return make_error_code(bus_errc::broker_unreachable);
        }
        if (memory_broker::state::take_one(s_->acks_to_drop)) {
            return {};  // answered, and lost
        }
        if (const auto d = s_->ack_delay_ms.load(std::memory_order_relaxed); d > 0) {
            auto late = [](std::shared_ptr<memory_member> self, std::uint64_t t,
                           std::chrono::milliseconds wait) -> task<void> {
                if ((co_await sleep_for(wait)).has_value()) {
                    std::lock_guard lock(self->t_->mu);
                    (void)self->take_unsettled(t);  // gone already: redelivered meanwhile
                }
            };
            (void)spawn(late(shared_from_this(), token, std::chrono::milliseconds(d)));
            return {};
        }
    }
    std::optional<pending_message> p;  // declared first: released after the lock
    std::lock_guard lock(t_->mu);
    p = take_unsettled(token);
    if (!p) {
        return make_error_code(bus_errc::not_pending);
    }
    return {};
}

auto memory_member::nack(std::uint64_t token, std::chrono::milliseconds delay) -> result<void> {
    if (s_->consumer_faults.load(std::memory_order_relaxed) &&
        s_->away.load(std::memory_order_relaxed)) {
        return make_error_code(bus_errc::broker_unreachable);
    }
    std::vector<envelope> dead;
    {
        std::lock_guard lock(t_->mu);
        auto p = take_unsettled(token);
        if (!p) {
            return make_error_code(bus_errc::not_pending);
        }
        fail(std::move(*p), clock::now(), delay, dead);
        g_->settle_waiters();
    }
    s_->store_dead_letters(dead);
    return {};
}

auto memory_member::term(std::uint64_t token, std::string_view reason) -> result<void> {
    std::vector<envelope> dead;
    {
        std::lock_guard lock(t_->mu);
        auto p = take_unsettled(token);
        if (!p) {
            return make_error_code(bus_errc::not_pending);
        }
        dead.push_back(dead_letter(*p, reason));
    }
    s_->store_dead_letters(dead);
    return {};
}

auto memory_member::in_progress(std::uint64_t token) -> result<void> {
    if (s_->consumer_faults.load(std::memory_order_relaxed) &&
        s_->away.load(std::memory_order_relaxed)) {
        return make_error_code(bus_errc::broker_unreachable);
    }
    std::lock_guard lock(t_->mu);
    auto* u = g_->in_flight.find(token);
    if (u == nullptr || u->member != this) {
        return make_error_code(bus_errc::not_pending);
    }
    u->deadline = deadline_base() + g_->config.ack_wait;
    g_->deadlines.emplace_back(u->deadline, token);
    g_->prune();  // the old entry went stale
    return {};
}

void memory_member::close() noexcept {
    std::vector<envelope> dead;
    {
        std::lock_guard lock(t_->mu);
        if (closed_) {
            return;
        }
        closed_ = true;
        if (in_waiting) {
            std::erase(g_->waiting, this);
            in_waiting = false;
        }
        wake.set();  // a next() in progress returns subscription_closed
        // Give this member's unsettled deliveries back, oldest message first.
        std::vector<pending_message> back = g_->in_flight.take_all(this);
        g_->prune();
        std::sort(back.begin(), back.end(),
                  [](const auto& a, const auto& b) { return a.msg.seq < b.msg.seq; });
        const auto now = clock::now();
        for (auto& p : back) {
            fail(std::move(p), now, clock::duration::zero(), dead);
        }
        g_->settle_waiters();
    }
    s_->store_dead_letters(dead);
}

}  // namespace

memory_broker::memory_broker(memory_broker_options options)
    : state_(std::make_unique<state>(options)) {}

memory_broker::~memory_broker() = default;

auto memory_broker::features() const noexcept -> backend_features {
    return backend_features{
        .durable = false, .deduplicates_ids = true, .can_pause = true, .returns_on_close = true};
}

auto memory_broker::make_producer(publish_sink& sink, std::uint32_t /*max_pending*/)
    -> result<std::unique_ptr<backend_producer>> {
    std::unique_ptr<backend_producer> p = std::make_unique<memory_producer>(*state_, sink);
    return p;
}

auto memory_broker::make_consumer(consumer_config config)
    -> task<result<std::shared_ptr<backend_consumer>>> {
    topic_state& t = state_->topic(config.topic);
    std::shared_ptr<backend_consumer> m;
    {
        std::lock_guard lock(t.mu);
        auto it = t.groups.find(config.group);
        if (it == t.groups.end()) {
            auto g = std::make_unique<group_state>();
            for (const stored_message& sm : t.retained) {
                g->fresh.push_back(pending_message{sm, 0});
            }
            std::string name = config.group;
            g->config = std::move(config);
            it = t.groups.emplace(std::move(name), std::move(g)).first;
        }
        m = std::make_shared<memory_member>(*state_, t, *it->second);
    }
    co_return m;
}

void memory_broker::pause() {
    std::lock_guard lock(state_->pause_mu);
    state_->paused.store(true, std::memory_order_release);
}

void memory_broker::resume() {
    // Under pause_mu throughout, with `paused` still set: a publish that comes meanwhile queues
    // behind the held ones, so the order of arrival is kept.
    std::lock_guard lock(state_->pause_mu);
    while (!state_->held.empty()) {
        held_publish h = std::move(state_->held.front());
        state_->held.pop_front();
        h.sink->complete(h.slot, state_->store(std::move(h.env), /*dedupe=*/true));
    }
    state_->paused.store(false, std::memory_order_release);
}

void memory_broker::set_publish_fault(std::function<std::error_code(const envelope&)> fault) {
    std::lock_guard lock(state_->fault_mu);
    state_->fault = std::move(fault);
    state_->refresh_faulty();
}

void memory_broker::drop_acks(std::uint32_t n) {
    state_->acks_to_drop.store(n, std::memory_order_relaxed);
    state_->consumer_faults.store(true, std::memory_order_relaxed);
}

void memory_broker::delay_acks(std::chrono::milliseconds d) {
    state_->ack_delay_ms.store(d.count(), std::memory_order_relaxed);
    state_->consumer_faults.store(true, std::memory_order_relaxed);
}

void memory_broker::duplicate_deliveries(std::uint32_t n) {
    state_->deliveries_to_duplicate.store(n, std::memory_order_relaxed);
    state_->consumer_faults.store(true, std::memory_order_relaxed);
}

void memory_broker::go_away() {
    std::lock_guard lock(state_->fault_mu);
    state_->away.store(true, std::memory_order_relaxed);
    state_->consumer_faults.store(true, std::memory_order_relaxed);
    state_->refresh_faulty();
}

void memory_broker::come_back() {
    {
        std::lock_guard lock(state_->fault_mu);
        state_->away.store(false, std::memory_order_relaxed);
        state_->refresh_faulty();
    }
    std::vector<topic_state*> topics;
    {
        std::lock_guard lock(state_->topics_mu);
        for (auto& [name, t] : state_->topics) {
            topics.push_back(t.get());
        }
    }
    for (topic_state* t : topics) {
        std::lock_guard lock(t->mu);
        for (auto& [name, g] : t->groups) {
            // Unsettled deliveries are handed out again first, oldest message first.
            std::vector<pending_message> back = g->in_flight.take_all(nullptr);
            g->deadlines.clear();
            std::sort(back.begin(), back.end(),
                      [](const auto& a, const auto& b) { return a.msg.seq < b.msg.seq; });
            for (auto it = back.rbegin(); it != back.rend(); ++it) {
                g->due.push_front(std::move(*it));
            }
            // Every waiting member looks again: each parked without a planned wake-up.
            while (!g->waiting.empty()) {
                g->wake_one();
            }
        }
    }
}

auto memory_broker::stored(std::string_view topic) const -> std::uint64_t {
    const topic_state* t = state_->find_topic(topic);
    if (t == nullptr) {
        return 0;
    }
    std::lock_guard lock(t->mu);
    return t->last_seq;
}

namespace {

class memory_dead_letters final : public dead_letters {
public:
    memory_dead_letters(memory_broker::state& s, std::string topic)
        : s_(&s), topic_(std::move(topic)) {}

    auto list(std::size_t limit) -> result<std::vector<dead_letter>> override {
        topic_state& t = s_->topic(topic_);
        std::vector<dead_letter> out;
        std::lock_guard lock(t.mu);
        for (const stored_message& m : t.retained) {
            if (out.size() == limit) {
                break;
            }
            out.push_back(make(m));
        }
        return out;
    }
    auto show(std::string_view ref) -> result<dead_letter> override {
        topic_state& t = s_->topic(topic_);
        std::lock_guard lock(t.mu);
        auto it = find(t, ref);
        if (it == t.retained.end()) {
            return std::make_error_code(std::errc::no_such_file_or_directory);
        }
        return make(*it);
    }
    auto requeue(std::string_view ref) -> result<void> override {
        std::shared_ptr<const envelope> dead;
        if (auto r = take(ref, dead); !r) {
            return r;
        }
        (void)s_->store(original_of(*dead), /*dedupe=*/false);
        return {};
    }
    auto drop(std::string_view ref) -> result<void> override {
        std::shared_ptr<const envelope> dead;
        return take(ref, dead);
    }

private:
    static auto make(const stored_message& m) -> dead_letter {
        const header* reason = m.env->find_header("weftdeadletterreason");
        const header* topic = m.env->find_header("weftoriginaltopic");
        return {.ref = std::to_string(m.seq),
                .message = *m.env,
                .reason = reason != nullptr ? reason->value : std::string(),
                .topic = topic != nullptr ? topic->value : std::string()};
    }
    static auto find(topic_state& t, std::string_view ref) -> std::deque<stored_message>::iterator {
        std::uint64_t seq = 0;
        const auto [p, ec] = std::from_chars(ref.data(), ref.data() + ref.size(), seq);
        if (ec != std::errc{} || p != ref.data() + ref.size()) {
            return t.retained.end();
        }
        return std::find_if(t.retained.begin(), t.retained.end(),
                            [seq](const stored_message& m) { return m.seq == seq; });
    }
    auto take(std::string_view ref, std::shared_ptr<const envelope>& out) -> result<void> {
        topic_state& t = s_->topic(topic_);
        std::lock_guard lock(t.mu);
        auto it = find(t, ref);
        if (it == t.retained.end()) {
            return std::make_error_code(std::errc::no_such_file_or_directory);
        }
        out = it->env;
        t.retained.erase(it);
        return {};
    }

    memory_broker::state* s_;
    std::string topic_;
};

}  // namespace

auto memory_broker::open_dead_letters(std::string dead_letter_topic)
    -> std::unique_ptr<dead_letters> {
    return std::make_unique<memory_dead_letters>(*state_, std::move(dead_letter_topic));
}

}  // namespace weft::bus
