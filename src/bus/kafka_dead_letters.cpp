#include "weft/bus/kafka_dead_letters.hpp"

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <vector>

#include "cloudevents.hpp"
#include "kafka_connection.hpp"
#include "weft/bus/errc.hpp"

namespace weft::bus {

namespace {

auto not_found() -> std::error_code {
    return std::make_error_code(std::errc::no_such_file_or_directory);
}

// What a broker answers while a partition's leader is being elected or the group coordinator
// loads its state (a topic just created, a broker just restarted): it passes, so a call asks
// again until its bound instead of reporting a refusal.
auto transient(rd_kafka_resp_err_t err) -> bool {
    switch (err) {
        case RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE:
        case RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION:
        case RD_KAFKA_RESP_ERR_UNKNOWN_LEADER_EPOCH:
        case RD_KAFKA_RESP_ERR_FENCED_LEADER_EPOCH:
        case RD_KAFKA_RESP_ERR_OFFSET_NOT_AVAILABLE:
        case RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS:
        case RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE:
        case RD_KAFKA_RESP_ERR_NOT_COORDINATOR:
        case RD_KAFKA_RESP_ERR__WAIT_COORD:
            return true;
        default:
            return false;
    }
}

struct record_ref {
    std::int32_t partition = 0;
    std::int64_t offset = 0;
};

// "<partition>:<offset>", both decimal, nothing else.
auto parse_ref(std::string_view ref, record_ref& out) -> bool {
    const auto colon = ref.find(':');
    if (colon == std::string_view::npos) {
        return false;
    }
    const char* mid = ref.data() + colon;
    const auto part = std::from_chars(ref.data(), mid, out.partition);
    if (part.ec != std::errc{} || part.ptr != mid || out.partition < 0) {
        return false;
    }
    const char* end = ref.data() + ref.size();
    const auto off = std::from_chars(mid + 1, end, out.offset);
    return off.ec == std::errc{} && off.ptr == end && out.offset >= 0;
}

// What the admin group has settled in one partition: every offset below `committed`, and
// the offsets of `above` (the commit's metadata).
struct settled_marks {
    std::int64_t committed = 0;
    std::set<std::int64_t> above;

    [[nodiscard]] auto has(std::int64_t offset) const -> bool {
        return offset < committed || above.contains(offset);
    }
};

auto marks_text(const std::set<std::int64_t>& above) -> std::string {
    std::string out;
    for (const std::int64_t o : above) {
        if (!out.empty()) {
            out += ',';
        }
        out += std::to_string(o);
    }
    return out;
}

// The commit's metadata as written by marks_text; anything else in it (another tool's text)
// marks nothing.
auto marks_of(std::string_view text) -> std::set<std::int64_t> {
    std::set<std::int64_t> out;
    while (!text.empty()) {
        const auto comma = text.find(',');
        const std::string_view item = text.substr(0, comma);
        std::int64_t o = 0;
        const auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), o);
        if (ec == std::errc{} && p == item.data() + item.size()) {
            out.insert(o);
        }
        text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    }
    return out;
}

auto header_value(const std::vector<cloudevents::wire_header>& hs, std::string_view name)
    -> const cloudevents::wire_header* {
    const auto it =
        std::find_if(hs.begin(), hs.end(), [&](const auto& h) { return h.name == name; });
    return it != hs.end() ? &*it : nullptr;
}

// A record of the dead-letter topic as a dead letter. An event: its envelope, the reason
// and original topic from its dead-letter headers. Anything else (the consumer's copy of a
// record it could not read, or a record someone else wrote): "malformed: <defect>", the
// record's key, headers and payload as they are.
auto letter_of(const rd_kafka_message_t* m, const std::string& topic) -> dead_letter {
    std::vector<cloudevents::wire_header> headers;
    kafka_headers(m, headers);
    const std::string_view value(static_cast<const char*>(m->payload), m->len);
    const std::string_view key(static_cast<const char*>(m->key), m->key_len);
    dead_letter d;
    d.ref = std::to_string(m->partition) + ":" + std::to_string(m->offset);
    const auto* malformed = header_value(headers, "weft-malformed");
    std::string why;
    if (malformed == nullptr) {
        if (auto env =
                cloudevents::read(headers, value, topic, key, cloudevents::binding::kafka, why)) {
            d.message = std::move(*env);
            const header* reason = d.message.find_header("weftdeadletterreason");
            const header* original = d.message.find_header("weftoriginaltopic");
            d.reason = reason != nullptr ? reason->value : std::string();
            d.topic = original != nullptr ? original->value : std::string();
            return d;
        }
    } else {
        why = malformed->value;
    }
    d.reason = "malformed: " + why;
    d.message.topic = topic;
    d.message.key = key;
    d.message.payload = value;
    for (const auto& h : headers) {
        d.message.headers.push_back(header{std::string(h.name), std::string(h.value)});
    }
    if (const auto* original = header_value(headers, "weft-original-topic")) {
        d.topic = original->value;
    }
    return d;
}

void on_delivery(rd_kafka_t* /*rk*/, const rd_kafka_message_t* m, void* opaque) {
    *static_cast<rd_kafka_resp_err_t*>(opaque) =
        kafka_confirmed(m)
            ? RD_KAFKA_RESP_ERR_NO_ERROR
            : (m->err != RD_KAFKA_RESP_ERR_NO_ERROR ? m->err : RD_KAFKA_RESP_ERR__FAIL);
}

}  // namespace

struct kafka_dead_letters::state {
    kafka_dead_letters_options options;
    rd_kafka_t* consumer = nullptr;
    rd_kafka_t* producer = nullptr;
    rd_kafka_resp_err_t delivered = RD_KAFKA_RESP_ERR_NO_ERROR;  // the last requeue's report

    ~state() {
        if (consumer != nullptr) {
            rd_kafka_destroy(consumer);
        }
        if (producer != nullptr) {
            rd_kafka_destroy(producer);
        }
    }

    [[nodiscard]] auto timeout_ms() const -> int {
        return static_cast<int>(options.timeout.count());
    }

    // `call(ms)` (one request to the broker, bounded by ms) again while its error is transient,
    // each try bounded by what is left of the call's timeout.
    template <typename Call>
    auto with_retries(Call call) const -> rd_kafka_resp_err_t {
        using clock = std::chrono::steady_clock;
        const auto deadline = clock::now() + options.timeout;
        for (;;) {
            const auto left =
                std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
            const rd_kafka_resp_err_t err =
                call(static_cast<int>(std::max<std::int64_t>(left.count(), 1)));
            if (!transient(err) || clock::now() + retry_pause >= deadline) {
                return err;
            }
            std::this_thread::sleep_for(retry_pause);
        }
    }
    static constexpr std::chrono::milliseconds retry_pause{50};

    // The number of partitions of the topic.
    auto partitions() -> result<std::int32_t> {
        rd_kafka_topic_t* rkt = rd_kafka_topic_new(consumer, options.topic.c_str(), nullptr);
        std::int32_t n = 0;
        const rd_kafka_resp_err_t err = with_retries([&](int ms) {
            const rd_kafka_metadata_t* md = nullptr;
            rd_kafka_resp_err_t e = rd_kafka_metadata(consumer, 0, rkt, &md, ms);
            if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
                return e;
            }
            e = RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
            if (md->topic_cnt == 1) {
                const rd_kafka_metadata_topic_t& t = md->topics[0];
                e = t.err;
                n = t.partition_cnt;
                for (int i = 0; i < t.partition_cnt && e == RD_KAFKA_RESP_ERR_NO_ERROR; ++i) {
                    if (transient(t.partitions[i].err)) {
                        e = t.partitions[i].err;  // a partition still without its leader
                    }
                }
            }
            rd_kafka_metadata_destroy(md);
            return e;
        });
        rd_kafka_topic_destroy(rkt);
        if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
            return kafka_error(err);
        }
        return n;
    }

    // The first and one past the last offset the partition holds.
    auto watermarks(std::int32_t partition, std::int64_t& low, std::int64_t& high)
        -> std::error_code {
        const rd_kafka_resp_err_t err = with_retries([&](int ms) {
            return rd_kafka_query_watermark_offsets(consumer, options.topic.c_str(), partition,
                                                    &low, &high, ms);
        });
        return err == RD_KAFKA_RESP_ERR_NO_ERROR ? std::error_code() : kafka_error(err);
    }

    auto marks(std::int32_t partition) -> result<settled_marks> {
        rd_kafka_topic_partition_list_t* parts = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(parts, options.topic.c_str(), partition);
        rd_kafka_resp_err_t err = with_retries([&](int ms) {
            const rd_kafka_resp_err_t e = rd_kafka_committed(consumer, parts, ms);
            return e != RD_KAFKA_RESP_ERR_NO_ERROR ? e : parts->elems[0].err;
        });
        settled_marks out;
        if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
            const rd_kafka_topic_partition_t& p = parts->elems[0];
            err = p.err;
            out.committed = std::max<std::int64_t>(p.offset, 0);  // none yet: OFFSET_INVALID
            if (p.metadata != nullptr) {
                out.above = marks_of(
                    std::string_view(static_cast<const char*>(p.metadata), p.metadata_size));
            }
        }
        rd_kafka_topic_partition_list_destroy(parts);
        if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
            return kafka_error(err);
        }
        return out;
    }

    // Adds `offset` to the partition's marks, then commits them: the committed offset past
    // every settled offset at the front, the rest as the metadata.
    auto settle(record_ref r) -> result<void> {
        auto m = marks(r.partition);
        if (!m) {
            return m.error();
        }
        m->above.insert(r.offset);
        while (!m->above.empty() && *m->above.begin() <= m->committed) {
            if (*m->above.begin() == m->committed) {
                ++m->committed;
            }
            m->above.erase(m->above.begin());
        }
        std::string text = marks_text(m->above);
        rd_kafka_topic_partition_list_t* parts = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_t* p =
            rd_kafka_topic_partition_list_add(parts, options.topic.c_str(), r.partition);
        p->offset = m->committed;
        if (!text.empty()) {
            // librdkafka's allocation: the list frees it when it is destroyed.
            p->metadata = rd_kafka_mem_malloc(consumer, text.size());
            std::copy(text.begin(), text.end(), static_cast<char*>(p->metadata));
            p->metadata_size = text.size();
        }
        rd_kafka_resp_err_t err = rd_kafka_commit(consumer, parts, 0);
        if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
            err = parts->elems[0].err;
        }
        rd_kafka_topic_partition_list_destroy(parts);
        if (err == RD_KAFKA_RESP_ERR_OFFSET_METADATA_TOO_LARGE) {
            return make_error_code(bus_errc::message_too_large);
        }
        if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
            return kafka_error(err);
        }
        return {};
    }

    // Reads the partition from `from` up to (not including) `high`, handing each record to
    // `take` until it returns false.
    template <typename Take>
    auto scan(std::int32_t partition, std::int64_t from, std::int64_t high, Take take)
        -> std::error_code {
        rd_kafka_topic_partition_list_t* parts = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(parts, options.topic.c_str(), partition)->offset = from;
        rd_kafka_resp_err_t err = rd_kafka_assign(consumer, parts);
        rd_kafka_topic_partition_list_destroy(parts);
        if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
            return kafka_error(err);
        }
        std::error_code out;
        const auto deadline = std::chrono::steady_clock::now() + options.timeout;
        std::int64_t next = from;
        while (next < high) {
            rd_kafka_message_t* m = rd_kafka_consumer_poll(consumer, 100);
            if (m == nullptr) {
                if (std::chrono::steady_clock::now() > deadline) {
                    out = std::make_error_code(std::errc::timed_out);
                    break;
                }
                continue;
            }
            if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                rd_kafka_message_destroy(m);
                break;  // the rest of [next, high) are control records or compacted away
            }
            if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
                out = kafka_error(m->err);
                rd_kafka_message_destroy(m);
                break;
            }
            next = m->offset + 1;
            const bool more = m->offset < high && take(m);
            rd_kafka_message_destroy(m);
            if (!more) {
                break;
            }
        }
        (void)rd_kafka_assign(consumer, nullptr);
        return out;
    }

    // The settled-or-not record at `r`: not_found when there is none or it is settled.
    auto find(record_ref r) -> result<dead_letter> {
        auto n = partitions();
        if (!n) {
            return n.error();
        }
        if (r.partition >= *n) {
            return not_found();
        }
        auto m = marks(r.partition);
        if (!m) {
            return m.error();
        }
        if (m->has(r.offset)) {
            return not_found();
        }
        std::int64_t low = 0;
        std::int64_t high = 0;
        if (const std::error_code ec = watermarks(r.partition, low, high)) {
            return ec;
        }
        if (r.offset < low || r.offset >= high) {
            return not_found();
        }
        std::optional<dead_letter> found;
        const std::error_code ec =
            scan(r.partition, r.offset, r.offset + 1, [&](const rd_kafka_message_t* msg) {
                if (msg->offset == r.offset) {
                    found = letter_of(msg, options.topic);
                }
                return false;
            });
        if (ec) {
            return ec;
        }
        if (!found) {
            return not_found();  // a control record, or compacted away
        }
        return std::move(*found);
    }
};

kafka_dead_letters::kafka_dead_letters(kafka_dead_letters_options options)
    : s_(std::make_unique<state>()) {
    if (options.topic.empty()) {
        throw std::system_error(std::make_error_code(std::errc::invalid_argument),
                                "weft::bus::kafka_dead_letters: empty topic");
    }
    s_->options = std::move(options);
    const kafka_backend_options client{.brokers = s_->options.brokers, .tls = s_->options.tls};
    char err[512];
    rd_kafka_conf_t* conf = kafka_conf(client, {{"group.id", s_->options.group},
                                                {"enable.auto.commit", "false"},
                                                {"enable.auto.offset.store", "false"},
                                                {"enable.partition.eof", "true"},
                                                {"isolation.level", "read_committed"}});
    s_->consumer = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
    if (s_->consumer == nullptr) {
        rd_kafka_conf_destroy(conf);
        throw std::system_error(std::make_error_code(std::errc::invalid_argument),
                                std::string("weft::bus::kafka_dead_letters: consumer: ") + err);
    }
    conf = kafka_conf(
        client,
        {{"acks", "all"}, {"message.timeout.ms", std::to_string(s_->options.timeout.count())}});
    rd_kafka_conf_set_dr_msg_cb(conf, &on_delivery);
    rd_kafka_conf_set_opaque(conf, &s_->delivered);
    s_->producer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
    if (s_->producer == nullptr) {
        rd_kafka_conf_destroy(conf);
        throw std::system_error(std::make_error_code(std::errc::invalid_argument),
                                std::string("weft::bus::kafka_dead_letters: producer: ") + err);
    }
}

kafka_dead_letters::~kafka_dead_letters() = default;

auto kafka_dead_letters::list(std::size_t limit) -> result<std::vector<dead_letter>> {
    std::vector<dead_letter> out;
    if (limit == 0) {
        return out;
    }
    auto n = s_->partitions();
    if (!n) {
        return n.error();
    }
    // Up to `limit` of each partition, then the oldest `limit` of them all (by the record's
    // timestamp, then partition and offset).
    struct listed {
        std::int64_t timestamp = 0;
        std::int32_t partition = 0;
        std::int64_t offset = 0;
        dead_letter letter;
    };
    std::vector<listed> all;
    for (std::int32_t p = 0; p < *n; ++p) {
        auto m = s_->marks(p);
        if (!m) {
            return m.error();
        }
        std::int64_t low = 0;
        std::int64_t high = 0;
        if (const std::error_code ec = s_->watermarks(p, low, high)) {
            return ec;
        }
        const std::int64_t from = std::max(low, m->committed);
        if (from >= high) {
            continue;
        }
        std::size_t taken = 0;
        const std::error_code ec = s_->scan(p, from, high, [&](const rd_kafka_message_t* msg) {
            if (!m->has(msg->offset)) {
                all.push_back(listed{.timestamp = rd_kafka_message_timestamp(msg, nullptr),
                                     .partition = p,
                                     .offset = msg->offset,
                                     .letter = letter_of(msg, s_->options.topic)});
                ++taken;
            }
            return taken < limit;
        });
        if (ec) {
            return ec;
        }
    }
    std::sort(all.begin(), all.end(), [](const listed& a, const listed& b) {
        return std::tie(a.timestamp, a.partition, a.offset) <
               std::tie(b.timestamp, b.partition, b.offset);
    });
    for (auto& l : all) {
        if (out.size() == limit) {
            break;
        }
        out.push_back(std::move(l.letter));
    }
    return out;
}

auto kafka_dead_letters::show(std::string_view ref) -> result<dead_letter> {
    record_ref r;
    if (!parse_ref(ref, r)) {
        return not_found();
    }
    return s_->find(r);
}

auto kafka_dead_letters::requeue(std::string_view ref) -> result<void> {
    record_ref r;
    if (!parse_ref(ref, r)) {
        return not_found();
    }
    auto d = s_->find(r);
    if (!d) {
        return d.error();
    }
    if (d->reason.starts_with("malformed: ") || d->topic.empty()) {
        return make_error_code(bus_errc::malformed_event);
    }
    const envelope original = original_of(d->message);
    std::string buffer;
    std::string_view value;
    rd_kafka_headers_t* headers = nullptr;
    if (const std::error_code ec =
            kafka_record(original, s_->options.wire, buffer, value, headers)) {
        return ec;
    }
    s_->delivered = RD_KAFKA_RESP_ERR__IN_PROGRESS;
    const rd_kafka_resp_err_t err =
        kafka_produce(s_->producer, original.topic.c_str(), original.key, value, headers, nullptr);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_headers_destroy(headers);
        return kafka_error(err);
    }
    // The delivery report comes within message.timeout.ms (options.timeout); flush serves it.
    while (s_->delivered == RD_KAFKA_RESP_ERR__IN_PROGRESS) {
        (void)rd_kafka_flush(s_->producer, s_->timeout_ms());
    }
    if (s_->delivered != RD_KAFKA_RESP_ERR_NO_ERROR) {
        return kafka_error(s_->delivered);
    }
    return s_->settle(r);
}

auto kafka_dead_letters::drop(std::string_view ref) -> result<void> {
    record_ref r;
    if (!parse_ref(ref, r)) {
        return not_found();
    }
    if (auto d = s_->find(r); !d) {
        return d.error();
    }
    return s_->settle(r);
}

}  // namespace weft::bus
