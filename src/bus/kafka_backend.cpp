#include "weft/bus/kafka_backend.hpp"

#include <array>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <system_error>
#include <thread>
#include <utility>

#include "envelope_id_text.hpp"
#include "kafka_connection.hpp"
#include "kafka_consumer.hpp"
#include "kafka_producer.hpp"
#include "weft/bus/envelope_codec.hpp"
#include "weft/bus/errc.hpp"

namespace weft::bus {

auto kafka_error(rd_kafka_resp_err_t err) -> std::error_code {
    switch (err) {
        case RD_KAFKA_RESP_ERR_NO_ERROR:
            return {};
        case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
        case RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE:
            return make_error_code(bus_errc::message_too_large);
        case RD_KAFKA_RESP_ERR__MSG_TIMED_OUT:
        case RD_KAFKA_RESP_ERR__TIMED_OUT:
        case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
            return std::make_error_code(std::errc::timed_out);
        case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
        case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
        case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
            return make_error_code(bus_errc::no_stream);
        case RD_KAFKA_RESP_ERR__TRANSPORT:
        case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN:
        case RD_KAFKA_RESP_ERR__RESOLVE:
            return make_error_code(bus_errc::broker_unreachable);
        default:
            return make_error_code(bus_errc::broker_error);
    }
}

auto kafka_conf(const kafka_backend_options& options,
                std::initializer_list<std::pair<const char*, std::string>> props)
    -> rd_kafka_conf_t* {
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    char err[512];
    auto set = [&](const char* name, const std::string& value) {
        if (rd_kafka_conf_set(conf, name, value.c_str(), err, sizeof(err)) != RD_KAFKA_CONF_OK) {
            rd_kafka_conf_destroy(conf);
            throw std::system_error(
                std::make_error_code(std::errc::invalid_argument),
                std::string("weft::bus::kafka_backend: ") + name + "=" + value + ": " + err);
        }
    };
    set("bootstrap.servers", options.brokers);
    set("client.id", "weft-bus");
    if (options.tls.enabled) {
        set("security.protocol", "ssl");
        // The broker's name is checked against its certificate (librdkafka's default since
        // 2.0; said here so that an older one does too).
        set("ssl.endpoint.identification.algorithm", "https");
        if (!options.tls.ca_file.empty()) {
            set("ssl.ca.location", options.tls.ca_file);
        }
        if (!options.tls.cert_file.empty()) {
            set("ssl.certificate.location", options.tls.cert_file);
        }
        if (!options.tls.key_file.empty()) {
            set("ssl.key.location", options.tls.key_file);
        }
    }
    // librdkafka's own debug contexts (e.g. "cgrp,consumer"), logged to stderr: for diagnosis.
    if (const char* debug = std::getenv("WEFT_KAFKA_DEBUG"); debug != nullptr && *debug != 0) {
        set("debug", debug);
    }
    for (const auto& [name, value] : props) {
        set(name, value);
    }
    return conf;
}

auto kafka_record(const envelope& env,
                  const wire_options& wire,
                  std::string& buffer,
                  std::string_view& value,
                  rd_kafka_headers_t*& headers) -> std::error_code {
    headers = nullptr;
    buffer.clear();
    switch (wire.mode) {
        case wire_mode::binary: {
            thread_local std::string why;
            if (const std::error_code ec = cloudevents::check(env, why)) {
                return ec;
            }
            thread_local std::string text;
            thread_local std::vector<cloudevents::wire_header> hs;
            cloudevents::to_binary(env, wire.source, cloudevents::binding::kafka, hs, text);
            headers = rd_kafka_headers_new(hs.size());
            for (const auto& h : hs) {
                rd_kafka_header_add(headers, h.name.data(), static_cast<ssize_t>(h.name.size()),
                                    h.value.data(), static_cast<ssize_t>(h.value.size()));
            }
            value = env.payload;
            return {};
        }
        case wire_mode::structured: {
            thread_local std::string why;
            if (const std::error_code ec = cloudevents::check(env, why)) {
                return ec;
            }
            cloudevents::to_structured(env, wire.source, buffer);
            headers = rd_kafka_headers_new(1);
            const std::string_view ct = cloudevents::structured_content_type;
            rd_kafka_header_add(headers, "content-type", -1, ct.data(),
                                static_cast<ssize_t>(ct.size()));
            value = buffer;
            return {};
        }
        case wire_mode::weft:
            break;
    }
    encode(env, buffer);
    std::array<char, id_text_size> id{};
    id_text(env.id, id.data());
    headers = rd_kafka_headers_new(1);
    rd_kafka_header_add(headers, "weft-id", -1, id.data(), static_cast<ssize_t>(id.size()));
    value = buffer;
    return {};
}

void kafka_headers(const rd_kafka_message_t* m, std::vector<cloudevents::wire_header>& out) {
    rd_kafka_headers_t* hs = nullptr;
    if (rd_kafka_message_headers(m, &hs) != RD_KAFKA_RESP_ERR_NO_ERROR || hs == nullptr) {
        return;
    }
    const char* name = nullptr;
    const void* v = nullptr;
    std::size_t n = 0;
    for (std::size_t i = 0;
         rd_kafka_header_get_all(hs, i, &name, &v, &n) == RD_KAFKA_RESP_ERR_NO_ERROR; ++i) {
        out.push_back({name, std::string_view(v != nullptr ? static_cast<const char*>(v) : "", n)});
    }
}

auto kafka_produce(rd_kafka_t* rk,
                   const char* topic,
                   std::string_view key,
                   std::string_view value,
                   rd_kafka_headers_t* headers,
                   void* opaque,
                   rd_kafka_topic_t* rkt,
                   std::int32_t partition) -> rd_kafka_resp_err_t {
    std::array<rd_kafka_vu_t, 7> vus{};
    std::size_t n = 0;
    if (rkt != nullptr) {
        vus[n].vtype = RD_KAFKA_VTYPE_RKT;
        vus[n++].u.rkt = rkt;
    } else {
        vus[n].vtype = RD_KAFKA_VTYPE_TOPIC;
        vus[n++].u.cstr = topic;
    }
    if (partition != RD_KAFKA_PARTITION_UA) {
        vus[n].vtype = RD_KAFKA_VTYPE_PARTITION;
        vus[n++].u.i32 = partition;
    }
    if (!key.empty()) {
        vus[n].vtype = RD_KAFKA_VTYPE_KEY;
        vus[n].u.mem.ptr = const_cast<char*>(key.data());
        vus[n++].u.mem.size = key.size();
    }
    vus[n].vtype = RD_KAFKA_VTYPE_VALUE;
    vus[n].u.mem.ptr = const_cast<char*>(value.data());
    vus[n++].u.mem.size = value.size();
    vus[n].vtype = RD_KAFKA_VTYPE_MSGFLAGS;
    vus[n++].u.i = RD_KAFKA_MSG_F_COPY;
    if (headers != nullptr) {
        vus[n].vtype = RD_KAFKA_VTYPE_HEADERS;
        vus[n++].u.headers = headers;
    }
    vus[n].vtype = RD_KAFKA_VTYPE_OPAQUE;
    vus[n++].u.ptr = opaque;
    rd_kafka_error_t* error = rd_kafka_produceva(rk, vus.data(), n);
    if (error == nullptr) {
        return RD_KAFKA_RESP_ERR_NO_ERROR;
    }
    // A client with a fatal error refuses with that error's own code, marked fatal: as
    // rd_kafka_producev does, report it as ERR__FATAL.
    const rd_kafka_resp_err_t e =
        rd_kafka_error_is_fatal(error) ? RD_KAFKA_RESP_ERR__FATAL : rd_kafka_error_code(error);
    rd_kafka_error_destroy(error);
    return e;
}

namespace {

struct copy_op {
    std::weak_ptr<kafka_copy_sink> sink;
    kafka_copy kind;
    std::uint64_t entry;
};

// The administrative client's events, on librdkafka's background thread: copies (dead letters,
// requeued messages) stored (or not), and the results of asynchronous topic creation (nothing
// to do).
void on_aux_event(rd_kafka_t* /*rk*/, rd_kafka_event_t* ev, void* /*opaque*/) {
    if (rd_kafka_event_type(ev) == RD_KAFKA_EVENT_DR) {
        while (const rd_kafka_message_t* m = rd_kafka_event_message_next(ev)) {
            std::unique_ptr<copy_op> op(static_cast<copy_op*>(m->_private));
            if (op == nullptr) {
                continue;
            }
            if (auto s = op->sink.lock()) {
                s->copy_done(op->kind, op->entry, kafka_confirmed(m) ? m->offset : -1);
            }
        }
    }
    rd_kafka_event_destroy(ev);
}

auto ms(std::chrono::milliseconds d) -> std::string { return std::to_string(d.count()); }

}  // namespace

void kafka_backend::connection::shutdown() noexcept {
    {
        std::lock_guard lock(closer_mu);
        closer_stop = true;
    }
    closer_cv.notify_all();
    if (closer.joinable() && closer.get_id() != std::this_thread::get_id()) {
        closer.join();
    }
}

kafka_backend::connection::~connection() {
    shutdown();
    if (closer.joinable()) {
        closer.detach();  // this is the closer thread itself, ending
    }
    if (aux != nullptr) {
        rd_kafka_flush(aux, 5'000);  // dead letters still in flight
        rd_kafka_destroy(aux);
    }
}

void kafka_backend::connection::close_later(std::function<void()> job) {
    {
        std::lock_guard lock(closer_mu);
        if (!closer_stop) {
            closer_jobs.push_back(std::move(job));
            job = nullptr;
        }
    }
    if (job) {
        job();  // the backend is gone (its closer thread with it): here, then
        return;
    }
    closer_cv.notify_one();
}

auto kafka_backend::connection::ensure_topics(const std::vector<std::string>& topics)
    -> std::error_code {
    std::vector<std::string> missing;
    {
        std::lock_guard lock(topics_mu);
        for (const auto& t : topics) {
            if (!known_topics.contains(t)) {
                missing.push_back(t);
            }
        }
    }
    if (missing.empty()) {
        return {};
    }
    char err[512];
    std::vector<rd_kafka_NewTopic_t*> news;
    for (const auto& t : missing) {
        news.push_back(rd_kafka_NewTopic_new(t.c_str(), options.partitions,
                                             options.replication_factor, err, sizeof(err)));
        if (news.back() == nullptr) {
            news.pop_back();
            for (auto* n : news) {
                rd_kafka_NewTopic_destroy(n);
            }
            return std::make_error_code(std::errc::invalid_argument);
        }
    }
    rd_kafka_AdminOptions_t* ao = rd_kafka_AdminOptions_new(aux, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    rd_kafka_AdminOptions_set_operation_timeout(ao, static_cast<int>(options.admin_timeout.count()),
                                                err, sizeof(err));
    rd_kafka_AdminOptions_set_request_timeout(ao, static_cast<int>(options.admin_timeout.count()),
                                              err, sizeof(err));
    rd_kafka_queue_t* q = rd_kafka_queue_new(aux);
    rd_kafka_CreateTopics(aux, news.data(), news.size(), ao, q);
    rd_kafka_event_t* ev =
        rd_kafka_queue_poll(q, static_cast<int>(options.admin_timeout.count()) + 1'000);
    std::error_code ec;
    if (ev == nullptr) {
        ec = std::make_error_code(std::errc::timed_out);
    } else if (rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        ec = kafka_error(rd_kafka_event_error(ev));
    } else {
        std::size_t n = 0;
        const rd_kafka_topic_result_t** results =
            rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
        for (std::size_t i = 0; i < n; ++i) {
            const auto e = rd_kafka_topic_result_error(results[i]);
            if (e != RD_KAFKA_RESP_ERR_NO_ERROR && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
                ec = kafka_error(e);
            }
        }
    }
    if (ev != nullptr) {
        rd_kafka_event_destroy(ev);
    }
    rd_kafka_queue_destroy(q);
    rd_kafka_AdminOptions_destroy(ao);
    for (auto* n : news) {
        rd_kafka_NewTopic_destroy(n);
    }
    if (ec) {
        return ec;
    }
    // Created on the controller; wait until the metadata a client reads shows every one (a
    // consumer that subscribes before that would wait for its next metadata refresh).
    const auto deadline = std::chrono::steady_clock::now() + options.admin_timeout;
    for (const auto& t : missing) {
        rd_kafka_topic_t* rkt = rd_kafka_topic_new(aux, t.c_str(), nullptr);
        for (;;) {
            const rd_kafka_metadata_t* md = nullptr;
            const auto e = rd_kafka_metadata(aux, 0, rkt, &md, 2'000);
            bool seen = false;
            if (e == RD_KAFKA_RESP_ERR_NO_ERROR && md->topic_cnt == 1) {
                seen = md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR &&
                       md->topics[0].partition_cnt > 0;
            }
            if (md != nullptr) {
                rd_kafka_metadata_destroy(md);
            }
            if (seen) {
                break;
            }
            if (std::chrono::steady_clock::now() > deadline) {
                rd_kafka_topic_destroy(rkt);
                return std::make_error_code(std::errc::timed_out);
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        rd_kafka_topic_destroy(rkt);
    }
    std::lock_guard lock(topics_mu);
    for (auto& t : missing) {
        known_topics.insert(std::move(t));
    }
    return {};
}

void kafka_backend::connection::ensure_topic_async(std::string_view topic) {
    if (!options.create_topics_on_use) {
        return;
    }
    {
        std::lock_guard lock(topics_mu);
        if (!known_topics.emplace(topic).second) {
            return;
        }
    }
    char err[512];
    const std::string name(topic);
    rd_kafka_NewTopic_t* nt = rd_kafka_NewTopic_new(name.c_str(), options.partitions,
                                                    options.replication_factor, err, sizeof(err));
    if (nt == nullptr) {
        return;  // an invalid name: the publish reports it
    }
    rd_kafka_queue_t* bg = rd_kafka_queue_get_background(aux);
    rd_kafka_CreateTopics(aux, &nt, 1, nullptr, bg);
    rd_kafka_queue_destroy(bg);
    rd_kafka_NewTopic_destroy(nt);
}

void kafka_backend::connection::join_group(const std::string& group_topic) {
    std::lock_guard lock(counts_mu);
    ++members[group_topic];
}

void kafka_backend::connection::hand_over(
    const std::string& group_topic,
    std::vector<std::pair<kafka_message_key, std::uint32_t>> given,
    bool leaving) {
    std::lock_guard lock(counts_mu);
    auto m = members.find(group_topic);
    const std::size_t others = m == members.end() ? 0 : m->second - (m->second > 0 ? 1 : 0);
    if (others > 0) {
        for (auto& [k, n] : given) {
            counts[std::move(k)] = n;
        }
    }
    if (!leaving || m == members.end()) {
        return;
    }
    if (others > 0) {
        --m->second;
        return;
    }
    members.erase(m);
    counts.erase(counts.lower_bound({group_topic, std::numeric_limits<std::int32_t>::min(),
                                     std::numeric_limits<std::int64_t>::min()}),
                 counts.upper_bound({group_topic, std::numeric_limits<std::int32_t>::max(),
                                     std::numeric_limits<std::int64_t>::max()}));
}

auto kafka_backend::connection::take_count(const kafka_message_key& key) -> std::uint32_t {
    std::lock_guard lock(counts_mu);
    auto it = counts.find(key);
    if (it == counts.end()) {
        return 0;
    }
    const std::uint32_t n = it->second;
    counts.erase(it);
    return n;
}

void kafka_backend::connection::settled_below(const std::string& group_topic,
                                              std::int32_t partition,
                                              std::int64_t offset) {
    std::lock_guard lock(counts_mu);
    if (counts.empty()) {
        return;
    }
    counts.erase(
        counts.lower_bound({group_topic, partition, std::numeric_limits<std::int64_t>::min()}),
        counts.lower_bound({group_topic, partition, offset}));
}

void kafka_backend::connection::add_consumer(std::weak_ptr<kafka_consumer_probe> c) {
    std::lock_guard lock(consumers_mu);
    std::erase_if(consumers, [](const auto& w) { return w.expired(); });
    consumers.push_back(std::move(c));
}

void kafka_backend::connection::copy(std::weak_ptr<kafka_copy_sink> sink,
                                     kafka_copy kind,
                                     std::uint64_t entry,
                                     const std::string& topic,
                                     std::int32_t partition,
                                     std::string_view key,
                                     const std::string& bytes,
                                     rd_kafka_headers_t* headers) {
    ensure_topic_async(topic);
    auto op = std::make_unique<copy_op>(copy_op{sink, kind, entry});
    const rd_kafka_resp_err_t e =
        kafka_produce(aux, topic.c_str(), key, bytes, headers, op.get(), nullptr, partition);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        if (headers != nullptr) {
            rd_kafka_headers_destroy(headers);
        }
        if (auto s = sink.lock()) {
            s->copy_done(kind, entry, -1);
        }
        return;
    }
    (void)op.release();  // on_aux_event frees it
}

kafka_backend::kafka_backend(kafka_backend_options options)
    : conn_(std::make_shared<connection>()) {
    connection& c = *conn_;
    c.options = std::move(options);
    rd_kafka_conf_t* conf =
        kafka_conf(c.options, {{"enable.idempotence", "true"},
                               {"acks", "all"},
                               {"linger.ms", ms(c.options.linger)},
                               {"partitioner", "murmur2_random"},
                               {"message.timeout.ms", ms(c.options.publish_timeout)}});
    rd_kafka_conf_set_events(conf, RD_KAFKA_EVENT_DR);
    rd_kafka_conf_set_background_event_cb(conf, &on_aux_event);
    char err[512];
    c.aux = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
    if (c.aux == nullptr) {
        rd_kafka_conf_destroy(conf);
        throw std::system_error(make_error_code(bus_errc::broker_error),
                                std::string("weft::bus::kafka_backend: ") + err);
    }
    // Delivery reports go where the admin results go: to the background thread.
    rd_kafka_queue_t* main_q = rd_kafka_queue_get_main(c.aux);
    rd_kafka_queue_t* bg = rd_kafka_queue_get_background(c.aux);
    rd_kafka_queue_forward(main_q, bg);
    rd_kafka_queue_destroy(bg);
    rd_kafka_queue_destroy(main_q);
    c.closer = std::thread([&c] {
        std::unique_lock lock(c.closer_mu);
        for (;;) {
            c.closer_cv.wait(lock, [&c] { return c.closer_stop || !c.closer_jobs.empty(); });
            if (c.closer_jobs.empty()) {
                return;  // stopping, and nothing left to close
            }
            auto job = std::move(c.closer_jobs.front());
            c.closer_jobs.pop_front();
            lock.unlock();
            job();
            job = nullptr;  // what it holds may hand the closer another job: unlocked
            lock.lock();
        }
    });

    // Reachability first, with the brokers in the message.
    const rd_kafka_metadata_t* md = nullptr;
    const auto e = rd_kafka_metadata(c.aux, 0, nullptr, &md,
                                     static_cast<int>(c.options.admin_timeout.count()));
    if (md != nullptr) {
        rd_kafka_metadata_destroy(md);
    }
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        throw std::system_error(make_error_code(bus_errc::broker_unreachable),
                                "weft::bus::kafka_backend: no broker answers at " +
                                    c.options.brokers + ": " + rd_kafka_err2str(e));
    }
    std::vector<std::string> topics;
    for (const auto& t : c.options.topics) {
        topics.push_back(t);
        topics.push_back(t + ".dead-letter");
    }
    if (auto ec = c.ensure_topics(topics)) {
        throw std::system_error(
            ec, "weft::bus::kafka_backend: creating topics on " + c.options.brokers);
    }
}

kafka_backend::~kafka_backend() {
    // Clients still closing are closed before the backend is gone; the connection itself may
    // live on a little in a drain task that is ending.
    conn_->shutdown();
}

auto kafka_backend::features() const noexcept -> backend_features {
    backend_features f;
    f.durable = true;  // acks=all; as durable as the topics' replication makes it
    // The idempotent producer drops its own retries, not a re-published id.
    f.deduplicates_ids = false;
    // Holding acks would mean stopping the broker (SIGSTOP) from inside a test: not offered.
    f.can_pause = false;
    f.returns_on_close = true;  // a closing member leaves its group at once
    // enable.idempotence=true (always set by kafka_producer): the producer numbers each
    // partition's messages and the broker refuses one out of sequence, so internal retries
    // never reorder or duplicate within a partition, and a key always maps to one partition.
    f.keeps_partition_prefix = true;
    return f;
}

auto kafka_backend::stats() const noexcept -> kafka_backend_stats {
    kafka_backend_stats s{
        .acks = conn_->acks.load(std::memory_order_relaxed),
        .wakes = conn_->wakes.load(std::memory_order_relaxed),
        .producers_recreated = conn_->producers_recreated.load(std::memory_order_relaxed),
        .resent = conn_->resent.load(std::memory_order_relaxed),
        .consumers_closed = conn_->consumers_closed.load(std::memory_order_relaxed)};
    std::vector<std::shared_ptr<kafka_consumer_probe>> alive;
    {
        std::lock_guard lock(conn_->consumers_mu);
        for (auto& w : conn_->consumers) {
            if (auto c = w.lock()) {
                alive.push_back(std::move(c));
            }
        }
    }
    for (auto& c : alive) {
        s.consumer_entries += c->entries();
    }
    {
        std::lock_guard lock(conn_->counts_mu);
        s.delivery_counts = conn_->counts.size();
    }
    return s;
}

void kafka_backend::run_on_closer_for_test(std::function<void()> job) {
    conn_->close_later(std::move(job));
}

void kafka_backend::raise_fatal_error_for_test(const std::string& reason) {
    std::vector<std::shared_ptr<kafka_fatal_target>> alive;
    {
        std::lock_guard lock(conn_->producers_mu);
        for (auto& w : conn_->producers) {
            if (auto p = w.lock()) {
                alive.push_back(std::move(p));
            }
        }
    }
    for (auto& p : alive) {
        p->raise_fatal(reason);
    }
}

auto kafka_backend::make_producer(publish_sink& sink, std::uint32_t max_pending)
    -> result<std::unique_ptr<backend_producer>> {
    return kafka_producer::make(conn_, sink, max_pending);
}

auto kafka_backend::make_consumer(consumer_config config)
    -> task<result<std::shared_ptr<backend_consumer>>> {
    co_return co_await kafka_consumer::make(conn_, std::move(config));
}

}  // namespace weft::bus
