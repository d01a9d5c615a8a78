// The NATS JetStream backend against a real nats-server: the conformance suite, and what only
// NATS has. The server is started by CTest's fixture (scripts/brokers.sh start nats on a
// private port, WEFT_NATS_URL); a server that is not there fails these tests, never skips them.

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "awaited_on_worker.hpp"
#include "conformance.hpp"
#include "weft/bus/nats_backend.hpp"
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

}  // namespace
