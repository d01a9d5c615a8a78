// weft::bus::sqlite_dead_letters over a real outbox: an event the broker refuses for good is
// listed with its reason, shown, dropped, or requeued and then published as it was staged.

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "weft/bus/envelope_codec.hpp"
#include "weft/bus/errc.hpp"
#include "weft/bus/memory_broker.hpp"
#include "weft/bus/publisher.hpp"
#include "weft/bus/sqlite_dead_letters.hpp"
#include "weft/bus/sqlite_outbox.hpp"
#include "weft/bus/sqlite_txn.hpp"
#include "weft/bus/subscriber.hpp"
#include "weft/core/join_handle.hpp"
#include "weft/sched/runtime.hpp"
#include "weft/sched/timer.hpp"

namespace {

using namespace weft::bus;
using namespace std::chrono_literals;

class dead_letter_db : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = std::filesystem::temp_directory_path() /
               ("weft-dead-" + std::to_string(::getpid()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::remove_all(dir_);
        std::filesystem::create_directories(dir_);
        path = dir_ / "app.db";
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }

    /// Stages `poison` (refused by the broker as too large) and `fine`, runs the relay until
    /// both were handled, and returns the outbox's counters.
    void relay_with_a_poison_event(memory_broker& broker) {
        sqlite_outbox outbox{path};
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
        {
            sqlite_txn txn{db};
            (void)outbox.stage(txn, poison).value();
            (void)outbox.stage(txn, fine).value();
            txn.commit().value();
        }
        sqlite3_close_v2(db);  // the outbox keeps its stage statement: see sqlite_outbox
        broker.set_publish_fault([](const envelope& e) -> std::error_code {
            return e.payload == "poison" ? make_error_code(bus_errc::message_too_large)
                                         : std::error_code{};
        });
        run_relay(outbox, broker, 1, 1);
        broker.set_publish_fault({});
    }
    /// Runs `outbox`'s relay until it has published `published` and dead-lettered `dead`.
    static void run_relay(sqlite_outbox& outbox,
                          memory_broker& broker,
                          std::uint64_t published,
                          std::uint64_t dead) {
        weft::runtime rt{{.workers = 1}};
        rt.block_on([&]() -> weft::task<void> {
            publisher pub{broker};
            auto relay = weft::spawn(outbox.run_relay(pub));
            while (outbox.metrics().published < published ||
                   outbox.metrics().dead_lettered < dead) {
                (void)co_await weft::sleep_for(2ms);
            }
            outbox.stop_relay();
            (co_await std::move(relay)).value();
            (co_await pub.close()).value();
        }());
    }

    std::filesystem::path dir_;
    std::string path;
    const envelope poison = [] {
        envelope e;
        e.id = message_id::generate();
        e.topic = "orders";
        e.key = "k1";
        e.type = "order.placed";
        e.headers = {{"dataschema", "urn:example:order.placed:2"}, {"tenant", "acme"}};
        e.payload = "poison";
        e.time = std::chrono::system_clock::time_point{std::chrono::seconds{1'700'000'000}};
        return e;
    }();
    const envelope fine = [] {
        envelope e;
        e.topic = "orders";
        e.key = "k2";
        e.payload = "fine";
        return e;
    }();
};

/// Runs the weft-bus tool with `args`; its exit status and standard output.
auto tool(const std::string& args, std::string& out) -> int {
    out.clear();
    FILE* p = ::popen((std::string(WEFT_BUS_TOOL) + " " + args + " 2>/dev/null").c_str(), "r");
    EXPECT_NE(p, nullptr);
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

TEST_F(dead_letter_db, list_and_show_give_the_row_its_reason_and_envelope) {
    memory_broker broker;
    relay_with_a_poison_event(broker);
    sqlite_dead_letters dead{path};
    const auto all = dead.list(10).value();
    ASSERT_EQ(all.size(), 1U);
    EXPECT_EQ(all[0].message, poison);
    EXPECT_EQ(all[0].topic, "orders");
    EXPECT_FALSE(all[0].reason.empty());
    const auto one = dead.show(all[0].ref).value();
    EXPECT_EQ(one.message, poison);
    EXPECT_EQ(dead.show("999").error(), std::errc::no_such_file_or_directory);
    EXPECT_EQ(dead.show("x").error(), std::errc::no_such_file_or_directory);
}

TEST_F(dead_letter_db, requeue_publishes_the_envelope_as_staged_and_removes_the_row) {
    memory_broker broker;
    relay_with_a_poison_event(broker);
    {
        sqlite_dead_letters dead{path};
        const auto ref = dead.list(10).value().at(0).ref;
        ASSERT_TRUE(dead.requeue(ref));
        EXPECT_TRUE(dead.list(10).value().empty());
        EXPECT_EQ(dead.requeue(ref).error(), std::errc::no_such_file_or_directory);
    }
    sqlite_outbox outbox{path};
    run_relay(outbox, broker, 1, 0);
    EXPECT_EQ(outbox.dead_letter_rows().value(), 0U);
    EXPECT_EQ(broker.stored("orders"), 2U);
    weft::runtime rt{{.workers = 1}};
    rt.block_on([&]() -> weft::task<void> {
        subscriber sub{broker};
        auto s = (co_await sub.subscribe("orders", "check")).value();
        (void)(co_await s.next()).value().ack();  // "fine"
        auto d = (co_await s.next()).value();
        std::string got;
        std::string want;
        encode(d.message(), got);
        encode(poison, want);
        EXPECT_EQ(got, want);  // byte for byte
        (void)d.ack();
    }());
}

TEST_F(dead_letter_db, drop_removes_the_row_for_good) {
    memory_broker broker;
    relay_with_a_poison_event(broker);
    sqlite_dead_letters dead{path};
    const auto ref = dead.list(10).value().at(0).ref;
    ASSERT_TRUE(dead.drop(ref));
    EXPECT_TRUE(dead.list(10).value().empty());
    EXPECT_EQ(dead.drop(ref).error(), std::errc::no_such_file_or_directory);
    sqlite_outbox outbox{path};
    EXPECT_EQ(outbox.pending_rows().value(), 0U);
}

TEST_F(dead_letter_db, tool_lists_shows_and_drops) {
    memory_broker broker;
    relay_with_a_poison_event(broker);
    const std::string ref = sqlite_dead_letters{path}.list(10).value().at(0).ref;
    const std::string store = " --sqlite " + path;
    std::string out;
    EXPECT_EQ(tool("dead list" + store, out), 0);
    EXPECT_EQ(out.rfind(ref + "\torders\t" + poison.id.to_string() + "\t", 0), 0U) << out;
    EXPECT_EQ(tool("dead show " + ref + store, out), 0);
    EXPECT_NE(out.find("header dataschema: urn:example:order.placed:2\n"), std::string::npos)
        << out;
    EXPECT_NE(out.find("header tenant: acme\n"), std::string::npos) << out;
    EXPECT_NE(out.find("key: k1\n"), std::string::npos) << out;
    EXPECT_NE(out.find("\npoison\n"), std::string::npos) << out;
    EXPECT_EQ(tool("dead drop " + ref + store, out), 0);
    EXPECT_EQ(tool("dead list" + store, out), 0);
    EXPECT_EQ(out, "");
    EXPECT_EQ(tool("dead show " + ref + store, out), 1);
    EXPECT_EQ(tool("dead frobnicate" + store, out), 2);
}

TEST_F(dead_letter_db, tool_requeue_republishes_byte_for_byte) {
    memory_broker broker;
    relay_with_a_poison_event(broker);
    const std::string ref = sqlite_dead_letters{path}.list(10).value().at(0).ref;
    std::string out;
    EXPECT_EQ(tool("dead requeue " + ref + " --sqlite " + path, out), 0);
    EXPECT_TRUE(sqlite_dead_letters{path}.list(10).value().empty());
    sqlite_outbox outbox{path};
    run_relay(outbox, broker, 1, 0);
    weft::runtime rt{{.workers = 1}};
    rt.block_on([&]() -> weft::task<void> {
        subscriber sub{broker};
        auto s = (co_await sub.subscribe("orders", "check")).value();
        (void)(co_await s.next()).value().ack();  // "fine"
        auto d = (co_await s.next()).value();
        EXPECT_EQ(encode(d.message()), encode(poison));
        (void)d.ack();
    }());
}

}  // namespace
