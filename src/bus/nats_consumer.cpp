#include "nats_consumer.hpp"

#include <cstdio>
#include <thread>
#include <utility>
#include <vector>

#include "weft/bus/envelope_codec.hpp"
#include "weft/bus/errc.hpp"
#include "weft/sched/spawn_blocking.hpp"

namespace weft::bus {
namespace {

/// The durable consumer's name for (topic, group): the group's readable part and a hash of
/// both (consumer names may not hold '.', '*', '>' or spaces, and two topics that differ only
/// in such characters must not share one).
auto durable_name(const std::string& topic, const std::string& group) -> std::string {
    std::uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a over "topic\0group"
    auto mix = [&](const std::string& s) {
        for (const char c : s) {
            h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
        }
    };
    mix(topic);
    h = (h ^ 0U) * 0x100000001b3ULL;
    mix(group);
    std::string name = "weft_";
    for (const char c : group.substr(0, 32)) {
        const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                           (c >= '0' && c <= '9') || c == '-' || c == '_';
        name += plain ? c : '_';
    }
    char hex[20];
    std::snprintf(hex, sizeof(hex), "_%016llx", static_cast<unsigned long long>(h));
    return name + hex;
}

}  // namespace

auto nats_consumer::make(std::shared_ptr<nats_backend::connection> conn, consumer_config config)
    -> task<result<std::shared_ptr<backend_consumer>>> {
    auto c = std::make_shared<nats_consumer>(std::move(conn), std::move(config));
    nats_consumer* raw = c.get();
    std::error_code ec;
    auto r = co_await spawn_blocking([raw, &ec] { ec = raw->bind(); });
    if (!r) {
        co_return r.error();
    }
    if (ec) {
        co_return ec;
    }
    std::shared_ptr<backend_consumer> out = std::move(c);
    co_return out;
}

auto nats_consumer::bind() -> std::error_code {
    const nats_stream_config* s = conn_->stream_for(config_.topic);
    if (s == nullptr) {
        return make_error_code(bus_errc::no_stream);
    }
    stream_ = s->name;
    durable_ = durable_name(config_.topic, config_.group);
    jsErrCode code = static_cast<jsErrCode>(0);
    jsConsumerInfo* ci = nullptr;
    natsStatus st =
        js_GetConsumerInfo(&ci, conn_->js, stream_.c_str(), durable_.c_str(), nullptr, &code);
    if (st == NATS_NOT_FOUND || code == JSConsumerNotFoundErr) {
        // The group's first member fixes its settings. Concurrent first members send the same
        // configuration, which the server accepts as the same consumer.
        jsConsumerConfig cc;
        jsConsumerConfig_Init(&cc);
        cc.Durable = durable_.c_str();
        cc.FilterSubject = config_.topic.c_str();
        cc.DeliverPolicy = js_DeliverAll;
        cc.AckPolicy = js_AckExplicit;
        cc.AckWait = std::chrono::duration_cast<std::chrono::nanoseconds>(config_.ack_wait).count();
        // Unlimited on the server: the limit is ours, so that the message past it goes to the
        // dead letters instead of staying in the stream undelivered.
        cc.MaxDeliver = -1;
        if (ci != nullptr) {
            jsConsumerInfo_Destroy(ci);
            ci = nullptr;
        }
        st = js_AddConsumer(&ci, conn_->js, stream_.c_str(), &cc, nullptr, &code);
    }
    if (ci != nullptr) {
        jsConsumerInfo_Destroy(ci);
    }
    if (st != NATS_OK) {
        return nats_error(st, code);
    }
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = stream_.c_str();
    so.Consumer = durable_.c_str();  // bound: the subscription never deletes the consumer
    st = js_PullSubscribe(&sub_, conn_->js, config_.topic.c_str(), durable_.c_str(), nullptr, &so,
                          &code);
    if (st != NATS_OK) {
        return nats_error(st, code);
    }
    return {};
}

nats_consumer::~nats_consumer() {
    close();
    if (sub_ != nullptr) {
        conn_->settle_dead_letters();  // their acks would terminate originals through sub_
        natsSubscription_Destroy(sub_);
    }
}

auto nats_consumer::pull() -> pulled {
    natsMsgList list{};
    jsErrCode code = static_cast<jsErrCode>(0);
    const natsStatus st =
        natsSubscription_Fetch(&list, sub_, 1, conn_->options.fetch_wait.count(), &code);
    if (st == NATS_TIMEOUT) {
        return {};
    }
    if (st != NATS_OK || list.Count == 0) {
        natsMsgList_Destroy(&list);
        // Disconnected (or a server error): fetch fails at once; pace the retries.
        std::this_thread::sleep_for(conn_->options.fetch_wait);
        return {};
    }
    natsMsg* m = list.Msgs[0];
    list.Msgs[0] = nullptr;
    natsMsgList_Destroy(&list);

    jsMsgMetaData* meta = nullptr;
    std::uint64_t delivered = 1;
    std::uint64_t seq = 0;
    if (natsMsg_GetMetaData(&meta, m) == NATS_OK) {
        delivered = meta->NumDelivered;
        seq = meta->Sequence.Stream;
        jsMsgMetaData_Destroy(meta);
    }
    thread_local std::vector<cloudevents::wire_header> headers;
    headers.clear();
    nats_headers(m, headers);
    std::string why;
    auto env = cloudevents::read(
        headers,
        std::string_view(natsMsg_GetData(m), static_cast<std::size_t>(natsMsg_GetDataLength(m))),
        natsMsg_GetSubject(m), "", cloudevents::binding::nats, why);
    if (!env) {
        // Not an event in any mode weft reads: no member could do anything with it. It goes
        // to the dead letters as it came (its headers and body), with the defect in
        // Weft-Malformed, so nothing is lost and the reason can be read there; the original is
        // terminated once the copy is stored.
        send_malformed_to_dead_letters(m, seq, why);
        return {};
    }
    if (config_.max_deliveries != 0 && delivered > config_.max_deliveries) {
        // The last allowed delivery timed out and the server delivered it once more.
        send_to_dead_letters(
            m, *env, "max deliveries (" + std::to_string(config_.max_deliveries) + ") reached",
            config_.max_deliveries);
        return {};
    }
    pulled p;
    p.msg = m;
    p.env = std::make_shared<const envelope>(std::move(*env));
    p.stream_seq = seq;
    p.attempt = static_cast<std::uint32_t>(delivered);
    return p;
}

auto nats_consumer::next() -> task<result<delivery>> {
    for (;;) {
        if (closed_.load()) {
            co_return make_error_code(bus_errc::subscription_closed);
        }
        pulled p;
        {
            std::lock_guard lock(mu_);
            p = std::exchange(stash_, pulled{});
        }
        if (p.msg == nullptr) {
            auto r = co_await spawn_blocking([this] { return pull(); });
            if (!r) {
                co_return r.error();  // cancelled before the pull began
            }
            p = std::move(*r);
            const stop_token stop = co_await get_stop_token();
            if (stop.stop_requested() || closed_.load()) {
                bool closed = false;
                {
                    std::lock_guard lock(mu_);
                    closed = closed_.load();
                    if (!closed && p.msg != nullptr) {
                        stash_ = std::move(p);  // the next next() hands it out
                        p = {};
                    }
                }
                if (p.msg != nullptr) {  // closed: back to the group at once
                    natsMsg_Nak(p.msg, nullptr);
                    natsMsg_Destroy(p.msg);
                }
                if (closed) {
                    co_return make_error_code(bus_errc::subscription_closed);
                }
                co_return std::make_error_code(std::errc::operation_canceled);
            }
        }
        if (p.msg == nullptr) {
            continue;
        }
        std::uint64_t token = 0;
        std::vector<natsMsg*> stale;
        {
            std::lock_guard lock(mu_);
            const auto now = clock::now();
            // No longer pending: earlier deliveries of the same message, and deliveries past
            // their deadline (the server has sent them again, to us or to another member).
            for (auto it = pending_.begin(); it != pending_.end();) {
                if (it->second.stream_seq == p.stream_seq || it->second.deadline <= now) {
                    stale.push_back(it->second.msg);
                    it = pending_.erase(it);
                } else {
                    ++it;
                }
            }
            token = ++next_token_;
            pending_.emplace(
                token, pending{p.msg, p.env, p.stream_seq, p.attempt, now + config_.ack_wait});
        }
        for (natsMsg* m : stale) {
            natsMsg_Destroy(m);
        }
        co_return delivery(shared_from_this(), token, std::move(p.env), p.attempt);
    }
}

auto nats_consumer::take(std::uint64_t token) -> natsMsg* {
    std::lock_guard lock(mu_);
    auto it = pending_.find(token);
    if (it == pending_.end()) {
        return nullptr;
    }
    natsMsg* m = it->second.msg;
    if (it->second.deadline <= clock::now()) {
        pending_.erase(it);
        natsMsg_Destroy(m);
        return nullptr;
    }
    pending_.erase(it);
    return m;
}

auto nats_consumer::ack(std::uint64_t token) -> result<void> {
    natsMsg* m = take(token);
    if (m == nullptr) {
        return make_error_code(bus_errc::not_pending);
    }
    const natsStatus st = natsMsg_Ack(m, nullptr);
    natsMsg_Destroy(m);
    if (st != NATS_OK) {
        return nats_error(st);
    }
    return {};
}

auto nats_consumer::nack(std::uint64_t token, std::chrono::milliseconds delay) -> result<void> {
    std::shared_ptr<const envelope> env;
    std::uint32_t attempt = 0;
    natsMsg* m = nullptr;
    {
        std::lock_guard lock(mu_);
        auto it = pending_.find(token);
        if (it != pending_.end()) {
            m = it->second.msg;
            env = it->second.env;
            attempt = it->second.attempt;
            const bool expired = it->second.deadline <= clock::now();
            pending_.erase(it);
            if (expired) {
                natsMsg_Destroy(m);
                m = nullptr;
            }
        }
    }
    if (m == nullptr) {
        return make_error_code(bus_errc::not_pending);
    }
    if (config_.max_deliveries != 0 && attempt >= config_.max_deliveries) {
        send_to_dead_letters(
            m, *env, "max deliveries (" + std::to_string(config_.max_deliveries) + ") reached",
            attempt);
        return {};
    }
    const natsStatus st = delay.count() > 0 ? natsMsg_NakWithDelay(m, delay.count(), nullptr)
                                            : natsMsg_Nak(m, nullptr);
    natsMsg_Destroy(m);
    if (st != NATS_OK) {
        return nats_error(st);
    }
    return {};
}

auto nats_consumer::term(std::uint64_t token, std::string_view reason) -> result<void> {
    std::shared_ptr<const envelope> env;
    std::uint32_t attempt = 0;
    natsMsg* m = nullptr;
    {
        std::lock_guard lock(mu_);
        auto it = pending_.find(token);
        if (it != pending_.end() && it->second.deadline > clock::now()) {
            m = it->second.msg;
            env = it->second.env;
            attempt = it->second.attempt;
            pending_.erase(it);
        }
    }
    if (m == nullptr) {
        return make_error_code(bus_errc::not_pending);
    }
    send_to_dead_letters(m, *env, reason, attempt);
    return {};
}

auto nats_consumer::in_progress(std::uint64_t token) -> result<void> {
    natsMsg* m = nullptr;
    {
        std::lock_guard lock(mu_);
        auto it = pending_.find(token);
        if (it == pending_.end() || it->second.deadline <= clock::now()) {
            return make_error_code(bus_errc::not_pending);
        }
        m = it->second.msg;
        it->second.deadline = clock::now() + config_.ack_wait;
        // Sent under the lock: a settle on another thread must not destroy m meanwhile.
        const natsStatus st = natsMsg_InProgress(m, nullptr);
        if (st != NATS_OK) {
            return nats_error(st);
        }
    }
    return {};
}

void nats_consumer::send_to_dead_letters(natsMsg* m,
                                         const envelope& env,
                                         std::string_view reason,
                                         std::uint32_t deliveries) {
    envelope dead = env;
    dead.topic = config_.dead_letter_topic;
    dead.headers.push_back(header{"weftdeadletterreason", std::string(reason)});
    dead.headers.push_back(header{"weftoriginaltopic", config_.topic});
    dead.headers.push_back(header{"weftoriginalgroup", config_.group});
    dead.headers.push_back(header{"weftdeliveries", std::to_string(deliveries)});
    natsMsg* out = nullptr;
    std::size_t size = 0;
    if (make_nats_message(dead, conn_->options.wire, 0, out, size)) {
        // An envelope a CloudEvent cannot express (a header named as weft allowed before):
        // the dead letter goes in weft's encoding, which every weft subscriber reads.
        (void)make_nats_message(dead, wire_options{.mode = wire_mode::weft}, 0, out, size);
    }
    conn_->dead_letter(m, out, env.id.to_string() + "-dead-letter");
}

void nats_consumer::send_malformed_to_dead_letters(natsMsg* m,
                                                   std::uint64_t stream_seq,
                                                   std::string_view why) {
    natsMsg* out = nullptr;
    if (natsMsg_Create(&out, config_.dead_letter_topic.c_str(), nullptr, natsMsg_GetData(m),
                       natsMsg_GetDataLength(m)) == NATS_OK) {
        std::vector<cloudevents::wire_header> headers;
        nats_headers(m, headers);
        std::string encoded;
        for (const auto& h : headers) {
            if (natsMsgHeader_Add(out, h.name.data(), h.value.data()) != NATS_OK) {
                break;
            }
        }
        cloudevents::encode_percent(why, encoded);  // header values are printable ASCII
        natsMsgHeader_Set(out, "Weft-Malformed", encoded.c_str());
        natsMsgHeader_Set(out, "Weft-Original-Topic", config_.topic.c_str());
    }
    conn_->dead_letter(
        m, out, "malformed-" + config_.topic + "-" + std::to_string(stream_seq) + "-dead-letter");
}

void nats_consumer::close() noexcept {
    std::unordered_map<std::uint64_t, pending> held;
    pulled stashed;
    {
        std::lock_guard lock(mu_);
        if (closed_.exchange(true)) {
            return;
        }
        held.swap(pending_);
        stashed = std::exchange(stash_, pulled{});
    }
    // Back to the group at once rather than after the ack timeout.
    for (auto& [token, p] : held) {
        natsMsg_Nak(p.msg, nullptr);
        natsMsg_Destroy(p.msg);
    }
    if (stashed.msg != nullptr) {
        natsMsg_Nak(stashed.msg, nullptr);
        natsMsg_Destroy(stashed.msg);
    }
}

}  // namespace weft::bus
