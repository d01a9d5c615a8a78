#include "weft/bus/nats_dead_letters.hpp"

#include <nats/nats.h>

#include <charconv>
#include <string>
#include <system_error>
#include <vector>

#include "cloudevents.hpp"
#include "nats_connection.hpp"
#include "weft/bus/errc.hpp"

namespace weft::bus {

struct nats_dead_letters::state {
    nats_dead_letters_options options;
    natsConnection* nc = nullptr;
    jsCtx* js = nullptr;

    ~state() {
        if (js != nullptr) {
            jsCtx_Destroy(js);
        }
        if (nc != nullptr) {
            natsConnection_Destroy(nc);
        }
    }
};

namespace {

auto not_found() -> std::error_code {
    return std::make_error_code(std::errc::no_such_file_or_directory);
}

auto parse_seq(std::string_view ref, std::uint64_t& seq) -> bool {
    const auto [p, ec] = std::from_chars(ref.data(), ref.data() + ref.size(), seq);
    return ec == std::errc{} && p == ref.data() + ref.size() && seq != 0;
}

auto fail(const char* what, natsStatus st) -> std::system_error {
    return {nats_error(st),
            std::string("weft::bus::nats_dead_letters: ") + what + ": " + natsStatus_GetText(st)};
}

// The stream whose subjects take `subject`: JetStream's STREAM.NAMES with a subject filter
// answers {"...","streams":["name"]}.
auto stream_taking(natsConnection* nc, const std::string& subject, std::int64_t timeout_ms)
    -> std::string {
    const std::string req = R"({"subject":")" + subject + R"("})";
    natsMsg* reply = nullptr;
    const natsStatus st = natsConnection_Request(&reply, nc, "$JS.API.STREAM.NAMES", req.data(),
                                                 static_cast<int>(req.size()), timeout_ms);
    if (st != NATS_OK) {
        throw fail("stream names", st);
    }
    const std::string body(natsMsg_GetData(reply),
                           static_cast<std::size_t>(natsMsg_GetDataLength(reply)));
    natsMsg_Destroy(reply);
    const std::string key = R"("streams":[")";
    const auto at = body.find(key);
    const auto end = at == std::string::npos ? at : body.find('"', at + key.size());
    if (end == std::string::npos) {
        throw std::system_error(make_error_code(bus_errc::no_stream),
                                "weft::bus::nats_dead_letters: no stream takes " + subject);
    }
    return body.substr(at + key.size(), end - at - key.size());
}

// A stored message as a dead letter; `seq` its stream sequence.
auto letter_of(natsMsg* m, std::uint64_t seq) -> result<dead_letter> {
    std::vector<cloudevents::wire_header> headers;
    nats_headers(m, headers);
    std::string why;
    auto env = cloudevents::read(
        headers,
        std::string_view(natsMsg_GetData(m), static_cast<std::size_t>(natsMsg_GetDataLength(m))),
        natsMsg_GetSubject(m), "", cloudevents::binding::nats, why);
    if (!env) {
        return env.error();
    }
    const header* reason = env->find_header("weftdeadletterreason");
    const header* topic = env->find_header("weftoriginaltopic");
    return dead_letter{.ref = std::to_string(seq),
                       .message = std::move(*env),
                       .reason = reason != nullptr ? reason->value : std::string(),
                       .topic = topic != nullptr ? topic->value : std::string()};
}

}  // namespace

nats_dead_letters::nats_dead_letters(nats_dead_letters_options options)
    : s_(std::make_unique<state>()) {
    s_->options = std::move(options);
    natsOptions* opts = nullptr;
    natsStatus st = natsOptions_Create(&opts);
    if (st == NATS_OK) {
        st = natsOptions_SetURL(opts, s_->options.url.c_str());
    }
    if (st == NATS_OK) {
        st = natsOptions_SetTimeout(opts, s_->options.timeout.count());
    }
    if (st == NATS_OK) {
        st = natsConnection_Connect(&s_->nc, opts);
    }
    natsOptions_Destroy(opts);
    if (st != NATS_OK) {
        throw fail(("connect to " + s_->options.url).c_str(), st);
    }
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = s_->options.timeout.count();
    if (st = natsConnection_JetStream(&s_->js, s_->nc, &jo); st != NATS_OK) {
        throw fail("JetStream", st);
    }
    if (s_->options.stream.empty()) {
        s_->options.stream = stream_taking(s_->nc, s_->options.topic, s_->options.timeout.count());
    }
}

nats_dead_letters::~nats_dead_letters() = default;

auto nats_dead_letters::list(std::size_t limit) -> result<std::vector<dead_letter>> {
    std::vector<dead_letter> out;
    if (limit == 0) {
        return out;
    }
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = s_->options.stream.c_str();
    so.Config.FilterSubject = s_->options.topic.c_str();
    so.Config.DeliverPolicy = js_DeliverAll;
    so.Config.AckPolicy = js_AckNone;
    natsSubscription* sub = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    if (const natsStatus st =
            js_PullSubscribe(&sub, s_->js, s_->options.topic.c_str(), nullptr, nullptr, &so, &code);
        st != NATS_OK) {
        return nats_error(st, code);
    }
    std::error_code error;
    while (out.size() < limit) {
        jsFetchRequest fr;
        jsFetchRequest_Init(&fr);
        fr.Batch = static_cast<int>(limit - out.size());
        fr.NoWait = true;
        fr.Expires = s_->options.timeout.count() * 1'000'000;
        natsMsgList got{};
        const natsStatus st = natsSubscription_FetchRequest(&got, sub, &fr);
        if (st == NATS_NOT_FOUND || st == NATS_TIMEOUT) {
            break;  // nothing more stored
        }
        if (st != NATS_OK) {
            error = nats_error(st);
            break;
        }
        const int n = got.Count;
        for (int i = 0; i < n && !error; ++i) {
            jsMsgMetaData* meta = nullptr;
            std::uint64_t seq = 0;
            if (natsMsg_GetMetaData(&meta, got.Msgs[i]) == NATS_OK) {
                seq = meta->Sequence.Stream;
                jsMsgMetaData_Destroy(meta);
            }
            auto d = letter_of(got.Msgs[i], seq);
            if (d) {
                out.push_back(std::move(*d));
            } else {
                error = d.error();
            }
        }
        natsMsgList_Destroy(&got);
        if (n == 0) {
            break;
        }
    }
    (void)natsSubscription_Unsubscribe(sub);
    natsSubscription_Destroy(sub);
    if (error) {
        return error;
    }
    return out;
}

auto nats_dead_letters::show(std::string_view ref) -> result<dead_letter> {
    std::uint64_t seq = 0;
    if (!parse_seq(ref, seq)) {
        return not_found();
    }
    natsMsg* m = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    const natsStatus st = js_GetMsg(&m, s_->js, s_->options.stream.c_str(), seq, nullptr, &code);
    if (st == NATS_NOT_FOUND || code == JSNoMessageFoundErr) {
        return not_found();
    }
    if (st != NATS_OK) {
        return nats_error(st, code);
    }
    if (s_->options.topic != natsMsg_GetSubject(m)) {  // another subject of the stream
        natsMsg_Destroy(m);
        return not_found();
    }
    auto d = letter_of(m, seq);
    natsMsg_Destroy(m);
    return d;
}

auto nats_dead_letters::requeue(std::string_view ref) -> result<void> {
    auto d = show(ref);
    if (!d) {
        return d.error();
    }
    const envelope original = original_of(d->message);
    natsMsg* m = nullptr;
    std::size_t size = 0;
    if (const std::error_code ec = make_nats_message(original, s_->options.wire, 0, m, size)) {
        return ec;
    }
    const std::string msg_id = original.id.to_string() + "-requeue-" + std::string(ref);
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MsgId = msg_id.c_str();
    po.MaxWait = s_->options.timeout.count();
    jsPubAck* pa = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    const natsStatus st = js_PublishMsg(&pa, s_->js, m, &po, &code);
    natsMsg_Destroy(m);
    jsPubAck_Destroy(pa);
    if (st != NATS_OK) {
        return nats_error(st, code);
    }
    return drop(ref);
}

auto nats_dead_letters::drop(std::string_view ref) -> result<void> {
    std::uint64_t seq = 0;
    if (!parse_seq(ref, seq)) {
        return not_found();
    }
    if (auto d = show(ref); !d) {  // only a message of the dead-letter topic
        return d.error();
    }
    jsErrCode code = static_cast<jsErrCode>(0);
    const natsStatus st = js_DeleteMsg(s_->js, s_->options.stream.c_str(), seq, nullptr, &code);
    if (code == JSNoMessageFoundErr) {
        return not_found();
    }
    if (st != NATS_OK) {
        return nats_error(st, code);
    }
    return {};
}

}  // namespace weft::bus
