#include "weft/bus/trace_headers.hpp"

#include <string>
#include <utility>
#include <vector>

namespace weft::bus {

namespace {

auto find_value(const envelope& env, std::string_view name) -> std::optional<std::string_view> {
    const header* h = env.find_header(name);
    return h != nullptr ? std::optional<std::string_view>(h->value) : std::nullopt;
}

auto messaging_span(trace::tracer* tr,
                    const envelope& env,
                    std::string_view operation,
                    trace::span_kind kind) -> trace::span {
    if (tr == nullptr) {
        return {};
    }
    std::string name(operation);
    name += ' ';
    name += env.topic;
    auto s = tr->start(name, kind, trace_context(env));
    s.set_attribute("messaging.operation.type", operation);
    s.set_attribute("messaging.destination.name", env.topic);
    return s;
}

}  // namespace

void set_trace_context(envelope& env, const trace::context& ctx) {
    std::erase_if(env.headers, [](const header& h) {
        return h.name == "traceparent" || h.name == "tracestate";
    });
    if (!ctx.valid()) {
        return;
    }
    env.headers.push_back(header{"traceparent", trace::traceparent(ctx)});
    if (!ctx.state.empty()) {
        env.headers.push_back(header{"tracestate", ctx.state});
    }
}

auto trace_context(const envelope& env) -> trace::context {
    return trace::extract(find_value(env, "traceparent"), find_value(env, "tracestate"));
}

auto start_publish_span(trace::tracer* tr, const envelope& env) -> trace::span {
    return messaging_span(tr, env, "publish", trace::span_kind::producer);
}

auto start_process_span(trace::tracer* tr, const envelope& env, std::string_view group)
    -> trace::span {
    auto s = messaging_span(tr, env, "process", trace::span_kind::consumer);
    if (s.recording()) {
        s.set_attribute("messaging.message.id", env.id.to_string());
        if (!group.empty()) {
            s.set_attribute("messaging.consumer.group.name", group);
        }
    }
    return s;
}

}  // namespace weft::bus
