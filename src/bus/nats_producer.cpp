#include "nats_producer.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "envelope_id_text.hpp"
#include "publisher_completion_run.hpp"
#include "stream_names.hpp"
#include "weft/bus/envelope_codec.hpp"
#include "weft/bus/errc.hpp"
#include "weft/core/join_handle.hpp"
#include "weft/io/fd_wait.hpp"
#include "weft/io/reactor.hpp"
#include "weft/sync/channel.hpp"

namespace weft::bus {
namespace {

/// natsMsg* -> slot while the message is in flight: open addressing with linear probing over
/// a power-of-two table at least twice max_pending (so a probe ends within a few steps), with
/// backward-shift deletion (no tombstones). Allocated once; guarded by the caller's lock.
class msg_slot_table {
public:
    explicit msg_slot_table(std::uint32_t max_pending)
        : mask_(std::bit_ceil(std::size_t{max_pending} * 2) - 1), cells_(mask_ + 1) {}

    void put(const natsMsg* m, std::uint32_t slot) noexcept {
        std::size_t i = home(m);
        while (cells_[i].msg != nullptr) {
            i = (i + 1) & mask_;
        }
        cells_[i] = {m, slot};
    }
    /// The slot of `m`, removed; false when `m` is not here.
    auto take(const natsMsg* m, std::uint32_t& slot) noexcept -> bool {
        std::size_t i = home(m);
        while (cells_[i].msg != m) {
            if (cells_[i].msg == nullptr) {
                return false;
            }
            i = (i + 1) & mask_;
        }
        slot = cells_[i].slot;
        // Backward shift: move later members of the probe run into the hole when their home
        // is not between the hole and them.
        std::size_t hole = i;
        for (std::size_t j = (i + 1) & mask_; cells_[j].msg != nullptr; j = (j + 1) & mask_) {
            const std::size_t h = home(cells_[j].msg);
            if (((j - h) & mask_) >= ((j - hole) & mask_)) {
                cells_[hole] = cells_[j];
                hole = j;
            }
        }
        cells_[hole] = {};
        return true;
    }

private:
    struct cell {
        const natsMsg* msg = nullptr;
        std::uint32_t slot = 0;
    };
    auto home(const natsMsg* m) const noexcept -> std::size_t {
        return static_cast<std::size_t>((reinterpret_cast<std::uintptr_t>(m) >> 4) *
                                        0x9E3779B97F4A7C15ULL) &
               mask_;
    }
    std::size_t mask_;
    std::vector<cell> cells_;
};

}  // namespace

struct nats_producer::state {
    state(std::shared_ptr<nats_backend::connection> c, publish_sink& s, std::uint32_t max)
        : conn(std::move(c)),
          sink(&s),
          max_pending(max),
          pool(conn->options.ack_path == nats_ack_path::handler_pool),
          outcomes(std::make_unique<std::optional<result<ack>>[]>(max)),
          in_flight(max),
          acks(max),
          run(max) {
        completed.reserve(max);
        draining.reserve(max);
        incoming.reserve(max);
        arrived.reserve(max);
    }
    state(const state&) = delete;
    auto operator=(const state&) -> state& = delete;
    ~state() {
        // the runtime stopped before they could be sent
        for (auto& h : held) {
            natsMsg_Destroy(h.msg);
        }
        for (auto& h : incoming) {
            natsMsg_Destroy(h.msg);
        }
        if (js != nullptr) {
            jsCtx_Destroy(js);
        }
        if (efd >= 0) {
            ::close(efd);
        }
    }

    std::shared_ptr<nats_backend::connection> conn;
    publish_sink* sink;
    stream_names names;  // acks' stream names, one per stream
    const std::uint32_t max_pending;
    jsCtx* js = nullptr;  // this producer's context: its ack handler's closure is this state
    int efd = -1;         // eventfd: written by on_ack for the first slot of a batch
    int max_payload = 0;
    const bool pool;  // nats_ack_path::handler_pool
    // outcomes[slot]: written by on_ack before the slot is appended to `completed` (under
    // `mu`); read by the drain task after it took the slot from `completed` (under `mu`):
    // the lock orders the two.
    std::unique_ptr<std::optional<result<ack>>[]> outcomes;

    weft::detail::spin_lock mu;
    msg_slot_table in_flight;              // guarded by mu
    std::uint32_t in_cnats = 0;            // guarded by mu: |in_flight|
    std::vector<std::uint32_t> completed;  // guarded by mu; capacity max_pending
    std::vector<std::uint32_t> draining;   // the drain task's; swapped with completed under mu

    // handler_pool only: on_ack sends each outcome here (under mu, which the drain task takes
    // once before it ends, so no on_ack is inside the channel when the state goes); the ack
    // handlers receive them one at a time. Capacity max_pending: try_send never finds it full
    // (|acks| <= outstanding <= max_pending). Closed by the drain task as it ends, which ends
    // the handlers.
    struct ack_item {
        std::uint32_t slot;
        result<ack> outcome;
    };
    channel<ack_item> acks;
    completion_run run;  // the drain task's: the awaited publishes one batch completed
    // |held| as of the last change, for the ack handlers, which pump only when it is not 0.
    // seq_cst, stored after the held messages are in `held` and before pump looks at
    // in_cnats (under mu); on_ack lowers in_cnats under mu before its handler loads this. So
    // either the handler sees the count and pumps, or pump sees in_cnats lowered and sends:
    // the mutex orders the two sides, and a held message is never stranded.
    std::atomic<std::size_t> held_count{0};

    // Messages not yet handed to cnats, oldest first. A message is held when others are held
    // (order), when the connection is down, or when the buffer has no room for it while some
    // of ours are in cnats. Room: their acks wake the drain task, which sends the held ones
    // as room appears; so while connected, held non-empty => in_cnats > 0 after every start
    // and every drain step, and a held message is never stranded. Down: the drain task looks
    // again every `reconnect_poll` and fails those held past their deadline with
    // broker_unreachable; they never reach cnats's reconnect buffer, so a publish reported
    // failed is never stored later. |held| <= outstanding <= max_pending.
    struct held_msg {
        natsMsg* msg;
        std::uint32_t slot;
        std::array<char, id_text_size + 1> id;  // Nats-Msg-Id: the envelope id's text, NUL
        std::size_t wire;
        std::chrono::steady_clock::time_point deadline;  // publish_timeout after start
    };
    std::mutex send_mu;         // orders this producer's sends; guards held and arrived
    std::deque<held_msg> held;  // guarded by send_mu

    // Started messages on their way to `held`. start() appends here and sends only when it
    // gets send_mu without waiting (try_lock); otherwise the holder sends them: pump()
    // looks at `incoming` again after every unlock, so a message appended while another
    // thread held send_mu is taken by that thread or by the next one to get the lock, never
    // stranded (the append and the holder's look are ordered by incoming_mu). This keeps the
    // runtime's workers from sleeping on send_mu when several tasks publish at once (1,000
    // awaiting tasks on 2 workers), and keeps one sender at a time. |incoming| <= max_pending.
    weft::detail::spin_lock incoming_mu;
    std::vector<held_msg> incoming;  // guarded by incoming_mu; capacity max_pending
    std::vector<held_msg> arrived;   // guarded by send_mu; swapped with incoming
    static constexpr std::chrono::milliseconds reconnect_poll{50};

    [[nodiscard]] auto connected() const noexcept -> bool {
        return natsConnection_Status(conn->nc) == NATS_CONN_STATUS_CONNECTED;
    }

    // Started and not yet handed to the sink. Incremented by start, decremented by the drain
    // task (or by start itself for an inline failure); the drain task ends once closed is set
    // and this is 0. seq_cst on both: a close() and the last decrement must not both miss
    // each other (the wake-up is the eventfd write in close(), after the store).
    std::atomic<std::uint32_t> outstanding{0};
    std::atomic<bool> closed{false};

    void wake() const noexcept {
        const std::uint64_t one = 1;
        [[maybe_unused]] const auto n = ::write(efd, &one, sizeof(one));
    }

    /// Inline failure (the message never reached cnats): straight to the sink.
    void fail_now(std::uint32_t slot, std::error_code ec) {
        outstanding.fetch_sub(1);
        sink->complete(slot, ec);
    }

    /// Whether cnats's write buffer takes `wire` more bytes with an eighth of it to spare
    /// (acks, pings and pull requests of the same connection go through it too), so that the
    /// publish is a memory copy and never a socket write on the caller's thread.
    [[nodiscard]] auto has_room(std::size_t wire) const noexcept -> bool {
        const int buffered = natsConnection_Buffered(conn->nc);
        const auto b = static_cast<std::uint64_t>(buffered < 0 ? 0 : buffered);
        std::uint64_t seen = conn->max_buffered.load(std::memory_order_relaxed);
        while (b > seen &&
               !conn->max_buffered.compare_exchange_weak(seen, b, std::memory_order_relaxed)) {
        }
        const auto cap = static_cast<std::uint64_t>(conn->options.io_buffer_bytes);
        return b + wire + cap / 8 <= cap;
    }
    [[nodiscard]] auto nothing_in_cnats() noexcept -> bool {
        std::lock_guard lock(mu);
        return in_cnats == 0;
    }

    /// Hands `h` to cnats; the error when it refused it at once (the slot is then the caller's
    /// to fail). Called with send_mu held.
    auto send(held_msg& h) -> std::error_code {
        if (!has_room(h.wire)) {
            conn->publish_stalls.fetch_add(1, std::memory_order_relaxed);
        }
        jsPubOptions po;
        jsPubOptions_Init(&po);
        po.MsgId = h.id.data();
        po.MaxWait = conn->options.publish_timeout.count();
        const natsMsg* key = h.msg;
        {
            std::lock_guard lock(mu);
            in_flight.put(key, h.slot);  // before the publish: the ack may come first
            ++in_cnats;
        }
        if (const natsStatus s = js_PublishMsgAsync(js, &h.msg, &po); s != NATS_OK) {
            bool ours = false;
            {
                std::lock_guard lock(mu);
                std::uint32_t taken = 0;
                ours = in_flight.take(key, taken);
                if (ours) {
                    --in_cnats;
                }
            }
            natsMsg_Destroy(h.msg);  // no effect when cnats took it
            h.msg = nullptr;
            if (ours) {
                return nats_error(s);
            }
        }
        h.msg = nullptr;  // cnats owns it
        return {};
    }
};

namespace {

void on_ack(jsCtx* /*js*/, natsMsg* msg, jsPubAck* pa, jsPubAckErr* pae, void* closure) {
    auto* st = static_cast<nats_producer::state*>(closure);
    result<ack> outcome = make_error_code(bus_errc::broker_error);
    if (pa != nullptr) {
        ack a;
        a.stream = st->names.get(pa->Stream != nullptr ? pa->Stream : "");
        a.sequence = pa->Sequence;
        a.duplicate = pa->Duplicate;
        outcome = std::move(a);
    } else if (pae != nullptr) {
        outcome = nats_error(pae->Err, pae->ErrCode);
    }
    {
        // Everything under the lock, the wake-up included: once the drain task can take this
        // slot, it may complete the last outcome and free the state, so nothing touches `st`
        // after the unlock.
        std::lock_guard lock(st->mu);
        std::uint32_t slot = 0;
        if (st->in_flight.take(msg, slot)) {
            --st->in_cnats;
            if (st->pool) {
                // The channel holds max_pending: never full, so never refused.
                [[maybe_unused]] const auto sent =
                    st->acks.try_send(nats_producer::state::ack_item{slot, std::move(outcome)});
            } else {
                st->outcomes[slot].emplace(std::move(outcome));
                const bool first = st->completed.empty();
                st->completed.push_back(slot);  // never reallocates: <= max_pending outstanding
                if (first) {
                    st->conn->wakes.fetch_add(1, std::memory_order_relaxed);
                    st->wake();
                }
            }
        }
    }
    natsMsg_Destroy(msg);
}

/// Moves what start() appended to `held`, then sends the held messages the write buffer has
/// room for (the oldest at least, when none of ours is left in cnats to wake us again); while
/// disconnected, fails those past their deadline and keeps the rest. `wait_for_lock`: the
/// drain task waits for send_mu; start() only tries it (the holder sends what it appended).
/// True when some are held for the connection to come back.
auto pump(nats_producer::state& st, bool wait_for_lock) -> bool {
    std::vector<std::pair<std::uint32_t, std::error_code>> failed;
    bool waiting = false;
    for (;;) {
        if (wait_for_lock) {
            st.send_mu.lock();
            wait_for_lock = false;
        } else if (!st.send_mu.try_lock()) {
            break;  // the holder looks at `incoming` after its unlock
        }
        {
            std::lock_guard lock(st.send_mu, std::adopt_lock);
            {
                std::lock_guard in(st.incoming_mu);
                st.arrived.swap(st.incoming);
            }
            const std::size_t arrived = st.arrived.size();
            for (auto& h : st.arrived) {
                st.held.push_back(std::move(h));
            }
            st.arrived.clear();
            st.held_count.store(st.held.size());  // before in_cnats is looked at (see state)
            const bool connected = st.connected();
            // Read only while disconnected (deadlines): one clock reading less per message.
            const auto now = connected ? std::chrono::steady_clock::time_point{}
                                       : std::chrono::steady_clock::now();
            waiting = false;
            while (!st.held.empty()) {
                auto& h = st.held.front();
                if (!connected) {
                    // Oldest first and all with the same timeout: the first not yet due ends
                    // it.
                    if (h.deadline > now) {
                        waiting = true;
                        break;
                    }
                    natsMsg_Destroy(h.msg);
                    failed.emplace_back(h.slot, make_error_code(bus_errc::broker_unreachable));
                } else if (st.has_room(h.wire) || st.nothing_in_cnats()) {
                    if (auto ec = st.send(h)) {
                        failed.emplace_back(h.slot, ec);
                    }
                } else {
                    break;
                }
                st.held.pop_front();
            }
            st.held_count.store(st.held.size());
            if (connected) {
                st.conn->publishes_held.fetch_add(std::min(arrived, st.held.size()),
                                                  std::memory_order_relaxed);
            }
        }
        std::lock_guard in(st.incoming_mu);
        if (st.incoming.empty()) {
            break;
        }
    }
    for (const auto& [slot, ec] : failed) {
        st.fail_now(slot, ec);
    }
    return waiting;
}

auto drain(std::shared_ptr<nats_producer::state> st) -> task<void> {
    bool waiting = false;  // messages held for the connection: look again every reconnect_poll
    for (;;) {
        // NOTE: one co_await per statement; g++ 12 crashes on a co_await of a conditional
        // expression of two tasks.
        result<void> r;
        if (waiting) {
            r = co_await wait_readable(st->efd, nats_producer::state::reconnect_poll);
        } else {
            r = co_await wait_readable(st->efd);
        }
        if (!r && r.error() != std::errc::timed_out) {
            co_return;  // the runtime is shutting down
        }
        std::uint64_t count = 0;
        [[maybe_unused]] const auto n = ::read(st->efd, &count, sizeof(count));
        {
            std::lock_guard lock(st->mu);
            st->draining.swap(st->completed);
        }
        {
            // The awaited publishes this batch completes are resumed below, in order, on this
            // worker (completion_run), rather than woken one by one onto the deques, where the
            // other worker steals about half of them (docs/design/decisions.md: Kafka's awaited
            // publishes, the same hand-off).
            const completion_run::collecting_scope collecting{st->run};
            for (const std::uint32_t slot : st->draining) {
                result<ack> outcome = std::move(*st->outcomes[slot]);
                st->outcomes[slot].reset();
                st->outstanding.fetch_sub(1);
                st->sink->complete(slot, std::move(outcome));
            }
        }
        st->conn->acks.fetch_add(st->draining.size(), std::memory_order_relaxed);
        st->draining.clear();
        waiting = pump(*st, /*wait_for_lock=*/true);  // held messages go before new ones
        st->run.resume_all();
        if (st->closed.load() && st->outstanding.load() == 0) {
            // An on_ack that handed over the last outcome may still be inside its lock (in
            // the channel, with the pool): wait it out before the state can go.
            { std::lock_guard lock(st->mu); }
            st->acks.close();  // ends the ack handlers (handler_pool)
            co_return;
        }
    }
}

/// handler_pool: one of the fixed set of tasks completing acks, one at a time (the seed's ack
/// worker). Ends when the drain task closes the channel.
auto handle_acks(std::shared_ptr<nats_producer::state> st) -> task<void> {
    for (;;) {
        auto item = st->acks.try_recv();
        if (!item && item.error() == std::errc::operation_would_block) {
            st->conn->wakes.fetch_add(1, std::memory_order_relaxed);  // a wait, ended by a wake
            item = co_await st->acks.recv();
        }
        if (!item) {
            co_return;  // closed (the producer is done) or the runtime is shutting down
        }
        st->outstanding.fetch_sub(1);
        st->sink->complete(item->slot, std::move(item->outcome));
        st->conn->acks.fetch_add(1, std::memory_order_relaxed);
        if (st->held_count.load() != 0) {
            pump(*st, /*wait_for_lock=*/true);
        }
        if (st->closed.load() && st->outstanding.load() == 0) {
            st->wake();  // the drain task ends the producer
        }
    }
}

}  // namespace

auto nats_producer::make(std::shared_ptr<nats_backend::connection> conn,
                         publish_sink& sink,
                         std::uint32_t max_pending) -> result<std::unique_ptr<backend_producer>> {
    // The drain task needs a reactor on this thread's runtime.
    try {
        (void)current_io_backend();
    } catch (const std::logic_error&) {
        return std::make_error_code(std::errc::operation_not_supported);
    }
    auto st = std::make_shared<state>(conn, sink, max_pending);
    st->efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (st->efd < 0) {
        return std::error_code(errno, std::system_category());
    }
    st->max_payload = static_cast<int>(natsConnection_GetMaxPayload(conn->nc));
    jsOptions jo;
    jsOptions_Init(&jo);
    // Above the publisher's bound, so cnats never stalls a publish (StallWait) on its own.
    jo.PublishAsync.MaxPending = static_cast<int64_t>(max_pending) * 2 + 16;
    jo.PublishAsync.AckHandler = &on_ack;
    jo.PublishAsync.AckHandlerClosure = st.get();
    jo.Wait = conn->options.publish_timeout.count();
    if (const natsStatus s = natsConnection_JetStream(&st->js, conn->nc, &jo); s != NATS_OK) {
        return nats_error(s);
    }
    spawn(drain(st)).detach();
    if (st->pool) {
        for (unsigned i = 0; i < std::max(1U, conn->options.ack_handlers); ++i) {
            spawn(handle_acks(st)).detach();
        }
    }
    return std::unique_ptr<backend_producer>(new nats_producer(std::move(st)));
}

void nats_producer::start(envelope env, std::uint32_t slot) {
    state& st = *st_;
    st.outstanding.fetch_add(1);
    const wire_options& wire = st.conn->options.wire;
    natsMsg* m = nullptr;
    std::size_t body_and_headers = 0;
    if (const std::error_code ec =
            make_nats_message(env, wire, st.max_payload, m, body_and_headers)) {
        st.fail_now(slot, ec);
        return;
    }
    // What the message takes in the write buffer: HPUB line (subject, reply inbox, sizes),
    // the Nats-Msg-Id header, the payload; 128 covers all but subject, id and payload.
    const std::size_t wire_size = body_and_headers + env.topic.size() + id_text_size + 128;
    state::held_msg h{m,
                      slot,
                      {},
                      wire_size,
                      std::chrono::steady_clock::now() + st.conn->options.publish_timeout};
    id_text(env.id, h.id.data());  // the last byte stays NUL
    {
        std::lock_guard in(st.incoming_mu);
        st.incoming.push_back(std::move(h));  // never reallocates: <= max_pending outstanding
    }
    if (pump(st, /*wait_for_lock=*/false)) {
        // Held for the connection: the drain task looks again every reconnect_poll once woken.
        st.wake();
    }
}

void nats_producer::close() noexcept {
    st_->closed.store(true);
    st_->wake();  // the drain task checks whether it may end
}

nats_producer::~nats_producer() { close(); }

}  // namespace weft::bus
