// The NATS JetStream backend against a real nats-server: the conformance suite, and what only
// NATS has. The server is started by CTest's fixture (scripts/brokers.sh start nats on a
// private port, WEFT_NATS_URL); a server that is not there fails these tests, never skips them.

#include <gtest/gtest.h>
#include <nats/nats.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "awaited_on_worker.hpp"
#include "conformance.hpp"
#include "weft/bus/nats_backend.hpp"
#include "weft/bus/nats_dead_letters.hpp"
#include "weft/io/reactor.hpp"

namespace {

using namespace weft::bus;
using namespace std::chrono_literals;
using weft::bus::test::bus_conformance;

auto nats_url() -> std::string {
    const char* u = std::getenv("WEFT_NATS_URL");
    return u != nullptr ? u : "nats://127.0.0.1:14222";
}

// Every test topic is under "weft.test.", taken by one stream made at start (a topic per test
// would otherwise need a stream per test). Memory storage: the suite checks semantics, not
// durability.
auto make_nats(nats_ack_path path = nats_ack_path::reactor_batch) -> std::unique_ptr<nats_backend> {
    nats_backend_options o;
    o.url = nats_url();
    o.ack_path = path;
    o.streams = {nats_stream_config{
        .name = "WEFT_TEST", .subjects = {"weft.test.>"}, .storage = nats_storage::memory}};
    return std::make_unique<nats_backend>(std::move(o));
}

// can_pause is false on NATS (holding the server's acks would take stopping the server), so
// back_pressure_at_max_pending and flush_and_close_wait_for_in_flight report skipped here; the
// memory backend runs them against the same publisher code.
INSTANTIATE_TEST_SUITE_P(nats,
                         bus_conformance,
                         ::testing::Values(test::backend_factory{
                             .make = []() -> std::unique_ptr<backend> { return make_nats(); },
                             .pause = {},
                             .resume = {},
                             .runtime_for =
                                 [](unsigned workers) { return weft::io_runtime_options(workers); },
                             .topic_prefix = "weft.test."}),
                         [](const auto&) { return std::string("jetstream"); });

// The same suite with acks completed by the fixed pool of ack handlers (nats_ack_path).
INSTANTIATE_TEST_SUITE_P(
    nats_handler_pool,
    bus_conformance,
    ::testing::Values(test::backend_factory{
        .make = []() -> std::unique_ptr<backend> { return make_nats(nats_ack_path::handler_pool); },
        .pause = {},
        .resume = {},
        .runtime_for = [](unsigned workers) { return weft::io_runtime_options(workers); },
        .topic_prefix = "weft.test."}),
    [](const auto&) { return std::string("jetstream"); });

TEST(nats_backend, unreachable_server_names_the_url) {
    nats_backend_options o;
    o.url = "nats://127.0.0.1:1";
    o.connect_timeout = 500ms;
    try {
        nats_backend b{o};
        FAIL() << "connected to nothing";
    } catch (const std::system_error& e) {
        EXPECT_EQ(e.code(), bus_errc::broker_unreachable);
        EXPECT_NE(std::string(e.what()).find("nats://127.0.0.1:1"), std::string::npos) << e.what();
    }
}

TEST(nats_backend, topic_without_a_stream_is_an_error_value) {
    auto b = make_nats();
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{*b};
        envelope e;
        e.topic = "weft.nowhere." + message_id::generate().to_string();
        e.type = "test.event";
        e.payload = "x";
        auto r = co_await pub.publish(std::move(e));
        EXPECT_EQ(r.error(), bus_errc::no_stream) << r.error().message();
        subscriber sub{*b};
        auto s = co_await sub.subscribe("weft.nowhere.x", "g");
        EXPECT_EQ(s.error(), bus_errc::no_stream);
        (co_await pub.close()).value();
    }());
}

TEST(nats_backend, publisher_needs_a_reactor) {
    auto b = make_nats();
    // A runtime that opts out of reactors (a futex driver): the publisher cannot wait for the
    // client library's descriptors there.
    weft::runtime rt{
        {.workers = 1, .make_driver = [](unsigned) { return weft::make_futex_driver(); }}};
    rt.block_on([&]() -> weft::task<void> {
        EXPECT_THROW({ publisher p{*b}; }, std::system_error);
        co_return;
    }());
}

TEST(nats_backend, topics_get_their_streams_and_the_ack_names_it) {
    const std::string topic = "weft-topic-" + message_id::generate().to_string().substr(24);
    nats_backend_options o;
    o.url = nats_url();
    o.topics = {topic};
    o.storage = nats_storage::memory;
    nats_backend b{o};
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{b};
        envelope e;
        e.topic = topic;
        e.type = "test.event";
        e.payload = "x";
        auto a = (co_await pub.publish(std::move(e))).value();
        EXPECT_EQ(a.stream, topic);
        EXPECT_EQ(a.sequence, 1U);
        (co_await pub.close()).value();
    }());
}

// The ack path wakes weft once per batch: with a window of acks in flight, far fewer wake-ups
// than acks (the exact ratio depends on timing; the figure is printed, the bound is loose).
// With the handler pool every outcome arrives once too; its wake-ups (an ack handler that had
// to wait for an ack) are printed, not bounded: an idle handler waits for every ack.
void acks_complete_once(nats_ack_path path) {
    auto b = make_nats(path);
    const std::string t = "weft.test.batch-" + message_id::generate().to_string();
    constexpr int n = 5000;
    weft::runtime rt{weft::io_runtime_options(2)};
    const auto before = b->stats();
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{*b, {.max_pending = 512}};
        int ok = 0;
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {
                for (int i = 0; i < n; ++i) {
                    auto r = co_await pub.results().recv();
                    if (r && r->outcome) {
                        ++ok;
                    }
                }
            });
            for (int i = 0; i < n; ++i) {
                envelope e;
                e.topic = t;
                e.type = "test.event";
                e.payload = "p";
                (co_await pub.publish_async(std::move(e))).value();
            }
            co_return;
        });
        EXPECT_EQ(ok, n);
        (co_await pub.close()).value();
    }());
    const auto after = b->stats();
    const auto acks = after.acks - before.acks;
    const auto wakes = after.wakes - before.wakes;
    EXPECT_EQ(acks, std::uint64_t{n});
    if (path == nats_ack_path::reactor_batch) {
        EXPECT_LT(wakes, acks);
    }
    std::printf("nats %s acks=%llu wakes=%llu (%.1f wake-ups per 1000 acks)\n",
                path == nats_ack_path::reactor_batch ? "reactor_batch" : "handler_pool",
                static_cast<unsigned long long>(acks), static_cast<unsigned long long>(wakes),
                1000.0 * static_cast<double>(wakes) / static_cast<double>(acks));
}

TEST(nats_backend, acks_complete_in_batches) { acks_complete_once(nats_ack_path::reactor_batch); }

TEST(nats_backend, acks_complete_once_through_the_handler_pool) {
    acks_complete_once(nats_ack_path::handler_pool);
}

// An awaited publish returns on the worker whose drain task completed its ack: the drain
// resumes the batch it completed itself, in order (completion_run), instead of waking each task
// onto the deques, from which the other worker stole about half of them (479 of 1,000 before).
// Each task's sequences increase. A drain task that itself moved to the other worker between
// batches moves one batch of tasks, so a few do move.
TEST(nats_backend, awaited_publishes_return_on_the_worker_that_drains_their_acks) {
    auto b = make_nats();
    weft::bus::test::expect_awaited_publishes_stay_on_their_worker(
        *b, "weft.test.awaited-" + message_id::generate().to_string(), "nats");
}

// cnats blocks its caller in two places: at its own MaxPending of async publishes (StallWait)
// and when a publish finds its write buffer full (it then writes to the socket inline). weft
// keeps below both, so no runtime worker blocks inside the client: here with a write buffer
// (64 KiB) far smaller than what the window lets be in flight (512 x 2 KiB), the publisher
// holds messages until the buffer has room, and no publish was handed to cnats without room.
// With the handler pool the handlers send what is held as acks come back.
void no_publish_blocks_inside_cnats(nats_ack_path path) {
    nats_backend_options o;
    o.url = nats_url();
    o.ack_path = path;
    o.streams = {nats_stream_config{
        .name = "WEFT_TEST", .subjects = {"weft.test.>"}, .storage = nats_storage::memory}};
    o.io_buffer_bytes = 64 * 1024;
    nats_backend b{o};
    const std::string t = "weft.test.stall-" + message_id::generate().to_string();
    constexpr int n = 20'000;
    const std::string payload(2048, 'x');
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{b, {.max_pending = 512}};
        int ok = 0;
        co_await weft::with_scope([&](weft::scope& s) -> weft::task<void> {
            s.spawn([&]() -> weft::task<void> {
                for (int i = 0; i < n; ++i) {
                    auto r = co_await pub.results().recv();
                    if (r && r->outcome) {
                        ++ok;
                    }
                }
            });
            for (int i = 0; i < n; ++i) {
                envelope e;
                e.topic = t;
                e.type = "test.event";
                e.payload = payload;
                (co_await pub.publish_async(std::move(e))).value();
            }
            co_return;
        });
        EXPECT_EQ(ok, n);
        (co_await pub.close()).value();
    }());
    const auto st = b.stats();
    std::printf(
        "nats: %d publishes of 2 KiB, 64 KiB buffer: %llu held for room, %llu stalls, "
        "at most %llu bytes buffered\n",
        n, static_cast<unsigned long long>(st.publishes_held),
        static_cast<unsigned long long>(st.publish_stalls),
        static_cast<unsigned long long>(st.max_buffered));
    EXPECT_EQ(st.acks, std::uint64_t{n});
    EXPECT_EQ(st.publish_stalls, 0U);
    // The check is live: cnats's buffer was read and did fill up to the bound.
    EXPECT_GT(st.max_buffered, 0U);
    EXPECT_LE(st.max_buffered, std::uint64_t{64 * 1024});
    EXPECT_GT(st.publishes_held, 0U);
}

TEST(nats_backend, no_publish_blocks_inside_cnats) {
    no_publish_blocks_inside_cnats(nats_ack_path::reactor_batch);
}

TEST(nats_backend, no_publish_blocks_inside_cnats_with_the_handler_pool) {
    no_publish_blocks_inside_cnats(nats_ack_path::handler_pool);
}

// ---- The wire format: CloudEvents binary content mode (the NATS binding), read by a client
// that is not weft (cnats's own API here; the Go program in tests/interop does the same). ----

auto make_nats_wire(wire_options wire) -> std::unique_ptr<nats_backend> {
    nats_backend_options o;
    o.url = nats_url();
    o.streams = {nats_stream_config{
        .name = "WEFT_TEST", .subjects = {"weft.test.>"}, .storage = nats_storage::memory}};
    o.wire = std::move(wire);
    return std::make_unique<nats_backend>(std::move(o));
}

/// A plain cnats connection, with a core subscription on `subject` (a JetStream publish to a
/// stream's subject reaches core subscribers as well).
struct raw_nats {
    natsConnection* nc = nullptr;
    natsSubscription* sub = nullptr;
    jsCtx* js = nullptr;
    explicit raw_nats(const std::string& subject = "") {
        EXPECT_EQ(natsConnection_ConnectTo(&nc, nats_url().c_str()), NATS_OK);
        EXPECT_EQ(natsConnection_JetStream(&js, nc, nullptr), NATS_OK);
        if (!subject.empty()) {
            EXPECT_EQ(natsConnection_SubscribeSync(&sub, nc, subject.c_str()), NATS_OK);
            EXPECT_EQ(natsConnection_Flush(nc), NATS_OK);
        }
    }
    raw_nats(const raw_nats&) = delete;
    auto operator=(const raw_nats&) -> raw_nats& = delete;
    ~raw_nats() {
        natsSubscription_Destroy(sub);
        jsCtx_Destroy(js);
        natsConnection_Destroy(nc);
    }
    /// The next message on the subscription (owned by the caller), or nullptr after 5 s.
    auto next() -> natsMsg* {
        natsMsg* m = nullptr;
        return natsSubscription_NextMsg(&m, sub, 5000) == NATS_OK ? m : nullptr;
    }
    /// A JetStream publish of `body` with `headers`, as a service in another language would.
    void publish(const std::string& subject,
                 std::string_view body,
                 const std::vector<std::pair<std::string, std::string>>& headers) {
        natsMsg* m = nullptr;
        ASSERT_EQ(natsMsg_Create(&m, subject.c_str(), nullptr, body.data(),
                                 static_cast<int>(body.size())),
                  NATS_OK);
        for (const auto& [n, v] : headers) {
            ASSERT_EQ(natsMsgHeader_Add(m, n.c_str(), v.c_str()), NATS_OK);
        }
        jsPubAck* pa = nullptr;
        jsErrCode code = static_cast<jsErrCode>(0);
        EXPECT_EQ(js_PublishMsg(&pa, js, m, nullptr, &code), NATS_OK);
        jsPubAck_Destroy(pa);
        natsMsg_Destroy(m);
    }
};

/// An envelope built outside the coroutines: g++ 12 copies an aggregate with designated
/// initializers made inside a coroutine bitwise, leaving its strings pointing into the frame.
auto event(const std::string& topic,
           std::string key,
           std::string type,
           std::vector<header> headers,
           std::string payload) -> envelope {
    envelope e;
    e.topic = topic;
    e.key = std::move(key);
    e.type = std::move(type);
    e.headers = std::move(headers);
    e.payload = std::move(payload);
    return e;
}

auto header_of(natsMsg* m, const char* name) -> std::string {
    const char* v = nullptr;
    return natsMsgHeader_Get(m, name, &v) == NATS_OK ? std::string(v) : "<absent>";
}

auto foreign_event(const std::string& id) -> std::vector<std::pair<std::string, std::string>> {
    return {{"ce-specversion", "1.0"},
            {"ce-id", id},
            {"ce-source", "/inventory"},
            {"ce-type", "stock.reserved"},
            {"ce-time", "2026-01-02T03:04:05.123456789Z"},
            {"ce-subject", "sku%2042"},
            {"ce-datacontenttype", "application/json"},
            {"ce-tenant", "acme"}};
}

TEST(nats_backend, publish_is_cloudevents_binary_on_the_wire) {
    auto b = make_nats_wire({.mode = wire_mode::binary, .source = "/orders-service"});
    const std::string t = "weft.test.ce-" + message_id::generate().to_string();
    raw_nats raw{t};
    const std::string payload("{\"total\": 12}\0\xff", 15);
    const message_id id = message_id::generate();
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{*b};
        envelope e = event(t, "order 42", "order.placed",
                           {{"tenant", "acme"}, {"datacontenttype", "application/json"}}, payload);
        e.id = id;
        e.time = std::chrono::system_clock::time_point{std::chrono::seconds{1'767'225'600}};
        (co_await pub.publish(std::move(e))).value();
        (co_await pub.close()).value();
    }());
    natsMsg* m = raw.next();
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(std::string(natsMsg_GetData(m), static_cast<std::size_t>(natsMsg_GetDataLength(m))),
              payload);  // the body is the payload, byte for byte
    EXPECT_EQ(header_of(m, "ce-specversion"), "1.0");
    EXPECT_EQ(header_of(m, "ce-id"), id.to_string());
    EXPECT_EQ(header_of(m, "ce-source"), "/orders-service");
    EXPECT_EQ(header_of(m, "ce-type"), "order.placed");
    EXPECT_EQ(header_of(m, "ce-time"), "2026-01-01T00:00:00.000000000Z");
    EXPECT_EQ(header_of(m, "ce-subject"), "order%2042");
    EXPECT_EQ(header_of(m, "ce-tenant"), "acme");
    EXPECT_EQ(header_of(m, "ce-datacontenttype"), "application/json");
    EXPECT_EQ(header_of(m, "Nats-Msg-Id"), id.to_string());  // JetStream de-duplication
    natsMsg_Destroy(m);
}

TEST(nats_backend, header_a_cloudevent_cannot_carry_is_refused_at_publish) {
    auto b = make_nats_wire({});
    const std::string t = "weft.test.refused-" + message_id::generate().to_string();
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{*b};
        subscriber sub{*b};
        auto s = (co_await sub.subscribe(t, "g")).value();
        for (const char* name : {"Trace-Id", "weft-trace", "abcdefghijklmnopqrstu", "id"}) {
            envelope bad = event(t, "k", "x", {{name, "v"}}, "bad");
            auto r = co_await pub.publish(std::move(bad));
            EXPECT_FALSE(r) << name;
            if (!r) {
                EXPECT_EQ(r.error(), bus_errc::not_expressible) << r.error().message();
                EXPECT_NE(r.error().message().find("attribute name"), std::string::npos);
            }
        }
        envelope untyped = event(t, "k", "", {}, "untyped");
        EXPECT_EQ((co_await pub.publish(std::move(untyped))).error(), bus_errc::not_expressible);
        (co_await pub.publish(event(t, "k", "x", {}, "good"))).value();
        // Nothing of the refused ones reached the stream: the next message is the good one.
        auto d = (co_await s.next()).value();
        EXPECT_EQ(d.message().payload, "good");
        EXPECT_TRUE(d.ack());
        (co_await pub.close()).value();
    }());
}

TEST(nats_backend, subscriber_reads_an_event_a_foreign_service_published) {
    auto b = make_nats_wire({});
    const std::string t = "weft.test.foreign-" + message_id::generate().to_string();
    raw_nats raw;
    const message_id id = message_id::generate();
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        subscriber sub{*b};
        auto s = (co_await sub.subscribe(t, "g")).value();
        raw.publish(t, R"({"sku":"42","n":3})", foreign_event(id.to_string()));
        auto d = (co_await s.next()).value();
        const envelope& e = d.message();
        EXPECT_EQ(e.id, id);
        EXPECT_EQ(e.topic, t);
        EXPECT_EQ(e.type, "stock.reserved");
        EXPECT_EQ(e.key, "sku 42");
        EXPECT_EQ(e.payload, R"({"sku":"42","n":3})");
        std::chrono::system_clock::time_point want{std::chrono::seconds{1'767'323'045}};
        want += std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::nanoseconds{123'456'789});
        EXPECT_EQ(e.time, want);
        EXPECT_NE(e.find_header("source"), nullptr);
        EXPECT_EQ(e.find_header("source")->value, "/inventory");
        EXPECT_EQ(e.find_header("datacontenttype")->value, "application/json");
        EXPECT_EQ(e.find_header("tenant")->value, "acme");
        EXPECT_TRUE(d.ack());
    }());
}

// A malformed event is no delivery: it goes, as it came, to the dead-letter topic with its
// defect in Weft-Malformed (naming the mode), and the subscription goes on to the next one.
TEST(nats_backend, malformed_event_goes_to_dead_letters_naming_mode_and_defect) {
    auto b = make_nats_wire({});
    const std::string t = "weft.test.malformed-" + message_id::generate().to_string();
    raw_nats raw{t + ".dead-letter"};
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        subscriber sub{*b};
        auto s = (co_await sub.subscribe(t, "g")).value();
        auto no_version = foreign_event(message_id::generate().to_string());
        no_version.erase(no_version.begin());  // ce-specversion
        raw.publish(t, "first", no_version);
        auto bad_time = foreign_event(message_id::generate().to_string());
        bad_time[4].second = "yesterday";
        raw.publish(t, "second", bad_time);
        raw.publish(t, "third", foreign_event(message_id::generate().to_string()));
        auto d = (co_await s.next()).value();
        EXPECT_EQ(d.message().payload, "third");
        EXPECT_TRUE(d.ack());
    }());
    const std::pair<const char*, const char*> expected[] = {
        {"first", "CloudEvents%20binary:%20no%20ce-specversion%20header"},
        {"second", "CloudEvents%20binary:%20time%20'yesterday'%20is%20not%20an%20RFC%203339"}};
    for (const auto& [body, defect] : expected) {
        natsMsg* m = raw.next();
        ASSERT_NE(m, nullptr) << body;
        EXPECT_EQ(std::string(natsMsg_GetData(m)), body);
        EXPECT_NE(header_of(m, "Weft-Malformed").find(defect), std::string::npos)
            << header_of(m, "Weft-Malformed");
        EXPECT_EQ(header_of(m, "Weft-Original-Topic"), t);
        EXPECT_EQ(header_of(m, "ce-type"), "stock.reserved");  // its headers kept
        natsMsg_Destroy(m);
    }
}

// A subscriber reads every mode a publisher may use, whatever its own backend's setting.
TEST(nats_backend, subscriber_reads_every_wire_mode) {
    auto reader = make_nats_wire({});
    const std::string t = "weft.test.modes-" + message_id::generate().to_string();
    const std::string binary_payload("\x01\x02 not json", 11);
    weft::runtime rt{weft::io_runtime_options(2)};
    rt.block_on([&]() -> weft::task<void> {
        subscriber sub{*reader};
        auto s = (co_await sub.subscribe(t, "g")).value();
        for (const wire_mode mode : {wire_mode::binary, wire_mode::structured, wire_mode::weft}) {
            auto b = make_nats_wire({.mode = mode});
            publisher pub{*b};
            for (const std::string& payload : {std::string(R"({"a":[1,2]})"), binary_payload}) {
                envelope e = event(t, "k", "t", {{"h1", "v"}}, payload);
                const message_id id = message_id::generate();
                e.id = id;
                (co_await pub.publish(std::move(e))).value();
                auto d = (co_await s.next()).value();
                EXPECT_EQ(d.message().id, id);
                EXPECT_EQ(d.message().payload, payload) << static_cast<int>(mode);
                EXPECT_EQ(d.message().key, "k");
                EXPECT_EQ(d.message().find_header("h1")->value, "v");
                EXPECT_TRUE(d.ack());
            }
            (co_await pub.close()).value();
        }
    }());
}

// Dead letters of a JetStream dead-letter topic, through the API and through the weft-bus
// tool: list and show give the reason and the envelope; drop deletes it from the stream;
// requeue publishes the original envelope (same id, though within the duplicate window) to its
// topic, where the group gets it again as a new message, and deletes the dead letter.
auto tool(const std::string& args, std::string& out) -> int {
    out.clear();
    FILE* p = ::popen((std::string(WEFT_BUS_TOOL) + " " + args + " 2>/dev/null").c_str(), "r");
    if (p == nullptr) {
        return -1;
    }
    char buf[4096];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) {
        out.append(buf, n);
    }
    const int status = ::pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(nats_backend, dead_letters_list_show_drop_and_requeue_by_api_and_tool) {
    const std::string t = "weft.test.dead-" + message_id::generate().to_string();
    const std::string dlq = t + ".dead-letter";
    auto b = make_nats();
    weft::runtime rt{weft::io_runtime_options(1)};
    std::vector<envelope> sent;
    std::vector<envelope> received;  // as the group first got them
    rt.block_on([&]() -> weft::task<void> {
        publisher pub{*b};
        subscriber sub{*b};
        for (int i = 0; i < 3; ++i) {
            envelope e = event(t, "k" + std::to_string(i), "order.placed", {{"tenant", "acme"}},
                               "p" + std::to_string(i));
            e.id = message_id::generate();
            sent.push_back(e);
            (co_await pub.publish(std::move(e))).value();
        }
        auto s = (co_await sub.subscribe(t, "g")).value();
        for (int i = 0; i < 3; ++i) {
            auto d = (co_await s.next()).value();
            received.push_back(d.message());
            EXPECT_TRUE(d.term("cannot parse"));
        }
        (co_await pub.close()).value();
    }());
    nats_dead_letters dead{{.url = nats_url(), .topic = dlq}};
    std::vector<dead_letter> all;
    for (int tries = 0; tries < 100 && all.size() < 3; ++tries) {  // the terms store async
        all = dead.list(10).value();
    }
    ASSERT_EQ(all.size(), 3U);
    EXPECT_EQ(all[0].reason, "cannot parse");
    EXPECT_EQ(all[0].topic, t);
    EXPECT_EQ(original_of(dead.show(all[0].ref).value().message).payload, sent[0].payload);
    const std::string store = " --nats " + nats_url() + " --topic " + dlq;
    std::string out;
    EXPECT_EQ(tool("dead list" + store, out), 0);
    EXPECT_NE(out.find(all[1].ref + "\t" + t + "\t" + sent[1].id.to_string()), std::string::npos)
        << out;
    EXPECT_EQ(tool("dead show " + all[1].ref + store, out), 0);
    EXPECT_NE(out.find("header tenant: acme\n"), std::string::npos) << out;
    EXPECT_NE(out.find("\np1\n"), std::string::npos) << out;
    EXPECT_TRUE(dead.drop(all[2].ref));
    EXPECT_EQ(dead.show(all[2].ref).error(), std::errc::no_such_file_or_directory);
    EXPECT_EQ(tool("dead drop " + all[1].ref + store, out), 0);
    EXPECT_EQ(tool("dead requeue " + all[0].ref + store, out), 0);
    EXPECT_TRUE(dead.list(10).value().empty());
    rt.block_on([&]() -> weft::task<void> {
        subscriber sub{*b};
        auto s = (co_await sub.subscribe(t, "g")).value();
        auto d = (co_await s.next()).value();
        EXPECT_EQ(d.message(), received[0]);  // every field, as first delivered
        EXPECT_EQ(d.message().id, sent[0].id);
        EXPECT_EQ(d.message().payload, sent[0].payload);
        EXPECT_EQ(d.attempt(), 1U);
        EXPECT_TRUE(d.ack());
    }());
}

}  // namespace
