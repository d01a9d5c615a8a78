#include "kafka_consumer.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <optional>
#include <string_view>
#include <utility>

#include "weft/bus/envelope_codec.hpp"
#include "weft/bus/errc.hpp"
#include "weft/io/fd_wait.hpp"
#include "weft/sched/spawn_blocking.hpp"

namespace weft::bus {

namespace {

// How long the broker keeps a silent member in its group.
constexpr std::chrono::milliseconds session_timeout{6000};
// How long a rebalance waits for the group's members to rejoin before it goes on without the
// missing ones (max.poll.interval.ms, the JoinGroup's rebalance timeout; librdkafka's default
// is 300 s). A member's group thread polls every 100 ms whatever the application does
// (serve_group), so a member that misses it is gone or frozen: waiting longer only holds the
// group's other members, and each closing member's JoinGroup, up to 5 minutes.
constexpr std::chrono::milliseconds rebalance_timeout{10000};

// Whether the coordinator has answered the member's JoinGroup (it has a member id).
auto has_member_id(rd_kafka_t* rk) -> bool {
    char* id = rd_kafka_memberid(rk);
    const bool joined = id != nullptr && *id != '\0';
    if (id != nullptr) {
        rd_kafka_mem_free(rk, id);
    }
    return joined;
}

}  // namespace

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
                           {"session.timeout.ms", std::to_string(session_timeout.count())},
                           {"max.poll.interval.ms", std::to_string(rebalance_timeout.count())},
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
    {
        std::lock_guard lock(mu_);
        conn_->join_group(group_topic_);
        joined_ = true;
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
    {
        std::lock_guard lock(mu_);
        drop(nullptr, true);
    }
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
    // librdkafka 2.0.2 aborts (an assertion in the cooperative-sticky assignor, fixed in
    // 2.3.0) when a member is destroyed after its JoinGroup was answered and before its first
    // assignment, whose callback creates the assignor's state: a member that has joined
    // waits for that assignment. Its rejoin may be held at the coordinator until the
    // rebalance gives up on the members that do not come back (a rebalance timeout), and a
    // LeaveGroup sent meanwhile queues behind that JoinGroup on the same connection: so the
    // wait is a rebalance timeout and a session timeout, not a session timeout alone.
    const auto give_up = std::chrono::steady_clock::now() + rebalance_timeout + session_timeout;
    while (!assigned_once_ && has_member_id(rk) && std::chrono::steady_clock::now() < give_up) {
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
        self->assigned_once_ = true;
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
        self->revoked(partitions, false);
        if (cooperative) {
            error = rd_kafka_incremental_unassign(rk, partitions);
        } else {
            rd_kafka_assign(rk, nullptr);
        }
    } else {  // a rebalance error: nothing is assigned until the group's next rebalance
        self->revoked(nullptr, false);
        rd_kafka_assign(rk, nullptr);
    }
    if (error != nullptr) {
        rd_kafka_error_destroy(error);  // the group rejoins on its own
    }
}

void kafka_consumer::revoked(const rd_kafka_topic_partition_list_t* partitions, bool leaving) {
    std::lock_guard lock(mu_);
    drop(partitions, leaving);
}

void kafka_consumer::drop(const rd_kafka_topic_partition_list_t* partitions, bool leaving) {
    std::vector<std::pair<kafka_message_key, std::uint32_t>> given;
    auto drop_partition = [&](std::unordered_map<std::int32_t, partition_state>::iterator p) {
        for (const auto& [offset, id] : p->second.anchors) {
            auto it = entries_.find(id);
            if (it == entries_.end()) {
                continue;
            }
            if (it->second.state != entry_state::settled && it->second.attempt > 0) {
                given.emplace_back(message_key(p->first, offset), it->second.attempt);
            }
            untime(it);
            entries_.erase(it);
        }
        parts_.erase(p);
    };
    if (partitions == nullptr) {
        while (!parts_.empty()) {
            drop_partition(parts_.begin());
        }
    } else {
        for (int i = 0; i < partitions->cnt; ++i) {
            if (auto p = parts_.find(partitions->elems[i].partition); p != parts_.end()) {
                drop_partition(p);
            }
        }
    }
    leaving = leaving && joined_;
    if (leaving) {
        joined_ = false;
    }
    if (!given.empty() || leaving) {
        conn_->hand_over(group_topic_, std::move(given), leaving);
    }
}

void kafka_consumer::wake() const noexcept {
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = ::write(efd_, &one, sizeof(one));
}

auto kafka_consumer::message_key(std::int32_t partition, std::int64_t offset) const
    -> kafka_message_key {
    return {group_topic_, partition, offset};
}

void kafka_consumer::set_timer(entry_iter it, entry_state state, clock::time_point when) {
    entry& e = it->second;
    if (e.state == entry_state::pending || e.state == entry_state::retry) {
        timers_.erase({e.when, it->first});
    }
    e.state = state;
    e.when = when;
    timers_.emplace(when, it->first);
}

void kafka_consumer::untime(entry_iter it) {
    entry& e = it->second;
    if (e.state == entry_state::pending || e.state == entry_state::retry) {
        timers_.erase({e.when, it->first});
    }
    if (e.token != 0) {
        tokens_.erase(e.token);
        e.token = 0;
    }
}

void kafka_consumer::expire(entry_iter it,
                            clock::time_point due_at,
                            std::vector<copy_request>& copies) {
    entry& e = it->second;
    if (config_.max_deliveries != 0 && e.attempt >= config_.max_deliveries) {
        dead_letter(it, "max deliveries (" + std::to_string(config_.max_deliveries) + ") reached",
                    copies);
        return;
    }
    tokens_.erase(e.token);
    e.token = 0;
    set_timer(it, entry_state::retry, due_at);
}

void kafka_consumer::dead_letter(entry_iter it,
                                 std::string reason,
                                 std::vector<copy_request>& copies) {
    untime(it);
    entry& e = it->second;
    e.state = entry_state::dead_lettering;
    copies.push_back({kafka_copy::dead_letter, it->first, e.partition, e.anchor, e.env,
                      std::move(reason), e.attempt, false});
}

auto kafka_consumer::hand_out(entry_iter it, clock::time_point now) -> delivery {
    entry& e = it->second;
    ++e.attempt;
    set_timer(it, entry_state::pending, now + config_.ack_wait);
    e.token = ++next_id_;
    tokens_.emplace(e.token, it->first);
    return {shared_from_this(), e.token, e.env, e.attempt};
}

void kafka_consumer::settle(entry_iter it) {
    untime(it);
    entry& e = it->second;
    const std::int32_t partition = e.partition;
    if (e.copying || e.anchor >= parts_[partition].fetched) {
        // A copy of it is ahead: kept, to be skipped when that copy is fetched.
        e.state = entry_state::settled;
        e.env.reset();
        return;
    }
    erase(it);
    store(partition);
}

void kafka_consumer::erase(entry_iter it) {
    untime(it);
    parts_[it->second.partition].anchors.erase(it->second.anchor);
    entries_.erase(it);
}

void kafka_consumer::move_anchor(entry_iter it, std::int64_t to) {
    auto& anchors = parts_[it->second.partition].anchors;
    anchors.erase(it->second.anchor);
    it->second.anchor = to;
    anchors[to] = it->first;
}

void kafka_consumer::check_lag(std::int32_t partition, std::vector<copy_request>& copies) {
    const partition_state& ps = parts_[partition];
    if (ps.anchors.empty()) {
        return;
    }
    const auto [anchor, id] = *ps.anchors.begin();
    if (anchor >= ps.fetched || ps.fetched - anchor <= requeue_lag) {
        return;
    }
    auto it = entries_.find(id);
    if (it == entries_.end()) {
        return;
    }
    entry& e = it->second;
    if (e.copying || (e.state != entry_state::pending && e.state != entry_state::retry)) {
        return;
    }
    e.copying = true;
    copies.push_back({kafka_copy::requeue, id, partition, anchor, e.env, {}, e.attempt, false});
}

void kafka_consumer::store(std::int32_t partition) {
    partition_state& ps = parts_[partition];
    std::int64_t commit = ps.fetched;
    if (!ps.anchors.empty()) {
        commit = std::min(commit, ps.anchors.begin()->first);
    }
    if (commit <= ps.stored) {
        return;
    }
    ps.stored = commit;
    conn_->settled_below(group_topic_, partition, commit);
    std::lock_guard lock(rk_mu_);
    if (rk_ == nullptr) {
        return;
    }
    rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, config_.topic.c_str(), partition)->offset = commit;
    rd_kafka_offsets_store(rk_, list);  // local: committed with the next interval
    rd_kafka_topic_partition_list_destroy(list);
}

namespace {

auto header_text(rd_kafka_headers_t* hs, const char* name) -> std::string_view {
    const void* v = nullptr;
    std::size_t n = 0;
    if (hs == nullptr || rd_kafka_header_get_last(hs, name, &v, &n) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        v == nullptr) {
        return {};
    }
    return {static_cast<const char*>(v), n};
}

template <typename T>
auto header_number(rd_kafka_headers_t* hs, const char* name, T otherwise) -> T {
    const std::string_view s = header_text(hs, name);
    T value{};
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    return ec == std::errc{} && end == s.data() + s.size() && !s.empty() ? value : otherwise;
}

}  // namespace

auto kafka_consumer::fetched(const rd_kafka_message_t* m, std::vector<copy_request>& copies)
    -> entry_iter {
    const std::int32_t partition = m->partition;
    const std::int64_t offset = m->offset;
    partition_state& ps = parts_[partition];
    const bool seen = ps.fetched >= 0 && offset < ps.fetched;
    ps.fetched = std::max(ps.fetched, offset + 1);
    rd_kafka_headers_t* hs = nullptr;
    if (rd_kafka_message_headers(m, &hs) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        hs = nullptr;
    }
    const std::string_view requeued_for = header_text(hs, "weft-requeued-for");
    const auto from = header_number<std::int64_t>(hs, "weft-requeued-from", -1);
    auto out = entries_.end();
    if (auto a = ps.anchors.find(offset); a != ps.anchors.end()) {
        // The copy of an entry held here, reached: it holds the entry's place from here on.
        auto it = entries_.find(a->second);
        if (it != entries_.end() && it->second.state == entry_state::settled) {
            erase(it);
        }
    } else if (!requeued_for.empty() && requeued_for != config_.group) {
        // Another group's copy of a message: settled for this one.
    } else if (auto c = requeued_for.empty() ? ps.anchors.end() : ps.anchors.find(from);
               c != ps.anchors.end() && entries_.count(c->second) != 0 &&
               entries_.find(c->second)->second.copying) {
        // This member's copy, fetched before Kafka's report of it: the same, from here.
        auto it = entries_.find(c->second);
        it->second.copying = false;
        if (it->second.state == entry_state::settled) {
            erase(it);
        } else {
            move_anchor(it, offset);
        }
    } else if (!seen) {
        thread_local std::vector<cloudevents::wire_header> headers;
        headers.clear();
        kafka_headers(m, headers);
        const std::string_view value(static_cast<const char*>(m->payload), m->len);
        const std::string_view record_key(static_cast<const char*>(m->key), m->key_len);
        std::string why;
        auto env = cloudevents::read(headers, value, config_.topic, record_key,
                                     cloudevents::binding::kafka, why);
        const std::uint64_t id = ++next_id_;
        auto it = entries_.try_emplace(id).first;
        entry& e = it->second;
        e.partition = partition;
        e.anchor = offset;
        e.state = entry_state::dead_lettering;  // no timer yet
        ps.anchors[offset] = id;
        if (!env) {
            // No wire mode reads it: nothing a member could do with it. It goes to the dead
            // letters as it came, with its defect in weft-malformed; it counts as settled once
            // Kafka has that copy (the committed offset waits for it, so nothing is lost).
            envelope raw;
            raw.key = record_key;
            raw.payload = value;
            for (const auto& h : headers) {
                raw.headers.push_back(header{std::string(h.name), std::string(h.value)});
            }
            e.env = std::make_shared<const envelope>(std::move(raw));
            copies.push_back(
                {kafka_copy::dead_letter, id, partition, offset, e.env, std::move(why), 0, true});
        } else {
            e.env = std::make_shared<const envelope>(std::move(*env));
            e.attempt = std::max(header_number<std::uint32_t>(hs, "weft-deliveries", 0),
                                 conn_->take_count(message_key(partition, offset)));
            if (config_.max_deliveries != 0 && e.attempt >= config_.max_deliveries) {
                // Its last allowed delivery failed on another member (or process).
                dead_letter(
                    it, "max deliveries (" + std::to_string(config_.max_deliveries) + ") reached",
                    copies);
            } else {
                out = it;
            }
        }
    }
    store(partition);
    check_lag(partition, copies);
    return out;
}

auto kafka_consumer::due(clock::time_point now,
                         std::vector<copy_request>& copies,
                         clock::time_point& next_due) -> entry_iter {
    while (!timers_.empty()) {
        const auto [when, id] = *timers_.begin();
        if (when > now) {
            next_due = when;
            return entries_.end();
        }
        auto it = entries_.find(id);
        if (it->second.state == entry_state::retry) {
            return it;
        }
        expire(it, now, copies);  // its ack timeout passed
    }
    return entries_.end();
}

auto kafka_consumer::find_pending(std::uint64_t token, std::vector<copy_request>& copies)
    -> entry_iter {
    auto t = tokens_.find(token);
    if (t == tokens_.end()) {
        return entries_.end();
    }
    auto it = entries_.find(t->second);  // tokens_ names pending entries only
    const auto now = clock::now();
    if (it->second.when <= now) {
        expire(it, now, copies);
        return entries_.end();
    }
    return it;
}

void kafka_consumer::send(std::vector<copy_request>& copies) {
    const wire_options& wire = conn_->options.wire;
    std::string buffer;
    std::string_view value;
    rd_kafka_headers_t* hs = nullptr;
    // The configured wire mode; an envelope a CloudEvent cannot express (a header named as
    // weft allowed before) goes in weft's encoding, which every weft subscriber reads.
    const auto record = [&](const envelope& env) {
        if (kafka_record(env, wire, buffer, value, hs)) {
            (void)kafka_record(env, wire_options{.mode = wire_mode::weft}, buffer, value, hs);
        }
        return std::string(value);
    };
    for (auto& c : copies) {
        if (c.raw) {
            hs = rd_kafka_headers_new(c.env->headers.size() + 2);
            for (const header& h : c.env->headers) {
                rd_kafka_header_add(hs, h.name.data(), static_cast<ssize_t>(h.name.size()),
                                    h.value.data(), static_cast<ssize_t>(h.value.size()));
            }
            rd_kafka_header_add(hs, "weft-malformed", -1, c.reason.data(),
                                static_cast<ssize_t>(c.reason.size()));
            rd_kafka_header_add(hs, "weft-original-topic", -1, config_.topic.data(),
                                static_cast<ssize_t>(config_.topic.size()));
            conn_->copy(weak_from_this(), c.kind, c.entry, config_.dead_letter_topic,
                        RD_KAFKA_PARTITION_UA, c.env->key, c.env->payload, hs);
            continue;
        }
        if (c.kind == kafka_copy::dead_letter) {
            envelope out = *c.env;
            out.topic = config_.dead_letter_topic;
            out.headers.push_back(header{"weftdeadletterreason", c.reason});
            out.headers.push_back(header{"weftoriginaltopic", config_.topic});
            out.headers.push_back(header{"weftoriginalgroup", config_.group});
            out.headers.push_back(header{"weftdeliveries", std::to_string(c.deliveries)});
            const std::string bytes = record(out);
            conn_->copy(weak_from_this(), c.kind, c.entry, config_.dead_letter_topic,
                        RD_KAFKA_PARTITION_UA, out.key, bytes, hs);
            continue;
        }
        const std::string bytes = record(*c.env);
        const std::string from = std::to_string(c.anchor);
        const std::string deliveries = std::to_string(c.deliveries);
        rd_kafka_header_add(hs, "weft-requeued-for", -1, config_.group.data(),
                            static_cast<ssize_t>(config_.group.size()));
        rd_kafka_header_add(hs, "weft-requeued-from", -1, from.data(),
                            static_cast<ssize_t>(from.size()));
        rd_kafka_header_add(hs, "weft-deliveries", -1, deliveries.data(),
                            static_cast<ssize_t>(deliveries.size()));
        conn_->copy(weak_from_this(), c.kind, c.entry, config_.topic, c.partition, c.env->key,
                    bytes, hs);
    }
    copies.clear();
}

void kafka_consumer::copy_done(kafka_copy kind, std::uint64_t id, std::int64_t offset) {
    std::lock_guard lock(mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) {
        return;  // dropped meanwhile (revoked, closed)
    }
    entry& e = it->second;
    if (kind == kafka_copy::dead_letter) {
        if (e.state != entry_state::dead_lettering) {
            return;
        }
        if (offset >= 0) {
            settle(it);
        } else {
            set_timer(it, entry_state::retry, clock::now());  // not stored: delivered again
            wake();
        }
        return;
    }
    if (!e.copying) {
        return;  // the copy was fetched first and took over then
    }
    e.copying = false;
    const std::int32_t partition = e.partition;
    if (offset >= 0 && offset >= parts_[partition].fetched) {
        move_anchor(it, offset);
    }
    if (e.state == entry_state::settled && e.anchor < parts_[partition].fetched) {
        erase(it);  // settled meanwhile, and no copy ahead after all
    }
    store(partition);
}

auto kafka_consumer::entries() -> std::size_t {
    std::lock_guard lock(mu_);
    return entries_.size();
}

auto kafka_consumer::take_due(clock::time_point& next_due) -> std::optional<delivery> {
    std::vector<copy_request> copies;
    std::optional<delivery> out;
    {
        std::lock_guard lock(mu_);
        const auto now = clock::now();
        auto it = due(now, copies, next_due);
        if (it != entries_.end() && !closed_.load()) {
            out.emplace(hand_out(it, now));
        }
    }
    send(copies);
    return out;
}

auto kafka_consumer::take_fresh(bool& took) -> result<std::optional<delivery>> {
    rd_kafka_message_t* m = nullptr;
    {
        std::lock_guard lock(rk_mu_);
        if (msgs_ == nullptr) {
            return make_error_code(bus_errc::subscription_closed);
        }
        m = rd_kafka_consume_queue(msgs_, 0);
    }
    took = m != nullptr;
    std::optional<delivery> out;
    if (m == nullptr) {
        return out;
    }
    std::vector<copy_request> copies;
    // Errors are reports (a broker went away...): librdkafka retries on its own.
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        std::lock_guard lock(mu_);
        if (!closed_.load()) {
            auto it = fetched(m, copies);
            if (it != entries_.end()) {
                out.emplace(hand_out(it, clock::now()));
            }
        }
    }
    rd_kafka_message_destroy(m);
    send(copies);
    return out;
}

auto kafka_consumer::next() -> task<result<delivery>> {
    for (;;) {
        if (closed_.load()) {
            co_return make_error_code(bus_errc::subscription_closed);
        }
        // A due retry (ack timeouts are expired first) and a fresh message take turns when
        // both are there: a retry waits for one fresh message at most, never for the backlog,
        // and a message nacked at every delivery does not stop the others.
        auto next_due = clock::time_point::max();
        bool took = false;
        std::optional<delivery> out;
        if (!retry_last_) {
            out = take_due(next_due);
        }
        if (!out) {
            auto fresh = take_fresh(took);
            if (!fresh) {
                co_return fresh.error();
            }
            out = std::move(*fresh);
            if (out) {
                retry_last_ = false;
                co_return std::move(*out);
            }
        }
        if (!out && !took && retry_last_) {
            out = take_due(next_due);
        }
        if (out) {
            retry_last_ = true;
            co_return std::move(*out);
        }
        if (took) {
            continue;  // a record with nothing to hand out: the next one
        }
        // Nothing to hand out: wait for librdkafka's signal (the queue turned non-empty),
        // nack(), close(), or the next deadline.
        auto wait = std::chrono::milliseconds(1'000);
        if (next_due != clock::time_point::max()) {
            wait = std::clamp(std::chrono::ceil<std::chrono::milliseconds>(next_due - clock::now()),
                              std::chrono::milliseconds(1), std::chrono::milliseconds(1'000));
        }
        auto r = co_await wait_readable(efd_, wait);
        if (!r && r.error() != std::errc::timed_out) {
            co_return r.error();  // cancelled
        }
        std::uint64_t count = 0;
        [[maybe_unused]] const auto n = ::read(efd_, &count, sizeof(count));
    }
}

auto kafka_consumer::ack(std::uint64_t token) -> result<void> {
    std::vector<copy_request> copies;
    bool ok = false;
    {
        std::lock_guard lock(mu_);
        auto it = find_pending(token, copies);
        if (it != entries_.end()) {
            settle(it);
            ok = true;
        }
    }
    send(copies);
    if (!ok) {
        return make_error_code(bus_errc::not_pending);
    }
    return {};
}

auto kafka_consumer::nack(std::uint64_t token, std::chrono::milliseconds delay) -> result<void> {
    std::vector<copy_request> copies;
    bool ok = false;
    {
        std::lock_guard lock(mu_);
        auto it = find_pending(token, copies);
        if (it != entries_.end()) {
            expire(it, clock::now() + delay, copies);
            ok = true;
        }
    }
    send(copies);
    if (!ok) {
        return make_error_code(bus_errc::not_pending);
    }
    wake();
    return {};
}

auto kafka_consumer::term(std::uint64_t token, std::string_view reason) -> result<void> {
    std::vector<copy_request> copies;
    bool ok = false;
    {
        std::lock_guard lock(mu_);
        auto it = find_pending(token, copies);
        if (it != entries_.end()) {
            dead_letter(it, std::string(reason), copies);
            ok = true;
        }
    }
    send(copies);
    if (!ok) {
        return make_error_code(bus_errc::not_pending);
    }
    return {};
}

auto kafka_consumer::in_progress(std::uint64_t token) -> result<void> {
    std::vector<copy_request> copies;
    bool ok = false;
    {
        std::lock_guard lock(mu_);
        auto it = find_pending(token, copies);
        if (it != entries_.end()) {
            set_timer(it, entry_state::pending, clock::now() + config_.ack_wait);
            ok = true;
        }
    }
    send(copies);
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
        drop(nullptr, true);
    }
    wake();  // a waiting next() returns subscription_closed
    conn_->close_later([self = shared_from_this()] { self->close_client(); });
}

}  // namespace weft::bus
