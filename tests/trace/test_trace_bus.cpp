// A trace across the bus: the context in an envelope's headers (and through the CloudEvents
// binary mapping), stored with a SQLite outbox row, the relay's publish span, a consumer's
// process span.

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "cloudevents.hpp"
#include "weft/bus/envelope_codec.hpp"
#include "weft/bus/memory_broker.hpp"
#include "weft/bus/publisher.hpp"
#include "weft/bus/sqlite_outbox.hpp"
#include "weft/bus/subscriber.hpp"
#include "weft/bus/trace_headers.hpp"
#include "weft/core/join_handle.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"

namespace {

using namespace weft;
using namespace std::chrono_literals;

constexpr const char* caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

auto caller_context() -> trace::context {
    auto c = *trace::parse_traceparent(caller);
    c.state = "rojo=1";
    return c;
}

auto order() -> bus::envelope {
    return {.topic = "orders", .key = "o-1", .type = "order.placed", .payload = "{}"};
}

TEST(trace_bus, the_context_goes_into_the_headers_and_back) {
    auto env = order();
    env.headers.push_back(
        {"traceparent", "00-11111111111111111111111111111111-1111111111111111-01"});
    bus::set_trace_context(env, caller_context());
    ASSERT_EQ(env.headers.size(), 2U);  // replaced, not repeated
    EXPECT_EQ(env.find_header("traceparent")->value, caller);
    EXPECT_EQ(env.find_header("tracestate")->value, "rojo=1");
    EXPECT_EQ(bus::trace_context(env), caller_context());
    bus::set_trace_context(env, {});
    EXPECT_TRUE(env.headers.empty());
    EXPECT_FALSE(bus::trace_context(env).valid());
}

TEST(trace_bus, cloudevents_binary_mode_carries_them_as_the_tracing_extension) {
    namespace ce = bus::cloudevents;
    auto env = order();
    env.id = bus::message_id::generate();
    env.time = std::chrono::system_clock::now();
    bus::set_trace_context(env, caller_context());
    std::string why;
    ASSERT_FALSE(ce::check(env, why)) << why;
    for (const auto b : {ce::binding::nats, ce::binding::kafka}) {
        std::vector<ce::wire_header> hs;
        std::string buffer;
        ce::to_binary(env, "/svc", b, hs, buffer);
        const std::string prefix = b == ce::binding::nats ? "ce-" : "ce_";
        int found = 0;
        for (const auto& h : hs) {
            found += static_cast<int>(h.name == prefix + "traceparent" ||
                                      h.name == prefix + "tracestate");
        }
        EXPECT_EQ(found, 2);
        auto back = ce::read(hs, env.payload, "orders", "", b, why);
        ASSERT_TRUE(back) << why;
        EXPECT_EQ(bus::trace_context(*back), caller_context());
    }
}

/// A fresh SQLite file per test, removed afterwards.
struct temp_db {
    std::filesystem::path path = std::filesystem::temp_directory_path() /
                                 ("weft-trace-" + std::to_string(::getpid()) + ".db");
    temp_db() { remove(); }
    temp_db(const temp_db&) = delete;
    auto operator=(const temp_db&) -> temp_db& = delete;
    ~temp_db() { remove(); }
    void remove() const {
        for (const char* suffix : {"", "-wal", "-shm"}) {
            std::filesystem::remove(path.string() + suffix);
        }
    }
};

/// The envelope column of the outbox's only row, as stored.
auto stored_row(const std::string& path) -> std::string {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, "SELECT envelope FROM weft_outbox", -1, &st, nullptr),
              SQLITE_OK);
    std::string out;
    if (sqlite3_step(st) == SQLITE_ROW) {
        out.assign(static_cast<const char*>(sqlite3_column_blob(st, 0)),
                   static_cast<std::size_t>(sqlite3_column_bytes(st, 0)));
    }
    sqlite3_finalize(st);
    sqlite3_close_v2(db);
    return out;
}

TEST(trace_bus, an_outbox_row_keeps_the_context_and_the_relay_and_consumer_continue_it) {
    temp_db db;
    trace::tracer tr;
    bus::sqlite_outbox outbox{db.path.string(), {.relay = {.min_poll = 1ms, .tracer = &tr}}};
    sqlite3* app = nullptr;
    ASSERT_EQ(sqlite3_open(db.path.c_str(), &app), SQLITE_OK);
    {
        auto env = order();
        bus::set_trace_context(env, caller_context());
        bus::sqlite_txn txn{app};
        ASSERT_TRUE(outbox.stage(txn, env));
        ASSERT_TRUE(txn.commit());
    }
    sqlite3_close_v2(app);
    const auto row = bus::decode(stored_row(db.path.string()));
    ASSERT_TRUE(row);
    EXPECT_EQ(bus::trace_context(*row), caller_context());

    bus::memory_broker broker;
    runtime rt{{.workers = 2}};
    trace::context received;
    rt.block_on([&]() -> task<void> {
        bus::subscriber sub{broker};
        auto s = (co_await sub.subscribe("orders", "billing")).value();
        bus::publisher pub{broker};
        auto relay = spawn(outbox.run_relay(pub));
        auto d = (co_await s.next()).value();
        {
            auto span = bus::start_process_span(&tr, d.message(), "billing");
            received = bus::trace_context(d.message());
            EXPECT_TRUE(d.ack());
        }
        while (outbox.metrics().published < 1) {
            (void)co_await sleep_for(1ms);
        }
        outbox.stop_relay();
        (co_await std::move(relay)).value();
        (co_await pub.close()).value();
    }());
    EXPECT_EQ(received, caller_context());  // forwarded as stored
    std::vector<trace::span_data> spans;
    ASSERT_EQ(tr.take(spans, 10), 2U);
    const auto in = caller_context();
    int publish = 0;
    int process = 0;
    for (const auto& sp : spans) {
        EXPECT_EQ(sp.trace, in.trace);
        EXPECT_EQ(sp.parent, in.span);  // both children of the creation context
        EXPECT_EQ(sp.state, "rojo=1");
        if (sp.kind == trace::span_kind::producer) {
            ++publish;
            EXPECT_EQ(sp.name, "publish orders");
            EXPECT_EQ(sp.status, trace::status_code::unset);
        } else if (sp.kind == trace::span_kind::consumer) {
            ++process;
            EXPECT_EQ(sp.name, "process orders");
        }
    }
    EXPECT_EQ(publish, 1);
    EXPECT_EQ(process, 1);
}

TEST(trace_bus, without_a_tracer_the_relay_makes_no_span) {
    auto s = bus::start_publish_span(nullptr, order());
    EXPECT_FALSE(s.recording());
    EXPECT_FALSE(bus::start_process_span(nullptr, order()).recording());
}

}  // namespace
