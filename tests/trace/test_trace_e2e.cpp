// One trace from an HTTP request through the SQLite outbox, the relay, the memory broker and a
// consumer, exported over OTLP/HTTP to a real Jaeger (scripts/jaeger.sh, the CTest fixture
// `jaeger`) and read back from its query API. Asserts the trace's structure (same trace id;
// the server span, the relay's publish span and the consumer's process span, each with the
// right parent), never its timing.

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
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

/// The collector's OTLP/HTTP port (scripts/jaeger.sh: WEFT_JAEGER_PORT; its query API on the
/// next port); 0 when unset.
auto jaeger_port() -> int {
    const char* v = std::getenv("WEFT_JAEGER_PORT");
    return v != nullptr ? std::atoi(v) : 0;
}

struct jaeger_span {
    std::string id;
    std::string name;
    std::string parent;  // empty: no CHILD_OF reference
};

/// The spans of a Jaeger /api/traces/<id> answer. Jaeger writes each span's fields in one
/// order (traceID, spanID, flags, operationName, references, ...), which this reads.
auto spans_of(const std::string& json) -> std::vector<jaeger_span> {
    static const std::regex span_re(
        R"re("spanID":"([0-9a-f]+)",(?:"flags":[0-9]+,)?"operationName":"([^"]*)","references":\[(\{"refType":"CHILD_OF","traceID":"[0-9a-f]+","spanID":"([0-9a-f]+)"\})?)re");
    std::vector<jaeger_span> out;
    for (auto it = std::sregex_iterator(json.begin(), json.end(), span_re);
         it != std::sregex_iterator(); ++it) {
        out.push_back({(*it)[1].str(), (*it)[2].str(), (*it)[4].str()});
    }
    return out;
}

TEST(trace_e2e, a_request_the_outbox_the_bus_and_a_consumer_in_one_trace) {
    const int port = jaeger_port();
    ASSERT_GT(port, 0) << "WEFT_JAEGER_PORT names the collector (CTest sets it)";
    const std::string otlp = "http://127.0.0.1:" + std::to_string(port) + "/v1/traces";
    const std::string query = "http://127.0.0.1:" + std::to_string(port + 1);

    const auto db = std::filesystem::temp_directory_path() /
                    ("weft-trace-e2e-" + std::to_string(::getpid()) + ".db");
    std::filesystem::remove(db);
    trace::tracer tr{{.service_name = "weft-trace-e2e"}};
    bus::sqlite_outbox outbox{db.string(), {.relay = {.min_poll = 1ms, .tracer = &tr}}};
    bus::memory_broker broker;
    sqlite3* app = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &app), SQLITE_OK);
    sqlite3_busy_timeout(app, 5'000);

    // The caller's own span: a parent the server's span names (it is not in Jaeger).
    trace::context caller;
    caller.trace = trace::random_trace_id();
    caller.span = trace::random_span_id();
    caller.flags = 1;
    std::string answer;
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

        // Jaeger stores what it received in the background: asked until all three are there
        // (or 200 times; the count, not the time, is what is asserted).
        const std::string url = query + "/api/traces/" + caller.trace.hex();
        for (int i = 0; i < 200; ++i) {
            auto q = co_await pool.get(url);
            if (q && q->status == 200 && spans_of(q->body).size() >= 3) {
                answer = q->body;
                break;
            }
            (void)co_await sleep_for(50ms);
        }
    }());
    sqlite3_close_v2(app);
    std::filesystem::remove(db);
    for (const char* suffix : {"-wal", "-shm"}) {
        std::filesystem::remove(db.string() + suffix);
    }

    const auto spans = spans_of(answer);
    ASSERT_EQ(spans.size(), 3U) << answer;
    std::map<std::string, jaeger_span> by_name;
    for (const auto& s : spans) {
        by_name[s.name] = s;
    }
    ASSERT_EQ(by_name.count("POST /orders/{id}"), 1U) << answer;
    ASSERT_EQ(by_name.count("publish orders"), 1U) << answer;
    ASSERT_EQ(by_name.count("process orders"), 1U) << answer;
    const auto& server = by_name["POST /orders/{id}"];
    EXPECT_EQ(server.parent, caller.span.hex());
    EXPECT_EQ(by_name["publish orders"].parent, server.id);
    EXPECT_EQ(by_name["process orders"].parent, server.id);
    EXPECT_NE(answer.find(R"("traceID":")" + caller.trace.hex() + "\""), std::string::npos);
}

}  // namespace
