#include "kafka_producer.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "envelope_id_text.hpp"
#include "publisher_completion_run.hpp"
#include "stream_names.hpp"
#include "weft/bus/envelope_codec.hpp"
#include "weft/bus/errc.hpp"
#include "weft/core/join_handle.hpp"
#include "weft/io/fd_wait.hpp"
#include "weft/io/reactor.hpp"

namespace weft::bus {

static_assert(sizeof(void*) >= 8, "a message's opaque carries its start order and its slot");

struct kafka_producer::state final : kafka_fatal_target {
    state(std::shared_ptr<kafka_backend::connection> c, publish_sink& s, std::uint32_t pending)
        : conn(std::move(c)),
          sink(&s),
          max_pending(pending),
          run(pending),
          background(conn->options.ack_path == kafka_ack_path::background_thread) {
        if (background) {
            outcomes = std::make_unique<std::optional<result<ack>>[]>(max_pending);
            ready.reserve(max_pending);
            taking.reserve(max_pending);
        }
    }
    state(const state&) = delete;
    auto operator=(const state&) -> state& = delete;
    ~state() {
        destroy_clients();
        for (auto& h : held) {  // the runtime stopped before they could be produced
            if (h.headers != nullptr) {
                rd_kafka_headers_destroy(h.headers);
            }
        }
        if (efd >= 0) {
            ::close(efd);
        }
    }

    /// One librdkafka producer and its main queue (delivery reports), and the handle of the
    /// topic it produced to last (made on the first message to a topic, replaced when the topic
    /// changes; rd_kafka_topic_t is reference counted, so messages in flight keep theirs).
    struct client {
        rd_kafka_t* rk = nullptr;
        rd_kafka_queue_t* queue = nullptr;
        rd_kafka_topic_t* rkt = nullptr;  // guarded by rk_mu, as the client itself
        std::string rkt_name;
    };

    /// Under rk_mu: produces on `c`, through its handle of `topic`.
    static auto produce_on(client& c,
                           const char* topic,
                           std::string_view key,
                           std::string_view value,
                           rd_kafka_headers_t* headers,
                           void* opaque) -> rd_kafka_resp_err_t {
        if (c.rkt == nullptr || c.rkt_name != topic) {
            if (c.rkt != nullptr) {
                rd_kafka_topic_destroy(c.rkt);
            }
            c.rkt = rd_kafka_topic_new(c.rk, topic, nullptr);
            c.rkt_name = topic;
            // nullptr (an invalid name): produced by name below, refused there with the reason
        }
        return kafka_produce(c.rk, topic, key, value, headers, opaque, c.rkt);
    }

    std::shared_ptr<kafka_backend::connection> conn;
    publish_sink* sink;
    stream_names names;  // acks' topic names, one per topic
    const std::uint32_t max_pending;
    completion_run run;     // the drain task's: the awaited publishes one pass completed
    const bool background;  // kafka_ack_path::background_thread
    int efd = -1;  // eventfd: written by librdkafka (every client's queue), read by the drain task

    // background_thread only. librdkafka's background thread (one per client) writes a
    // message's outcome into outcomes[slot] and then appends the batch's slots to `ready`
    // under ready_mu; it writes `efd` when `ready` was empty (an edge, as the queue's own
    // signal). The drain task swaps
    // `ready` with `taking` under ready_mu and completes the slots in `taking`. No allocation
    // per message: both vectors hold max_pending from the start, and a slot is in at most one
    // of them (a slot is reused only after the sink had it).
    // Invariant: |ready| + |taking| <= outstanding <= max_pending.
    std::unique_ptr<std::optional<result<ack>>[]> outcomes;  // [slot]; ready_mu hands it over
    std::mutex ready_mu;
    std::vector<std::uint32_t> ready;   // guarded by ready_mu
    std::vector<std::uint32_t> taking;  // the drain task's

    // The producer publishes go to, and the ones a fatal error broke that still report. A
    // client is destroyed by the drain task only (on the closer thread), so the drain task
    // may poll the queues it copied out under the lock without holding it.
    std::mutex rk_mu;
    client current;               // guarded by rk_mu
    std::vector<client> retired;  // guarded by rk_mu

    // Order across a fatal error. Each message's opaque carries its start order (`next_seq`,
    // the upper 32 bits) beside its slot (the lower 32). From the moment a client is found
    // broken (`recovering`) until every retired client has reported all it had, nothing is
    // produced: the broken client's failed messages (copied out of their reports) and every
    // message started meanwhile wait in `held`. Then `held` is produced on the current client
    // in start order, and sends go on as before. So a key's later messages never reach the
    // new client before its earlier ones. A fatal error of the new client while `held` is
    // produced retires it too and recovery starts again: what it had taken comes back failed
    // with its old start order and is sorted in front of the rest.
    // Invariant: |held| <= outstanding <= max_pending; !recovering => held is empty.
    struct held_message {
        std::string topic;
        std::string key;
        std::string value;
        rd_kafka_headers_t* headers;  // owned
        void* opaque;                 // start order and slot
        bool resend;                  // failed on a broken client (counted in `resent`)
    };
    bool recovering = false;         // guarded by rk_mu
    std::vector<held_message> held;  // guarded by rk_mu
    std::uint32_t next_seq = 0;      // guarded by rk_mu; wraps (compared as a difference)

    // Started and not yet handed to the sink. Incremented by start, decremented by the drain
    // task (or by start itself for an inline failure); the drain task ends once closed is set
    // and this is 0. seq_cst on both: a close() and the last decrement must not both miss each
    // other (the wake-up is the eventfd write in close(), after the store).
    std::atomic<std::uint32_t> outstanding{0};
    std::atomic<bool> closed{false};
    std::string last_topic;  // guarded by rk_mu: the topic of the previous produce

    /// The message's headers: `weft-id` = the envelope id's text.
    static auto id_headers(const std::array<char, id_text_size>& id) -> rd_kafka_headers_t* {
        rd_kafka_headers_t* headers = rd_kafka_headers_new(1);
        rd_kafka_header_add(headers, "weft-id", -1, id.data(), static_cast<ssize_t>(id.size()));
        return headers;
    }

    /// Under rk_mu: produces one started message, taking `headers`. Its failure,
    /// if any, goes to `failed` (the caller completes it after the unlock).
    void produce_started_locked(
        std::string_view topic,
        std::string_view key,
        std::string_view value,
        rd_kafka_headers_t* headers,
        std::uint32_t slot,
        std::vector<std::pair<std::uint32_t, rd_kafka_resp_err_t>>& failed) {
        if (topic != last_topic) {  // most publishers use one topic: no set lookup then
            conn->ensure_topic_async(topic);
            last_topic = topic;
        }
        const auto order = std::uintptr_t{next_seq++} << 32;
        // last_topic: `topic` NUL-terminated (the same characters).
        const auto e = produce_locked(last_topic.c_str(), key, value, headers,
                                      reinterpret_cast<void*>(order | slot));
        if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
            failed.emplace_back(slot, e);
        }
    }

    void wake() const noexcept {
        const std::uint64_t one = 1;
        [[maybe_unused]] const auto n = ::write(efd, &one, sizeof(one));
    }
    void fail_now(std::uint32_t slot, std::error_code ec) {
        outstanding.fetch_sub(1);
        sink->complete(slot, ec);
    }

    /// A new librdkafka producer whose reports signal `efd`.
    auto make_client() -> result<client> {
        const auto& o = conn->options;
        rd_kafka_conf_t* conf = nullptr;
        try {
            conf = kafka_conf(
                o, {{"enable.idempotence", "true"},
                    {"acks", "all"},
                    {"linger.ms", std::to_string(o.linger.count())},
                    {"partitioner", "murmur2_random"},
                    {"message.timeout.ms", std::to_string(o.publish_timeout.count())},
                    // Above the publisher's bound: a produce never finds the queue full.
                    {"queue.buffering.max.messages", std::to_string(max_pending * 2 + 1024)},
                    {"queue.buffering.max.kbytes", "1048576"},
                    {"batch.num.messages", std::to_string(batch_messages())}});
        } catch (const std::system_error& e) {
            return e.code();
        }
        rd_kafka_conf_set_events(conf, RD_KAFKA_EVENT_DR);
        if (background) {
            // The main queue is forwarded to the background queue (below); every event goes
            // to on_background_event on librdkafka's background thread. `this` outlives the
            // client: destroy() joins that thread before the state goes.
            rd_kafka_conf_set_opaque(conf, this);
            rd_kafka_conf_set_background_event_cb(conf, &on_background_event);
        }
        char err[512];
        client c;
        c.rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
        if (c.rk == nullptr) {
            rd_kafka_conf_destroy(conf);
            return make_error_code(bus_errc::broker_error);
        }
        c.queue = rd_kafka_queue_get_main(c.rk);
        if (background) {
            rd_kafka_queue_t* bg = rd_kafka_queue_get_background(c.rk);
            rd_kafka_queue_forward(c.queue, bg);
            rd_kafka_queue_destroy(bg);
        } else {
            const std::uint64_t one = 1;  // what librdkafka writes: an eventfd takes 8 bytes
            rd_kafka_queue_io_event_enable(c.queue, efd, &one, sizeof(one));
        }
        return c;
    }

    [[nodiscard]] auto batch_messages() const -> std::uint32_t {
        const auto configured = conn->options.batch_messages;
        return configured != 0 ? configured : std::clamp<std::uint32_t>(max_pending / 4, 1, 10'000);
    }

    /// Under rk_mu: `broken` has a fatal error; unless it was replaced already, a new client
    /// takes its place and it retires (it still reports what it had in flight). false when
    /// no new client could be made.
    auto replace_locked(rd_kafka_t* broken) -> bool {
        if (current.rk != broken) {
            return current.rk != nullptr;
        }
        auto c = make_client();
        if (!c) {
            return false;
        }
        retired.push_back(current);
        current = *c;
        recovering = true;
        conn->producers_recreated.fetch_add(1, std::memory_order_relaxed);
        return true;
    }

    /// Under rk_mu: produces on the current client, or holds the message while a fatal error
    /// is being recovered from (a refusal with ERR__FATAL starts that). Takes `headers`: the
    /// message's once produced or held, destroyed otherwise. NO_ERROR when produced or held.
    auto produce_locked(const char* topic,
                        std::string_view key,
                        std::string_view value,
                        rd_kafka_headers_t* headers,
                        void* opaque) -> rd_kafka_resp_err_t {
        if (!recovering) {
            const auto e = produce_on(current, topic, key, value, headers, opaque);
            if (e == RD_KAFKA_RESP_ERR_NO_ERROR) {
                return e;
            }
            // Refused: the headers are still ours.
            if (e != RD_KAFKA_RESP_ERR__FATAL || !replace_locked(current.rk)) {
                if (headers != nullptr) {
                    rd_kafka_headers_destroy(headers);
                }
                return e;
            }
        }
        held.push_back({topic, std::string(key), std::string(value), headers, opaque, false});
        return RD_KAFKA_RESP_ERR_NO_ERROR;
    }

    static auto start_order(const void* opaque) -> std::uint32_t {
        return static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(opaque) >> 32);
    }

    /// Under rk_mu: once no retired client has anything left to report, produces `held` on
    /// the current client in start order and ends the recovery. Messages the client refuses
    /// (other than by a fatal error) go to `failed` for the caller to complete after the
    /// unlock (a sink is never called under rk_mu).
    void finish_recovery_locked(
        std::vector<std::pair<std::uint32_t, rd_kafka_resp_err_t>>& failed) {
        if (!recovering) {
            return;
        }
        for (const client& c : retired) {
            if (rd_kafka_outq_len(c.rk) != 0) {
                return;
            }
        }
        // At most max_pending (< 2^31) apart: the difference orders them across a wrap.
        std::stable_sort(held.begin(), held.end(), [](const auto& a, const auto& b) {
            return static_cast<std::int32_t>(start_order(a.opaque) - start_order(b.opaque)) < 0;
        });
        std::size_t sent = 0;
        for (; sent < held.size(); ++sent) {
            auto& h = held[sent];
            const auto e =
                produce_on(current, h.topic.c_str(), h.key, h.value, h.headers, h.opaque);
            if (e == RD_KAFKA_RESP_ERR__FATAL && replace_locked(current.rk)) {
                break;  // still recovering: the rest stay held, in order
            }
            if (e == RD_KAFKA_RESP_ERR_NO_ERROR) {
                if (h.resend) {
                    conn->resent.fetch_add(1, std::memory_order_relaxed);
                }
            } else {
                if (h.headers != nullptr) {
                    rd_kafka_headers_destroy(h.headers);
                }
                failed.emplace_back(slot_of(h.opaque), e);
            }
            h.headers = nullptr;
        }
        held.erase(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(sent));
        recovering = !held.empty();  // not empty: a fatal error of the new client, retired now
    }

    /// Ends the recovery if it can (see finish_recovery_locked); any thread but librdkafka's
    /// own inside a callback holding its locks.
    void finish_recovery() {
        std::vector<std::pair<std::uint32_t, rd_kafka_resp_err_t>> failed;
        {
            std::lock_guard lock(rk_mu);
            finish_recovery_locked(failed);
        }
        for (const auto& [slot, e] : failed) {
            fail_now(slot, kafka_error(e));
        }
        if (!failed.empty()) {
            wake();  // from librdkafka's thread: a closed producer's drain task may end now
        }
    }

    void raise_fatal(const std::string& reason) override {
        std::lock_guard lock(rk_mu);
        if (current.rk != nullptr) {
            rd_kafka_test_fatal_error(current.rk, RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER,
                                      reason.c_str());
        }
    }

    /// A report of `from`: its outcome, or none when `from` had a fatal error and the message
    /// was sent again on the current client (its outcome comes from there). Any thread.
    auto settle(const client& from, const rd_kafka_message_t* m) -> std::optional<result<ack>> {
        // Never a result made of an empty error code (result<T> asserts against it).
        result<ack> outcome = ack{};
        if (kafka_confirmed(m)) {
            outcome->stream = names.get(rd_kafka_topic_name(m->rkt));
            outcome->partition = m->partition;
            outcome->sequence = static_cast<std::uint64_t>(m->offset);
        } else if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
            outcome = make_error_code(bus_errc::unconfirmed);  // see kafka_confirmed
        } else {
            outcome = kafka_error(m->err);
        }
        if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR &&
            rd_kafka_fatal_error(from.rk, nullptr, 0) != RD_KAFKA_RESP_ERR_NO_ERROR) {
            rd_kafka_headers_t* headers = nullptr;  // the report's own: copied
            if (rd_kafka_message_headers(m, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR) {
                headers = rd_kafka_headers_copy(headers);
            } else {
                headers = nullptr;
            }
            std::lock_guard lock(rk_mu);
            if (replace_locked(from.rk) && recovering) {
                // Produced with the rest once every retired client has reported all it had
                // (finish_recovery), in start order.
                held.push_back({rd_kafka_topic_name(m->rkt),
                                std::string(static_cast<const char*>(m->key), m->key_len),
                                std::string(static_cast<const char*>(m->payload), m->len), headers,
                                m->_private, true});
                return std::nullopt;
            }
            if (headers != nullptr) {
                rd_kafka_headers_destroy(headers);
            }
        }
        return outcome;
    }

    static auto slot_of(const void* opaque) -> std::uint32_t {
        return static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(opaque));
    }
    static auto slot_of(const rd_kafka_message_t* m) -> std::uint32_t {
        return slot_of(m->_private);
    }

    /// reactor_queue: hands a report's outcome to the sink now (0 or 1 handed).
    auto report(const client& from, const rd_kafka_message_t* m) -> std::uint64_t {
        auto outcome = settle(from, m);
        if (!outcome) {
            return 0;
        }
        outstanding.fetch_sub(1);
        sink->complete(slot_of(m), std::move(*outcome));
        return 1;
    }

    /// background_thread: librdkafka's background thread of the client `rk`, for every event
    /// of its main queue. Writes each DR message's outcome into its slot; one lock and at most
    /// one eventfd write per batch (when `ready` was empty).
    static void on_background_event(rd_kafka_t* rk, rd_kafka_event_t* ev, void* opaque) {
        auto* st = static_cast<state*>(opaque);
        if (rd_kafka_event_type(ev) != RD_KAFKA_EVENT_DR) {
            rd_kafka_event_destroy(ev);
            return;
        }
        // A slot is this thread's from its report until the drain task takes it from `ready`:
        // its outcome is written without the lock, and the slots go to `ready` in one step.
        // The event (which holds the messages librdkafka counts as outstanding) is destroyed
        // before the slots are published, so a publisher that closes on the last outcome finds
        // librdkafka with nothing left in its queues.
        thread_local std::vector<std::uint32_t> slots;
        slots.clear();
        client from;
        from.rk = rk;
        while (const rd_kafka_message_t* m = rd_kafka_event_message_next(ev)) {
            auto outcome = st->settle(from, m);
            if (outcome) {
                st->outcomes[slot_of(m)].emplace(std::move(*outcome));
                slots.push_back(slot_of(m));
            }
        }
        rd_kafka_event_destroy(ev);
        // The last report of a broken client ends the recovery here: no eventfd wake-up
        // follows a report that was held rather than completed.
        st->finish_recovery();
        if (slots.empty()) {
            return;
        }
        bool signal = false;
        {
            std::lock_guard lock(st->ready_mu);
            signal = st->ready.empty();
            st->ready.insert(st->ready.end(), slots.begin(), slots.end());
        }
        if (signal) {
            st->wake();
        }
    }

    /// background_thread: hands every outcome written so far to the sink; the number handed.
    auto complete_ready() -> std::uint64_t {
        {
            std::lock_guard lock(ready_mu);
            ready.swap(taking);
        }
        for (const std::uint32_t slot : taking) {
            // Written before the slot went into `ready` under ready_mu (taken for the swap).
            auto outcome = std::move(*outcomes[slot]);
            outcomes[slot].reset();
            outstanding.fetch_sub(1);
            sink->complete(slot, std::move(outcome));
        }
        const auto n = taking.size();
        taking.clear();
        return n;
    }

    /// Hands every delivery report queued now to the sink; the number handed.
    auto drain_queues() -> std::uint64_t {
        std::vector<client> clients;
        {
            std::lock_guard lock(rk_mu);
            clients = retired;
            clients.push_back(current);
        }
        std::uint64_t done = 0;
        for (const client& c : clients) {
            while (rd_kafka_event_t* ev = rd_kafka_queue_poll(c.queue, 0)) {
                if (rd_kafka_event_type(ev) == RD_KAFKA_EVENT_DR) {
                    while (const rd_kafka_message_t* m = rd_kafka_event_message_next(ev)) {
                        done += report(c, m);
                    }
                }
                rd_kafka_event_destroy(ev);
            }
        }
        return done;
    }

    /// The retired clients with nothing left to report, taken out of `retired`.
    auto take_finished() -> std::vector<client> {
        std::vector<client> out;
        std::lock_guard lock(rk_mu);
        std::erase_if(retired, [&](const client& c) {
            if (rd_kafka_outq_len(c.rk) != 0) {
                return false;
            }
            out.push_back(c);
            return true;
        });
        return out;
    }

    static void destroy(client& c) noexcept {
        if (c.rkt != nullptr) {
            rd_kafka_topic_destroy(c.rkt);
            c.rkt = nullptr;
        }
        if (c.queue != nullptr) {
            rd_kafka_queue_destroy(c.queue);
            c.queue = nullptr;
        }
        if (c.rk != nullptr) {
            rd_kafka_destroy(c.rk);
            c.rk = nullptr;
        }
    }
    void destroy_clients() noexcept {
        std::lock_guard lock(rk_mu);
        destroy(current);
        for (auto& c : retired) {
            destroy(c);
        }
        retired.clear();
    }
};

namespace {

auto drain(std::shared_ptr<kafka_producer::state> st) -> task<void> {
    for (;;) {
        auto r = co_await wait_readable(st->efd);
        if (!r) {
            co_return;  // the runtime is shutting down: the state's destructor ends the client
        }
        std::uint64_t count = 0;
        [[maybe_unused]] const auto n = ::read(st->efd, &count, sizeof(count));
        st->conn->wakes.fetch_add(1, std::memory_order_relaxed);
        // The awaited publishes this pass completes are resumed here, in order, once it is
        // done (completion_run), rather than woken one by one onto the deques.
        std::uint64_t done = 0;
        {
            const completion_run::collecting_scope collecting{st->run};
            done = st->background ? st->complete_ready() : st->drain_queues();
            if (!st->background) {
                st->finish_recovery();
            }
        }
        st->conn->acks.fetch_add(done, std::memory_order_relaxed);
        st->run.resume_all();
        auto finished = st->take_finished();
        if (!finished.empty()) {  // destroying joins librdkafka's threads: not on a worker
            st->conn->close_later([finished = std::move(finished)]() mutable {
                for (auto& c : finished) {
                    kafka_producer::state::destroy(c);
                }
            });
        }
        if (st->closed.load() && st->outstanding.load() == 0) {
            break;
        }
    }
    // Nothing in flight: destroying the client only joins librdkafka's threads, on the
    // backend's closer thread rather than a weft worker.
    auto conn = st->conn;
    conn->close_later([st = std::move(st)]() mutable {
        st->destroy_clients();
        st.reset();
    });
}

}  // namespace

auto kafka_producer::make(std::shared_ptr<kafka_backend::connection> conn,
                          publish_sink& sink,
                          std::uint32_t max_pending) -> result<std::unique_ptr<backend_producer>> {
    try {
        (void)current_io_backend();  // the drain task needs a reactor on this runtime
    } catch (const std::logic_error&) {
        return std::make_error_code(std::errc::operation_not_supported);
    }
    auto st = std::make_shared<state>(conn, sink, max_pending);
    st->efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (st->efd < 0) {
        return std::error_code(errno, std::system_category());
    }
    auto c = st->make_client();
    if (!c) {
        return c.error();
    }
    st->current = *c;
    {
        std::lock_guard lock(conn->producers_mu);
        std::erase_if(conn->producers, [](const auto& w) { return w.expired(); });
        conn->producers.push_back(st);
    }
    spawn(drain(st)).detach();
    return std::unique_ptr<backend_producer>(new kafka_producer(std::move(st)));
}

void kafka_producer::start(envelope env, std::uint32_t slot) {
    // librdkafka copies key and value (RD_KAFKA_MSG_F_COPY): the buffer is reused.
    thread_local std::string bytes;
    std::string_view value;
    rd_kafka_headers_t* headers = nullptr;
    if (const std::error_code ec =
            kafka_record(env, st_->conn->options.wire, bytes, value, headers)) {
        st_->outstanding.fetch_add(1);
        st_->fail_now(slot, ec);
        return;
    }
    produce(env.topic, env.key, value, headers, slot);
}

auto kafka_producer::start_encoded(const encoded_envelope& e, std::uint32_t slot) -> bool {
    if (st_->conn->options.wire.mode != wire_mode::weft) {
        return false;  // the CloudEvents modes need the envelope's fields: the publisher decodes
    }
    std::array<char, id_text_size> id{};
    id_text(e.id, id.data());
    produce(e.topic, e.key, e.bytes, state::id_headers(id), slot);
    return true;
}

void kafka_producer::produce(std::string_view topic,
                             std::string_view key,
                             std::string_view value,
                             rd_kafka_headers_t* headers,
                             std::uint32_t slot) {
    state& st = *st_;
    st.outstanding.fetch_add(1);
    std::vector<std::pair<std::uint32_t, rd_kafka_resp_err_t>> failed;
    {
        std::lock_guard lock(st.rk_mu);
        st.produce_started_locked(topic, key, value, headers, slot, failed);
        if (st.recovering) {  // the broken client may have had nothing left to report
            st.finish_recovery_locked(failed);
        }
    }
    for (const auto& [s, err] : failed) {
        st.fail_now(s, kafka_error(err));
    }
}

void kafka_producer::close() noexcept {
    st_->closed.store(true);
    st_->wake();  // the drain task checks whether it may end
}

kafka_producer::~kafka_producer() { close(); }

}  // namespace weft::bus
