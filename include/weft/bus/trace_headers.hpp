#pragma once

#include <string_view>

#include "weft/bus/envelope.hpp"
#include "weft/trace/context.hpp"
#include "weft/trace/span.hpp"
#include "weft/trace/tracer.hpp"

namespace weft::bus {

/// How a trace crosses the bus: the W3C context travels in the envelope's headers
/// `traceparent` and `tracestate` (the names of the CloudEvents Distributed Tracing extension,
/// so the CloudEvents mappings carry them as those attributes). The context put there when the
/// event is made (in a handler, before outbox.stage or publish) is the message's creation
/// context; the relay's "publish" span and a consumer's "process" span are both its children,
/// so one trace shows the request, the publish and every consumer that processed the event.
///
///     weft::bus::set_trace_context(env, req.trace_context());
///     co_await outbox.stage(txn, env);                     // stored with the row
///     ...
///     auto span = weft::bus::start_process_span(&tracer, d.message(), "billing");

/// Replaces env's traceparent and tracestate headers with ctx's (tracestate only when not
/// empty); an invalid ctx removes them.
void set_trace_context(envelope& env, const trace::context& ctx);

/// The context env carries (trace::extract of its headers: invalid when none or malformed).
[[nodiscard]] auto trace_context(const envelope& env) -> trace::context;

/// A producer span "publish <topic>" in `tr` (inert when null), a child of env's context (a
/// new trace without one), with messaging.operation.type = publish and
/// messaging.destination.name; the outbox relay starts one per send when
/// relay_options::tracer is set and ends it with the broker's answer.
[[nodiscard]] auto start_publish_span(trace::tracer* tr, const envelope& env) -> trace::span;

/// A consumer span "process <topic>" in `tr` (inert when null) for a delivered message: its
/// parent is the message's creation context (a new trace without one), with
/// messaging.operation.type = process, messaging.destination.name, messaging.message.id and,
/// when given, messaging.consumer.group.name. End it once the message is settled.
[[nodiscard]] auto start_process_span(trace::tracer* tr,
                                      const envelope& env,
                                      std::string_view group = {}) -> trace::span;

}  // namespace weft::bus
