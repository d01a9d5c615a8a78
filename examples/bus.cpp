// bus: a publisher and a subscriber on one topic. The same program runs on the in-process memory
// broker (the default), on NATS JetStream or on Kafka, chosen by a flag where weft was built
// with that backend.
//
//   bus [--backend memory|nats|kafka] [--url URL]
//
// It joins a consumer group of its own on "orders", publishes one event and waits for the
// broker's ack, then reads deliveries until that event arrives and acks it. It exits 0 only if
// the event came back whole (id, key, type, payload) within 10 s, 1 otherwise, 2 on a bad
// command line. A group new to a networked broker starts with what the broker still holds for
// the topic (earlier runs' events): those are acked and passed over.
// The publisher and the subscriber record the bus's metrics into a registry that an HTTP
// server serves at /metrics (weft::http::metrics_handler) on 127.0.0.1 (a free port, printed);
// after the round trip the program reads its own /metrics and fails unless the publish and the
// delivery are counted there, and that it parses as Prometheus text.
// Traces: the publish is a producer span "publish orders" whose context the event carries
// (its traceparent header), the delivery a consumer span "process orders" in the same trace.
// With OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (or OTEL_EXPORTER_OTLP_ENDPOINT) set they are sent to
// that OpenTelemetry collector over OTLP/HTTP; unset, they stay in memory and the program
// fails unless both are there, in one trace.
//
// NATS: --url defaults to nats://127.0.0.1:4222 (scripts/brokers.sh start nats serves
// nats://127.0.0.1:14222). Kafka: --url is bootstrap.servers, default 127.0.0.1:9092.

#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>
#include <weft/bus/memory_broker.hpp>
#include <weft/bus/publisher.hpp>
#include <weft/bus/subscriber.hpp>
#include <weft/bus/trace_headers.hpp>
#include <weft/http.hpp>
#include <weft/weft.hpp>
#if defined(WEFT_EXAMPLE_NATS)
#include <weft/bus/nats_backend.hpp>
#endif
#if defined(WEFT_EXAMPLE_KAFKA)
#include <weft/bus/kafka_backend.hpp>
#endif

#include "observability.hpp"

namespace {

namespace bus = weft::bus;
using namespace std::chrono_literals;

/// The backend named on the command line. The networked ones connect here, blocking: before
/// the runtime starts.
auto make_backend(std::string_view name, [[maybe_unused]] const std::string& url)
    -> std::unique_ptr<bus::backend> {
    if (name == "memory") {
        return std::make_unique<bus::memory_broker>();
    }
    if (name == "nats") {
#if defined(WEFT_EXAMPLE_NATS)
        return std::make_unique<bus::nats_backend>(bus::nats_backend_options{
            .url = url.empty() ? "nats://127.0.0.1:4222" : url, .topics = {"orders"}});
#else
        throw std::invalid_argument("bus: built without NATS (WEFT_BUS_NATS=OFF)");
#endif
    }
    if (name == "kafka") {
#if defined(WEFT_EXAMPLE_KAFKA)
        return std::make_unique<bus::kafka_backend>(bus::kafka_backend_options{
            .brokers = url.empty() ? "127.0.0.1:9092" : url, .topics = {"orders"}});
#else
        throw std::invalid_argument("bus: built without Kafka (WEFT_BUS_KAFKA=OFF)");
#endif
    }
    throw std::invalid_argument("bus: --backend takes memory, nats or kafka");
}

/// Reads deliveries until the one with `id`; acks each, in a "process" span of `tr`. The
/// subscription's first error ends it.
auto receive(bus::subscription& s, const bus::message_id& id, weft::trace::tracer& tr)
    -> weft::task<bus::envelope> {
    for (;;) {
        auto d = co_await s.next();
        if (!d) {
            throw std::system_error(d.error(), "next");
        }
        bus::envelope got = d->message();
        if (got.id != id) {
            (void)d->ack();  // an earlier run's event
            continue;
        }
        auto span = bus::start_process_span(&tr, got, "bus-example");
        (void)d->ack();
        co_return got;
    }
}

/// The publish and the process span, in one trace.
auto spans_show_the_round_trip(weft::trace::tracer& tr) -> bool {
    std::vector<weft::trace::span_data> spans;
    (void)tr.take(spans, 100);
    const weft::trace::span_data* publish = nullptr;
    const weft::trace::span_data* process = nullptr;
    for (const auto& sp : spans) {
        if (sp.name == "publish orders") {
            publish = &sp;
        } else if (sp.name == "process orders") {
            process = &sp;
        }
    }
    const bool ok = publish != nullptr && process != nullptr && publish->trace == process->trace;
    std::printf("traces: the publish and the process span %s\n",
                ok ? "are in one trace" : "are MISSING");
    return ok;
}

/// GETs `addr`'s /metrics and checks the round trip is counted there.
auto metrics_show_the_round_trip(const weft::socket_address& addr, std::string_view backend)
    -> weft::task<bool> {
    auto c = co_await weft::http::client::connect(addr);
    if (!c) {
        co_return false;
    }
    auto r = co_await c->get("/metrics");
    if (!r || r->status != 200) {
        co_return false;
    }
    const std::string b(backend);
    const bool ok =
        example::is_prometheus_text(r->body) &&
        r->body.find("weft_bus_published_total{backend=\"" + b + "\"} 1\n") != std::string::npos &&
        r->body.find("weft_bus_publish_acked_total{backend=\"" + b + "\"} 1\n") !=
            std::string::npos &&
        r->body.find("weft_bus_deliveries_total{backend=\"" + b + "\",topic=\"orders\"") !=
            std::string::npos;
    std::printf("GET /metrics: the publish and the delivery %s\n",
                ok ? "are counted" : "are MISSING");
    co_return ok;
}

auto round_trip(bus::backend& backend, weft::metrics::registry& reg, weft::trace::tracer& tr)
    -> weft::task<int>;

/// The round trip with /metrics served beside it.
auto run(bus::backend& backend) -> weft::task<int> {
    weft::metrics::registry reg;
    weft::http::server srv{{.metrics = reg}};
    srv.route(weft::http::method::get, "/metrics", weft::http::metrics_handler(reg));
    auto l = weft::tcp_listener::bind(weft::socket_address::parse("127.0.0.1", 0).value());
    if (!l) {
        std::fprintf(stderr, "bus: bind: %s\n", l.error().message().c_str());
        co_return 1;
    }
    const auto addr = l->local_address().value();
    std::printf("metrics at http://%s/metrics\n", addr.to_string().c_str());
    const auto traces = example::traces::from_environment("bus-example");
    weft::trace::tracer local{{.service_name = "bus-example"}};
    weft::trace::tracer& tr = traces ? traces->tracer : local;
    int status = 1;
    co_await weft::with_scope([&](weft::scope& scope) -> weft::task<void> {
        if (traces) {
            scope.spawn(traces->exporter.run());
        }
        scope.spawn(srv.serve(*l));
        status = co_await round_trip(backend, reg, tr);
        if (status == 0 && !co_await metrics_show_the_round_trip(addr, backend.name())) {
            status = 1;
        }
        if (status == 0 && !traces && !spans_show_the_round_trip(tr)) {
            status = 1;
        }
        co_await srv.shutdown();
        if (traces) {
            traces->exporter.stop();  // sends the spans, then run() returns
        }
    });
    co_return status;
}

auto round_trip(bus::backend& backend, weft::metrics::registry& reg, weft::trace::tracer& tr)
    -> weft::task<int> {
    bus::subscriber sub{backend, {.metrics = &reg}};
    // A group of its own: every run reads the topic from what the broker holds.
    auto s =
        co_await sub.subscribe("orders", "bus-example-" + bus::message_id::generate().to_string());
    if (!s) {
        std::fprintf(stderr, "bus: subscribe: %s\n", s.error().message().c_str());
        co_return 1;
    }

    bus::publisher pub{backend, {.metrics = &reg}};
    bus::envelope sent{.id = bus::message_id::generate(),
                       .topic = "orders",
                       .key = "order-42",
                       .type = "order.placed",
                       .payload = R"({"total": 12})"};
    auto publish_span = bus::start_publish_span(&tr, sent);
    bus::set_trace_context(sent, publish_span.context());  // the event's creation context
    auto a = co_await pub.publish(sent);                   // once the broker has it
    publish_span.end();
    (void)co_await pub.close();
    if (!a) {
        std::fprintf(stderr, "bus: publish: %s\n", a.error().message().c_str());
        co_return 1;
    }
    std::printf("published %s to %s, sequence %llu\n", sent.id.to_string().c_str(),
                std::string(a->stream.view()).c_str(),
                static_cast<unsigned long long>(a->sequence));

    auto got = co_await weft::with_timeout(10s, receive(*s, sent.id, tr));
    if (!got) {
        std::fprintf(stderr, "bus: the event did not arrive: %s\n", got.error().message().c_str());
        co_return 1;
    }
    const bool whole = got->key == sent.key && got->type == sent.type &&
                       got->payload == sent.payload && got->topic == sent.topic;
    std::printf("received %s: %s\n", got->id.to_string().c_str(),
                whole ? "key, type and payload as sent" : "CHANGED on the way");
    co_return whole ? 0 : 1;
}

}  // namespace

auto main(int argc, char** argv) -> int {
    std::string backend_name = "memory";
    std::string url;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--backend" && i + 1 < argc) {
            backend_name = argv[++i];
        } else if (a == "--url" && i + 1 < argc) {
            url = argv[++i];
        } else {
            std::fprintf(stderr, "usage: bus [--backend memory|nats|kafka] [--url URL]\n");
            return 2;
        }
    }
    try {
        auto backend = make_backend(backend_name, url);
        weft::runtime rt{{.workers = 2}};
        return rt.block_on(run(*backend));
    } catch (const std::invalid_argument& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bus: %s\n", e.what());
        return 1;
    }
}
