#include "weft/bus/nats_backend.hpp"

#include <cstdlib>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "nats_connection.hpp"
#include "nats_consumer.hpp"
#include "nats_producer.hpp"
#include "weft/bus/envelope_codec.hpp"
#include "weft/bus/errc.hpp"
#include "weft/sched/spawn_blocking.hpp"

namespace weft::bus {

auto nats_error(natsStatus s, jsErrCode code) -> std::error_code {
    switch (code) {
        case JSStreamNotFoundErr:
            return make_error_code(bus_errc::no_stream);
        case JSStreamMessageExceedsMaximumErr:
            return make_error_code(bus_errc::message_too_large);
        default:
            break;
    }
    switch (s) {
        case NATS_OK:
            return {};
        case NATS_TIMEOUT:
            return std::make_error_code(std::errc::timed_out);
        case NATS_NO_RESPONDERS:  // nothing listens on the subject: no stream takes it
            return make_error_code(bus_errc::no_stream);
        case NATS_MAX_PAYLOAD:
            return make_error_code(bus_errc::message_too_large);
        case NATS_NO_SERVER:
        case NATS_CONNECTION_CLOSED:
        case NATS_CONNECTION_DISCONNECTED:
        case NATS_STALE_CONNECTION:
        case NATS_IO_ERROR:
            return make_error_code(bus_errc::broker_unreachable);
        case NATS_NOT_FOUND:
            return make_error_code(bus_errc::no_stream);
        default:
            return make_error_code(bus_errc::broker_error);
    }
}

auto nats_subject_matches(std::string_view pattern, std::string_view subject) -> bool {
    for (;;) {
        const auto pe = pattern.find('.');
        const std::string_view pt = pattern.substr(0, pe);
        if (pt == ">") {
            return !subject.empty();
        }
        const auto se = subject.find('.');
        const std::string_view st = subject.substr(0, se);
        if (subject.empty() || (pt != "*" && pt != st)) {
            return false;
        }
        if (pe == std::string_view::npos || se == std::string_view::npos) {
            return pe == std::string_view::npos && se == std::string_view::npos;
        }
        pattern.remove_prefix(pe + 1);
        subject.remove_prefix(se + 1);
    }
}

namespace {

auto stream_name_for(std::string_view topic) -> std::string {
    std::string name(topic);
    for (char& c : name) {
        if (c == '.' || c == '*' || c == '>' || c == ' ' || c == '/' || c == '\\' || c == '\t') {
            c = '_';
        }
    }
    return name;
}

// The dead-letter context's ack handler, on cnats's thread: the dead letter is stored (or not),
// so the original is terminated (or NAKed to be delivered again).
void on_dead_letter_ack(
    jsCtx* /*js*/, natsMsg* msg, jsPubAck* pa, jsPubAckErr* /*pae*/, void* closure) {
    auto* c = static_cast<nats_backend::connection*>(closure);
    natsMsg* original = nullptr;
    {
        std::lock_guard lock(c->dead_mu);
        auto it = c->dead_in_flight.find(msg);
        if (it != c->dead_in_flight.end()) {
            original = it->second;
            c->dead_in_flight.erase(it);
        }
    }
    if (original != nullptr) {
        if (pa != nullptr) {
            natsMsg_Term(original, nullptr);
        } else {
            natsMsg_Nak(original, nullptr);
        }
        natsMsg_Destroy(original);
    }
    natsMsg_Destroy(msg);
}

void ensure_stream(jsCtx* js, const nats_stream_config& s) {
    std::vector<const char*> subjects;
    subjects.reserve(s.subjects.size());
    for (const auto& subj : s.subjects) {
        subjects.push_back(subj.c_str());
    }
    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    cfg.Name = s.name.c_str();
    cfg.Subjects = subjects.data();
    cfg.SubjectsLen = static_cast<int>(subjects.size());
    cfg.Storage = s.storage == nats_storage::file ? js_FileStorage : js_MemoryStorage;
    cfg.Replicas = s.replicas;
    cfg.Duplicates =
        std::chrono::duration_cast<std::chrono::nanoseconds>(s.duplicate_window).count();
    jsStreamInfo* si = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    natsStatus st = js_GetStreamInfo(&si, js, s.name.c_str(), nullptr, &code);
    if (st == NATS_OK) {
        jsStreamInfo_Destroy(si);
        si = nullptr;
        st = js_UpdateStream(&si, js, &cfg, nullptr, &code);
    } else if (st == NATS_NOT_FOUND || code == JSStreamNotFoundErr) {
        st = js_AddStream(&si, js, &cfg, nullptr, &code);
    }
    if (si != nullptr) {
        jsStreamInfo_Destroy(si);
    }
    if (st != NATS_OK) {
        throw std::system_error(nats_error(st, code),
                                "weft::bus::nats_backend: stream " + s.name + ": " +
                                    natsStatus_GetText(st) + " (JetStream error " +
                                    std::to_string(static_cast<int>(code)) + ")");
    }
}

}  // namespace

nats_backend::connection::~connection() {
    if (js != nullptr) {
        jsCtx_Destroy(js);
    }
    if (nc != nullptr) {
        natsConnection_Close(nc);
        natsConnection_Destroy(nc);
    }
    // Dead letters still unanswered: their originals go back to the server's AckWait.
    for (auto& [dead, original] : dead_in_flight) {
        natsMsg_Destroy(original);
    }
}

void nats_backend::connection::settle_dead_letters() {
    {
        std::lock_guard lock(dead_mu);
        if (dead_in_flight.empty()) {
            return;
        }
    }
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = options.publish_timeout.count();
    (void)js_PublishAsyncComplete(js, &po);
    std::unordered_map<natsMsg*, natsMsg*> left;
    {
        std::lock_guard lock(dead_mu);
        left.swap(dead_in_flight);
    }
    for (auto& [dead, original] : left) {
        natsMsg_Destroy(original);
    }
}

auto nats_backend::connection::server_list() const -> std::string {
    if (options.servers.empty()) {
        return options.url;
    }
    std::string out;
    for (const auto& u : options.servers) {
        out += out.empty() ? u : ", " + u;
    }
    return out;
}

auto nats_backend::connection::stream_for(std::string_view topic) const
    -> const nats_stream_config* {
    for (const auto& s : streams) {
        for (const auto& subj : s.subjects) {
            if (nats_subject_matches(subj, topic)) {
                return &s;
            }
        }
    }
    return nullptr;
}

auto make_nats_message(const envelope& env,
                       const wire_options& wire,
                       int max_payload,
                       natsMsg*& out,
                       std::size_t& wire_bytes) -> std::error_code {
    out = nullptr;
    if (wire.mode != wire_mode::weft) {
        thread_local std::string why;
        if (const std::error_code ec = cloudevents::check(env, why)) {
            return ec;
        }
    }
    // natsMsg_Create and natsMsgHeader_Add copy: the buffers are reused.
    thread_local std::string bytes;
    thread_local std::string values;
    thread_local std::vector<cloudevents::wire_header> headers;
    bytes.clear();
    headers.clear();
    std::string_view body;
    switch (wire.mode) {
        case wire_mode::binary:
            cloudevents::to_binary(env, wire.source, cloudevents::binding::nats, headers, values);
            body = env.payload;
            break;
        case wire_mode::structured:
            cloudevents::to_structured(env, wire.source, bytes);
            headers.push_back({"Content-Type", cloudevents::structured_content_type});
            body = bytes;
            break;
        case wire_mode::weft:
            encode(env, bytes);
            body = bytes;
            break;
    }
    wire_bytes = body.size();
    for (const auto& h : headers) {
        wire_bytes += h.name.size() + h.value.size() + 4;  // "name: value\r\n"
    }
    if (max_payload > 0 && wire_bytes > static_cast<std::size_t>(max_payload)) {
        return make_error_code(bus_errc::message_too_large);
    }
    natsMsg* m = nullptr;
    if (const natsStatus s = natsMsg_Create(&m, env.topic.c_str(), nullptr, body.data(),
                                            static_cast<int>(body.size()));
        s != NATS_OK) {
        return nats_error(s);
    }
    for (const auto& h : headers) {
        // NUL-terminated, as cnats takes them (see to_binary).
        if (const natsStatus s = natsMsgHeader_Add(m, h.name.data(), h.value.data());
            s != NATS_OK) {
            natsMsg_Destroy(m);
            return nats_error(s);
        }
    }
    out = m;
    return {};
}

void nats_headers(natsMsg* m, std::vector<cloudevents::wire_header>& out) {
    const char** keys = nullptr;
    int count = 0;
    if (natsMsgHeader_Keys(m, &keys, &count) != NATS_OK) {
        return;
    }
    for (int i = 0; i < count; ++i) {
        const char** values = nullptr;
        int n = 0;
        if (natsMsgHeader_Values(m, keys[i], &values, &n) == NATS_OK) {
            for (int k = 0; k < n; ++k) {
                out.push_back({keys[i], values[k]});
            }
            free(static_cast<void*>(values));
        }
    }
    free(static_cast<void*>(keys));
}

void nats_backend::connection::dead_letter(natsMsg* original,
                                           natsMsg* m,
                                           const std::string& msg_id) {
    if (m == nullptr) {
        natsMsg_Nak(original, nullptr);
        natsMsg_Destroy(original);
        return;
    }
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MsgId = msg_id.c_str();
    po.MaxWait = options.publish_timeout.count();
    natsMsg* key = m;
    {
        std::lock_guard lock(dead_mu);
        dead_in_flight.emplace(key, original);
    }
    if (js_PublishMsgAsync(js, &m, &po) != NATS_OK) {
        bool ours = false;
        {
            std::lock_guard lock(dead_mu);
            ours = dead_in_flight.erase(key) == 1;
        }
        if (ours) {
            natsMsg_Nak(original, nullptr);
            natsMsg_Destroy(original);
        }
        natsMsg_Destroy(m);  // no effect when cnats took it
    }
}

nats_backend::nats_backend(nats_backend_options options) : conn_(std::make_shared<connection>()) {
    connection& c = *conn_;
    c.options = std::move(options);
    for (const auto& t : c.options.topics) {
        nats_stream_config s;
        s.name = stream_name_for(t);
        s.subjects = {t, t + ".dead-letter"};
        s.storage = c.options.storage;
        c.streams.push_back(std::move(s));
    }
    for (const auto& s : c.options.streams) {
        c.streams.push_back(s);
    }

    std::vector<const char*> servers;
    for (const auto& u : c.options.servers) {
        servers.push_back(u.c_str());
    }
    natsOptions* opts = nullptr;
    natsStatus st = natsOptions_Create(&opts);
    if (st == NATS_OK) {
        st = servers.empty()
                 ? natsOptions_SetURL(opts, c.options.url.c_str())
                 : natsOptions_SetServers(opts, servers.data(), static_cast<int>(servers.size()));
    }
    if (st == NATS_OK) {
        st = natsOptions_SetName(opts, "weft::bus");
    }
    if (st == NATS_OK) {
        st = natsOptions_SetTimeout(opts, c.options.connect_timeout.count());
    }
    if (st == NATS_OK) {
        st = natsOptions_SetMaxReconnect(opts, -1);  // a broker restart is waited out
    }
    if (st == NATS_OK) {
        st = natsOptions_SetReconnectWait(opts, 250);
    }
    if (st == NATS_OK) {
        st = natsOptions_SetIOBufSize(opts, c.options.io_buffer_bytes);
    }
    const broker_tls& tls = c.options.tls;
    if (st == NATS_OK && tls.enabled) {
        st = natsOptions_SetSecure(opts, true);
    }
    if (st == NATS_OK && !tls.ca_file.empty()) {
        st = natsOptions_LoadCATrustedCertificates(opts, tls.ca_file.c_str());
    }
    if (st == NATS_OK && (!tls.cert_file.empty() || !tls.key_file.empty())) {
        st = natsOptions_LoadCertificatesChain(opts, tls.cert_file.c_str(), tls.key_file.c_str());
    }
    if (st == NATS_OK) {
        st = natsConnection_Connect(&c.nc, opts);
    }
    natsOptions_Destroy(opts);
    if (st != NATS_OK) {
        throw std::system_error(nats_error(st), "weft::bus::nats_backend: cannot connect to " +
                                                    c.server_list() + ": " +
                                                    natsStatus_GetText(st));
    }
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = c.options.publish_timeout.count();
    jo.PublishAsync.AckHandler = &on_dead_letter_ack;
    jo.PublishAsync.AckHandlerClosure = &c;
    st = natsConnection_JetStream(&c.js, c.nc, &jo);
    if (st != NATS_OK) {
        throw std::system_error(
            nats_error(st), "weft::bus::nats_backend: no JetStream context on " + c.server_list());
    }
    for (const auto& s : c.streams) {
        ensure_stream(c.js, s);
    }
}

nats_backend::~nats_backend() = default;

auto nats_backend::features() const noexcept -> backend_features {
    backend_features f;
    f.durable = true;  // file storage; memory-storage streams are not, which options say
    f.deduplicates_ids = true;
    // Holding acks would mean stopping the server (SIGSTOP) from inside a test: not offered.
    f.can_pause = false;
    f.returns_on_close = true;  // a closing member NAKs what it holds
    return f;
}

auto nats_backend::stats() const noexcept -> nats_backend_stats {
    return {.acks = conn_->acks.load(std::memory_order_relaxed),
            .wakes = conn_->wakes.load(std::memory_order_relaxed),
            .publish_stalls = conn_->publish_stalls.load(std::memory_order_relaxed),
            .publishes_held = conn_->publishes_held.load(std::memory_order_relaxed),
            .max_buffered = conn_->max_buffered.load(std::memory_order_relaxed)};
}

auto nats_backend::connected_url() const -> std::string {
    char buf[256];
    if (natsConnection_GetConnectedUrl(conn_->nc, buf, sizeof(buf)) != NATS_OK) {
        return {};
    }
    return buf;
}

auto nats_backend::describe(std::error_code ec) const -> std::string {
    if (ec != bus_errc::broker_unreachable) {
        return ec.message();
    }
    const char* state = "closed";
    switch (natsConnection_Status(conn_->nc)) {
        case NATS_CONN_STATUS_CONNECTED:
            state = "connected again";
            break;
        case NATS_CONN_STATUS_RECONNECTING:
        case NATS_CONN_STATUS_DISCONNECTED:
        case NATS_CONN_STATUS_CONNECTING:
            state = "reconnecting";
            break;
        default:
            break;
    }
    return "broker unreachable: not connected to " + conn_->server_list() + " (" + state + ")";
}

auto nats_backend::make_producer(publish_sink& sink, std::uint32_t max_pending)
    -> result<std::unique_ptr<backend_producer>> {
    return nats_producer::make(conn_, sink, max_pending);
}

auto nats_backend::make_consumer(consumer_config config)
    -> task<result<std::shared_ptr<backend_consumer>>> {
    co_return co_await nats_consumer::make(conn_, std::move(config));
}

}  // namespace weft::bus
