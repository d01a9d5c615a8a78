// One trace from an HTTP request through the SQLite outbox, the relay, the memory broker and a
// consumer, exported over OTLP/HTTP to a real OpenTelemetry Collector (scripts/otelcol.sh, the
// CTest fixture `otelcol`) and read back from what its file exporter wrote. Asserts the trace's
// structure (one trace id; the server span, the relay's publish span and the consumer's process
// span, each with its kind and the right parent), never its timing.

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_util.hpp"
#include "weft/bus/memory_broker.hpp"
#include "weft/bus/publisher.hpp"
#include "weft/bus/sqlite_outbox.hpp"
#include "weft/bus/subscriber.hpp"
#include "weft/bus/trace_headers.hpp"
#include "weft/core/join_handle.hpp"
#include "weft/core/scope.hpp"
#include "weft/http.hpp"
#include "weft/io/tcp_listener.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"
#include "weft/trace/otlp_exporter.hpp"

namespace {

using namespace weft;
using namespace std::chrono_literals;

/// The collector's OTLP/HTTP port (scripts/otelcol.sh: WEFT_OTELCOL_PORT); 0 when unset.
auto collector_port() -> int {
    const char* v = std::getenv("WEFT_OTELCOL_PORT");
    return v != nullptr ? std::atoi(v) : 0;
}

struct otlp_span {
    std::string id;
    std::string parent;  // empty: a root span
    std::string name;
    int kind = 0;  // OTLP SpanKind: 2 server, 4 producer, 5 consumer
};

/// The spans of trace `trace_hex` in the file exporter's output: lines of OTLP JSON
/// (ExportTraceServiceRequest, ids in lowercase hex). Each span object opens with its traceId
/// and carries spanId, parentSpanId (absent for a root), name and kind before its attributes;
/// the fields are found by name, so their order does not matter.
auto spans_of(const std::string& json, const std::string& trace_hex) -> std::vector<otlp_span> {
    static const std::regex id_re(R"re("spanId":"([0-9a-f]*)")re");
    static const std::regex parent_re(R"re("parentSpanId":"([0-9a-f]*)")re");
    static const std::regex name_re(R"re("name":"([^"]*)")re");
    static const std::regex kind_re(R"re("kind":([0-9]+))re");
    const std::string open = R"({"traceId":")" + trace_hex + "\"";
    std::vector<otlp_span> out;
    for (auto at = json.find(open); at != std::string::npos;) {
        const auto next = json.find(R"({"traceId":")", at + 1);
        auto body = json.substr(at, next == std::string::npos ? std::string::npos : next - at);
        body = body.substr(0, body.find(R"("attributes":)"));
        otlp_span s;
        std::smatch m;
        if (std::regex_search(body, m, id_re)) {
            s.id = m[1].str();
        }
        if (std::regex_search(body, m, parent_re)) {
            s.parent = m[1].str();
        }
        if (std::regex_search(body, m, name_re)) {
            s.name = m[1].str();
        }
        if (std::regex_search(body, m, kind_re)) {
            s.kind = std::stoi(m[1].str());
        }
        out.push_back(s);
        at = next == std::string::npos ? next : json.find(open, next);
    }
    return out;
}

auto read_all(const std::string& path) -> std::string {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

TEST(trace_e2e, a_request_the_outbox_the_bus_and_a_consumer_in_one_trace) {
    const int port = collector_port();
    // The file the fixture's collector appends to (scripts/otelcol.sh: WEFT_OTELCOL_TRACES).
    const std::string traces = WEFT_OTELCOL_TRACES;
    ASSERT_GT(port, 0) << "WEFT_OTELCOL_PORT names the collector (CTest sets it)";
    const std::string otlp = "http://127.0.0.1:" + std::to_string(port) + "/v1/traces";

    const auto db = std::filesystem::temp_directory_path() /
                    ("weft-trace-e2e-" + std::to_string(::getpid()) + ".db");
    std::filesystem::remove(db);
    trace::tracer tr{{.service_name = "weft-trace-e2e"}};
    bus::sqlite_outbox outbox{db.string(), {.relay = {.min_poll = 1ms, .tracer = &tr}}};
    bus::memory_broker broker;
    sqlite3* app = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &app), SQLITE_OK);
    sqlite3_busy_timeout(app, 5'000);

    // The caller's own span: a parent the server's span names (it is not exported).
    trace::context caller;
    caller.trace = trace::random_trace_id();
    caller.span = trace::random_span_id();
    caller.flags = 1;
    runtime rt{{.workers = 2}};
    rt.block_on([&]() -> task<void> {
        http::server srv{{.linger_timeout = 20ms, .tracer = &tr}};
        srv.route(http::method::post, "/orders/{id}",
                  [&](http::request& req) -> task<http::response> {
                      auto env = bus::envelope{.topic = "orders",
                                               .key = std::string(req.param("id")),
                                               .type = "order.placed",
                                               .payload = "{}"};
                      bus::set_trace_context(env, req.trace_context());
                      bus::sqlite_txn txn{app};
                      if (!outbox.stage(txn, env) || !txn.commit()) {
                          co_return http::response::text("not stored", 500);
                      }
                      co_return http::response::text("stored", 202);
                  });
        auto l = tcp_listener::bind(socket_address::parse("127.0.0.1", 0).value()).value();
        const std::string base =
            "http://127.0.0.1:" + std::to_string(l.local_address().value().port());
        trace::otlp_exporter ex{tr, {.url = otlp, .interval = 50ms}};
        http::client_pool pool;
        co_await with_scope([&](scope& s) -> task<void> {
            s.spawn(srv.serve(l));
            s.spawn(ex.run());
            bus::subscriber sub{broker};
            auto subscription = (co_await sub.subscribe("orders", "billing")).value();
            bus::publisher pub{broker};
            auto relay = spawn(outbox.run_relay(pub));

            // Named, not a temporary in the co_await: g++ 12 destroys such an aggregate twice.
            http::client_request order{
                .method = "POST", .url = base + "/orders/42", .trace = caller};
            auto r = co_await pool.request(std::move(order));
            EXPECT_TRUE(r && r->status == 202);
            auto d = (co_await subscription.next()).value();
            {
                auto span = bus::start_process_span(&tr, d.message(), subscription.group());
                EXPECT_TRUE(d.ack());
            }
            while (outbox.metrics().published < 1) {
                (void)co_await sleep_for(1ms);
            }
            outbox.stop_relay();
            (co_await std::move(relay)).value();
            (co_await pub.close()).value();
            ex.stop();  // run() sends what is queued and returns
            co_await srv.shutdown();
        });
        EXPECT_EQ(ex.exported_spans(), 3U);
        EXPECT_EQ(ex.failed_spans(), 0U);
    }());
    sqlite3_close_v2(app);
    std::filesystem::remove(db);
    for (const char* suffix : {"-wal", "-shm"}) {
        std::filesystem::remove(db.string() + suffix);
    }

    // The file exporter writes what it received in the background: read until all three
    // spans are there (or 200 times; the count, not the time, is what is asserted).
    const std::string trace_hex = caller.trace.hex();
    std::string answer;
    for (int i = 0; i < 200; ++i) {
        answer = read_all(traces);
        if (spans_of(answer, trace_hex).size() >= 3) {
            break;
        }
        std::this_thread::sleep_for(50ms);
    }

    const auto spans = spans_of(answer, trace_hex);
    ASSERT_EQ(spans.size(), 3U) << answer;
    std::map<std::string, otlp_span> by_name;
    for (const auto& s : spans) {
        by_name[s.name] = s;
    }
    ASSERT_EQ(by_name.count("POST /orders/{id}"), 1U) << answer;
    ASSERT_EQ(by_name.count("publish orders"), 1U) << answer;
    ASSERT_EQ(by_name.count("process orders"), 1U) << answer;
    const auto& server = by_name["POST /orders/{id}"];
    const auto& publish = by_name["publish orders"];
    const auto& process = by_name["process orders"];
    EXPECT_EQ(server.parent, caller.span.hex());
    EXPECT_EQ(publish.parent, server.id);
    EXPECT_EQ(process.parent, server.id);
    EXPECT_EQ(server.kind, 2);
    EXPECT_EQ(publish.kind, 4);
    EXPECT_EQ(process.kind, 5);
    EXPECT_EQ(server.id.size(), 16U);
    EXPECT_NE(server.id, publish.id);
    EXPECT_NE(server.id, process.id);
    EXPECT_NE(publish.id, process.id);
    EXPECT_NE(answer.find(R"("stringValue":"weft-trace-e2e")"), std::string::npos) << answer;
}

}  // namespace
