#include "kafka_consumer.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>

#include "weft/bus/envelope_codec.hpp"
#include "weft/bus/errc.hpp"
#include "weft/io/fd_wait.hpp"
#include "weft/sched/spawn_blocking.hpp"

namespace weft::bus {

kafka_consumer::kafka_consumer(std::shared_ptr<kafka_backend::connection> conn,
                               consumer_config config)
    : conn_(std::move(conn)),
      config_(std::move(config)),
      group_topic_(config_.group + '\0' + config_.topic) {}

auto kafka_consumer::make(std::shared_ptr<kafka_backend::connection> conn, consumer_config config)
    -> task<result<std::shared_ptr<backend_consumer>>> {
    // The destruction joins the group thread, which waits on the group: on the closer thread,
    // whichever thread lets the last reference go. The connection outlives the consumer (it
    // holds it); once the closer thread has stopped (the backend is gone), close_later runs
    // the job here.
    std::shared_ptr<kafka_consumer> c(new kafka_consumer(conn, config), [](kafka_consumer* p) {
        kafka_backend::connection* cn = p->conn_.get();
        try {
            cn->close_later([p] { delete p; });
        } catch (...) {
            delete p;  // no memory for the job: here, then
        }
    });
    std::vector<std::string> topics;
    topics.push_back(config.topic);
    topics.push_back(config.dead_letter_topic);
    kafka_consumer* raw = c.get();
    kafka_backend::connection* cn = conn.get();
    std::error_code ec;
    auto r = co_await spawn_blocking([raw, cn, &topics, &ec] {
        ec = cn->ensure_topics(topics);
        if (!ec) {
            ec = raw->open();
        }
    });
    if (!r) {
        co_return r.error();
    }
    if (ec) {
        co_return ec;
    }
    conn->add_consumer(c);
    std::shared_ptr<backend_consumer> out = std::move(c);
    co_return out;
}

auto kafka_consumer::open() -> std::error_code {
    efd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (efd_ < 0) {
        return {errno, std::system_category()};
    }
    const auto& o = conn_->options;
    rd_kafka_conf_t* conf = nullptr;
    try {
        conf =
            kafka_conf(o, {{"group.id", config_.group},
                           // Offsets are ours to store: the settled prefix, on ack.
                           // librdkafka commits what is stored every 100 ms, before a
                           // partition is revoked, and at close: one OffsetCommit per
                           // interval rather than one per ack.
                           {"enable.auto.commit", "true"},
                           {"auto.commit.interval.ms", "100"},
                           {"enable.auto.offset.store", "false"},
                           // A new group starts with what the topic retains.
                           {"auto.offset.reset", "earliest"},
                           // A member keeps its partitions while others join or leave.
                           {"partition.assignment.strategy", "cooperative-sticky"},
                           {"heartbeat.interval.ms", std::to_string(o.heartbeat_interval.count())},
                           {"session.timeout.ms", "6000"},
                           {"fetch.wait.max.ms", "100"}});
    } catch (const std::system_error& e) {
        return e.code();
    }
    rd_kafka_conf_set_rebalance_cb(conf, &kafka_consumer::on_rebalance);
    rd_kafka_conf_set_opaque(conf, this);  // this outlives the client: close_client joins
    char err[512];
    rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
    if (rk == nullptr) {
        rd_kafka_conf_destroy(conf);
        return make_error_code(bus_errc::broker_error);
    }
    rd_kafka_poll_set_consumer(rk);  // logs and errors to the group thread too
    rd_kafka_queue_t* msgs = rd_kafka_queue_new(rk);
    const std::uint64_t one = 1;  // what librdkafka writes: an eventfd takes 8 bytes
    rd_kafka_queue_io_event_enable(msgs, efd_, &one, sizeof(one));
    assigned_to_ = msgs;
    rd_kafka_topic_partition_list_t* topics = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(topics, config_.topic.c_str(), RD_KAFKA_PARTITION_UA);
    const auto e = rd_kafka_subscribe(rk, topics);
    rd_kafka_topic_partition_list_destroy(topics);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_queue_destroy(msgs);
        rd_kafka_destroy(rk);
        return kafka_error(e);
    }
    std::lock_guard lock(rk_mu_);
    rk_ = rk;
    msgs_ = msgs;
    group_thread_ = std::thread([this, rk, msgs] { serve_group(rk, msgs); });
    return {};
}

kafka_consumer::~kafka_consumer() {
    closed_.store(true);
    close_client();  // when close() never handed it to the closer thread
    if (efd_ >= 0) {
        ::close(efd_);
    }
}

void kafka_consumer::close_client() noexcept {
    {
        std::lock_guard lock(rk_mu_);
        rk_ = nullptr;
        msgs_ = nullptr;
    }
    stop_group_.store(true, std::memory_order_release);
    if (group_thread_.joinable()) {
        group_thread_.join();
    }
}

void kafka_consumer::serve_group(rd_kafka_t* rk, rd_kafka_queue_t* msgs) noexcept {
    // Rebalances run on_rebalance here; errors come as messages (a broker went away...):
    // librdkafka retries on its own. The bound of 100 ms is how soon a close is seen.
    while (!stop_group_.load(std::memory_order_acquire)) {
        rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, 100);
        if (m != nullptr) {
            rd_kafka_message_destroy(m);
        }
    }
    rd_kafka_queue_io_event_enable(msgs, -1, nullptr, 0);
    rd_kafka_consumer_close(rk);  // leaves the group: its partitions go to the others now
    rd_kafka_queue_destroy(msgs);
    rd_kafka_destroy(rk);
    conn_->consumers_closed.fetch_add(1, std::memory_order_relaxed);
}

void kafka_consumer::on_rebalance(rd_kafka_t* rk,
                                  rd_kafka_resp_err_t err,
                                  rd_kafka_topic_partition_list_t* partitions,
                                  void* opaque) {
    auto* self = static_cast<kafka_consumer*>(opaque);
    const bool cooperative = std::string_view(rd_kafka_rebalance_protocol(rk)) == "COOPERATIVE";
    rd_kafka_error_t* error = nullptr;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        // Before the assignment starts the fetchers: a partition queue the application
        // forwarded stays forwarded (librdkafka would forward it to the consumer queue).
        for (int i = 0; i < partitions->cnt; ++i) {
            const auto& p = partitions->elems[i];
            rd_kafka_queue_t* q = rd_kafka_queue_get_partition(rk, p.topic, p.partition);
            if (q != nullptr) {
                rd_kafka_queue_forward(q, self->assigned_to_);
                rd_kafka_queue_destroy(q);
            }
        }
        if (cooperative) {
            error = rd_kafka_incremental_assign(rk, partitions);
        } else {
            rd_kafka_assign(rk, partitions);
        }
    } else if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {  // or lost: out of the group
        self->revoked(partitions);
        if (cooperative) {
            error = rd_kafka_incremental_unassign(rk, partitions);
        } else {
            rd_kafka_assign(rk, nullptr);
        }
    } else {  // a rebalance error: nothing is assigned until the group's next rebalance
        self->revoked(nullptr);
        rd_kafka_assign(rk, nullptr);
    }
    if (error != nullptr) {
        rd_kafka_error_destroy(error);  // the group rejoins on its own
    }
}

void kafka_consumer::revoked(const rd_kafka_topic_partition_list_t* partitions) {
    std::lock_guard lock(mu_);
    if (partitions == nullptr) {
        tokens_.clear();
        entries_.clear();
        return;
    }
    for (int i = 0; i < partitions->cnt; ++i) {
        const std::int32_t partition = partitions->elems[i].partition;
        auto it = entries_.lower_bound({partition, std::numeric_limits<std::int64_t>::min()});
        while (it != entries_.end() && it->first.first == partition) {
            tokens_.erase(it->second.token);
            it = entries_.erase(it);
        }
    }
}

void kafka_consumer::wake() const noexcept {
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = ::write(efd_, &one, sizeof(one));
}

auto kafka_consumer::message_key(key k) const -> kafka_message_key {
    return {group_topic_, k.first, k.second};
}

void kafka_consumer::expire(std::map<key, entry>::iterator it,
                            clock::time_point now,
                            std::vector<dead_letter>& dead) {
    entry& e = it->second;
    tokens_.erase(e.token);
    e.token = 0;
    if (config_.max_deliveries != 0 && e.attempt >= config_.max_deliveries) {
        e.state = entry_state::dead_lettering;
        dead.push_back({it->first, e.env,
                        "max deliveries (" + std::to_string(config_.max_deliveries) + ") reached",
                        e.attempt});
    } else {
        e.state = entry_state::retry;
        e.when = now;
    }
}

auto kafka_consumer::find_pending(std::uint64_t token, std::vector<dead_letter>& dead)
    -> std::map<key, entry>::iterator {
    auto t = tokens_.find(token);
    if (t == tokens_.end()) {
        return entries_.end();
    }
    auto it = entries_.find(t->second);
    if (it == entries_.end()) {
        tokens_.erase(t);
        return it;
    }
    const auto now = clock::now();
    if (it->second.when <= now) {
        expire(it, now, dead);
        return entries_.end();
    }
    return it;
}

auto kafka_consumer::hand_out(std::map<key, entry>::iterator it, clock::time_point now)
    -> delivery {
    entry& e = it->second;
    e.state = entry_state::pending;
    e.token = ++next_token_;
    e.when = now + config_.ack_wait;
    tokens_.emplace(e.token, it->first);
    return {shared_from_this(), e.token, e.env, e.attempt};
}

void kafka_consumer::advance(std::int32_t partition) {
    auto it = entries_.lower_bound({partition, std::numeric_limits<std::int64_t>::min()});
    std::int64_t commit = -1;
    while (it != entries_.end() && it->first.first == partition &&
           it->second.state == entry_state::acked) {
        commit = it->first.second + 1;
        conn_->forget(message_key(it->first));
        it = entries_.erase(it);
    }
    if (commit < 0) {
        return;
    }
    std::lock_guard lock(rk_mu_);
    if (rk_ == nullptr) {
        return;
    }
    rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, config_.topic.c_str(), partition)->offset = commit;
    rd_kafka_offsets_store(rk_, list);  // local: committed with the next interval
    rd_kafka_topic_partition_list_destroy(list);
}

void kafka_consumer::send(std::vector<dead_letter>& dead) {
    for (auto& d : dead) {
        envelope out = *d.env;
        out.topic = config_.dead_letter_topic;
        out.headers.push_back(header{"weft-dead-letter-reason", d.reason});
        out.headers.push_back(header{"weft-original-topic", config_.topic});
        out.headers.push_back(header{"weft-original-group", config_.group});
        out.headers.push_back(header{"weft-deliveries", std::to_string(d.deliveries)});
        conn_->dead_letter(weak_from_this(), d.where.first, d.where.second,
                           config_.dead_letter_topic, out.key, encode(out));
    }
    dead.clear();
}

void kafka_consumer::dead_letter_done(std::int32_t partition, std::int64_t offset, bool ok) {
    std::lock_guard lock(mu_);
    auto it = entries_.find({partition, offset});
    if (it == entries_.end() || it->second.state != entry_state::dead_lettering) {
        return;
    }
    if (ok) {
        it->second.state = entry_state::acked;
        advance(partition);
    } else {
        it->second.state = entry_state::retry;  // not stored: delivered again
        it->second.when = clock::now();
        wake();
    }
}

auto kafka_consumer::entries() -> std::size_t {
    std::lock_guard lock(mu_);
    return entries_.size();
}

auto kafka_consumer::next() -> task<result<delivery>> {
    std::vector<dead_letter> dead;
    for (;;) {
        if (closed_.load()) {
            co_return make_error_code(bus_errc::subscription_closed);
        }
        // 1. A message fetched and not yet handed out: first, in the partition's order.
        rd_kafka_message_t* m = nullptr;
        {
            std::lock_guard lock(rk_mu_);
            if (msgs_ == nullptr) {
                co_return make_error_code(bus_errc::subscription_closed);
            }
            m = rd_kafka_consume_queue(msgs_, 0);
        }
        std::optional<delivery> out;
        if (m != nullptr) {
            if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
                auto env = decode(std::string_view(static_cast<const char*>(m->payload), m->len));
                const key k{m->partition, m->offset};
                std::lock_guard lock(mu_);
                auto [it, fresh] = entries_.try_emplace(k);
                entry& e = it->second;
                if (!fresh && e.state != entry_state::pending && e.state != entry_state::retry) {
                    // Fetched again after a rebalance, and already settled here: skipped.
                } else if (!env) {
                    // Not a weft envelope: nothing a member could do with it, and no envelope
                    // for the dead letters. Counts as settled.
                    tokens_.erase(e.token);
                    e.state = entry_state::acked;
                    advance(k.first);
                } else if (!closed_.load()) {
                    tokens_.erase(e.token);  // an earlier delivery of it is void now
                    e.env = std::make_shared<const envelope>(std::move(*env));
                    e.attempt = conn_->count_delivery(message_key(k));
                    if (config_.max_deliveries != 0 && e.attempt > config_.max_deliveries) {
                        // Its last allowed delivery failed on another member (or process).
                        e.state = entry_state::dead_lettering;
                        e.token = 0;
                        dead.push_back({k, e.env,
                                        "max deliveries (" +
                                            std::to_string(config_.max_deliveries) + ") reached",
                                        config_.max_deliveries});
                    } else {
                        out.emplace(hand_out(it, clock::now()));
                    }
                }
            }
            // Other errors are reports (a broker went away...): librdkafka retries on its own.
            rd_kafka_message_destroy(m);
            send(dead);
            if (out) {
                co_return std::move(*out);
            }
            continue;
        }
        // 2. Ack timeouts, then the earliest retry that is due.
        auto wait = std::chrono::milliseconds(1'000);
        {
            std::lock_guard lock(mu_);
            const auto now = clock::now();
            auto best = entries_.end();
            auto soonest = clock::time_point::max();
            for (auto it = entries_.begin(); it != entries_.end(); ++it) {
                entry& e = it->second;
                if (e.state == entry_state::pending && e.when <= now) {
                    expire(it, now, dead);
                }
                if (e.state == entry_state::retry) {
                    if (e.when <= now && (best == entries_.end() || e.when < best->second.when)) {
                        best = it;
                    }
                    soonest = std::min(soonest, e.when);
                } else if (e.state == entry_state::pending) {
                    soonest = std::min(soonest, e.when);
                }
            }
            if (best != entries_.end() && !closed_.load()) {
                best->second.attempt = conn_->count_delivery(message_key(best->first));
                out.emplace(hand_out(best, now));
            } else if (soonest != clock::time_point::max()) {
                wait = std::clamp(std::chrono::ceil<std::chrono::milliseconds>(soonest - now),
                                  std::chrono::milliseconds(1), std::chrono::milliseconds(1'000));
            }
        }
        send(dead);
        if (out) {
            co_return std::move(*out);
        }
        // 3. Nothing to hand out: wait for librdkafka's signal (the queue turned non-empty),
        // close(), or the next deadline.
        auto r = co_await wait_readable(efd_, wait);
        if (!r && r.error() != std::errc::timed_out) {
            co_return r.error();  // cancelled
        }
        std::uint64_t count = 0;
        [[maybe_unused]] const auto n = ::read(efd_, &count, sizeof(count));
    }
}

auto kafka_consumer::ack(std::uint64_t token) -> result<void> {
    std::vector<dead_letter> dead;
    bool ok = false;
    {
        std::lock_guard lock(mu_);
        auto it = find_pending(token, dead);
        if (it != entries_.end()) {
            tokens_.erase(token);
            it->second.state = entry_state::acked;
            advance(it->first.first);
            ok = true;
        }
    }
    send(dead);
    if (!ok) {
        return make_error_code(bus_errc::not_pending);
    }
    return {};
}

auto kafka_consumer::nack(std::uint64_t token, std::chrono::milliseconds delay) -> result<void> {
    std::vector<dead_letter> dead;
    bool ok = false;
    {
        std::lock_guard lock(mu_);
        auto it = find_pending(token, dead);
        if (it != entries_.end()) {
            const auto now = clock::now();
            expire(it, now, dead);  // to the retries, or the dead letters after the last
            it->second.when = now + delay;
            ok = true;
        }
    }
    send(dead);
    if (!ok) {
        return make_error_code(bus_errc::not_pending);
    }
    wake();
    return {};
}

auto kafka_consumer::term(std::uint64_t token, std::string_view reason) -> result<void> {
    std::vector<dead_letter> dead;
    bool ok = false;
    {
        std::lock_guard lock(mu_);
        auto it = find_pending(token, dead);
        if (it != entries_.end()) {
            entry& e = it->second;
            tokens_.erase(token);
            e.token = 0;
            e.state = entry_state::dead_lettering;
            dead.push_back({it->first, e.env, std::string(reason), e.attempt});
            ok = true;
        }
    }
    send(dead);
    if (!ok) {
        return make_error_code(bus_errc::not_pending);
    }
    return {};
}

auto kafka_consumer::in_progress(std::uint64_t token) -> result<void> {
    std::vector<dead_letter> dead;
    bool ok = false;
    {
        std::lock_guard lock(mu_);
        auto it = find_pending(token, dead);
        if (it != entries_.end()) {
            it->second.when = clock::now() + config_.ack_wait;
            ok = true;
        }
    }
    send(dead);
    if (!ok) {
        return make_error_code(bus_errc::not_pending);
    }
    return {};
}

void kafka_consumer::close() noexcept {
    {
        std::lock_guard lock(mu_);
        if (closed_.exchange(true)) {
            return;
        }
        // What was not settled goes to the member that takes the partition, from the last
        // committed offset; these deliveries are void.
        tokens_.clear();
        entries_.clear();
    }
    wake();  // a waiting next() returns subscription_closed
    conn_->close_later([self = shared_from_this()] { self->close_client(); });
}

}  // namespace weft::bus
