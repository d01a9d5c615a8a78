// weft-bus: operations on a weft::bus deployment. `weft-bus dead list|show|requeue|drop`
// inspects and repairs dead letters through weft::bus::dead_letters.
//
//     weft-bus dead list    --sqlite app.db [--table weft_outbox] [--limit 100]
//     weft-bus dead show    --sqlite app.db 42
//     weft-bus dead requeue --sqlite app.db 42
//     weft-bus dead drop    --sqlite app.db 42
//     weft-bus dead requeue --pg "host=db user=app" [--table weft_outbox] [--partitions 16] 42
//     weft-bus dead list    --nats nats://127.0.0.1:4222 --topic orders.dead-letter [--stream S]
//     weft-bus dead drop    --kafka 127.0.0.1:9092 --topic orders.dead-letter [--group G] 0:17
//
// Exit status: 0 done; 1 the store refused or has no such dead letter; 2 a usage error.

#include <cstdint>
#include <cstdio>
#include <exception>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "weft/bus/dead_letters.hpp"
#include "weft/bus/sqlite_dead_letters.hpp"
#if defined(WEFT_BUS_TOOL_NATS)
#include "weft/bus/nats_dead_letters.hpp"
#endif
#if defined(WEFT_BUS_TOOL_KAFKA)
#include "weft/bus/kafka_dead_letters.hpp"
#endif
#if defined(WEFT_BUS_TOOL_PG)
#include "weft/bus/pg_dead_letters.hpp"
#endif

namespace {

constexpr const char* usage =
    "usage: weft-bus dead list|show|requeue|drop [REF] STORE [--limit N]\n"
    "STORE: --sqlite FILE [--table NAME]   an outbox's <table>_dead (default weft_outbox)\n"
    "       --pg CONNINFO [--table NAME] [--partitions N]   a PostgreSQL outbox's <table>_dead\n"
    "             (N: the outbox's partitions, default 16; requeue files the row under them)\n"
    "       --nats URL --topic DEAD_TOPIC [--stream NAME]   a JetStream dead-letter topic\n"
    "       --kafka BROKERS --topic DEAD_TOPIC [--group NAME]   a Kafka dead-letter topic\n"
    "             (REF <partition>:<offset>; the group records what is settled, default\n"
    "             weft-dead-letters)\n";

struct arguments {
    std::string command;
    std::string ref;
    std::string sqlite;
    std::string table = "weft_outbox";
    std::string pg;
    std::uint32_t partitions = 16;
    std::string nats;
    std::string topic;
    std::string stream;
    std::string kafka;
    std::string group = "weft-dead-letters";
    std::size_t limit = 100;
};

auto parse(int argc, char** argv, arguments& a) -> bool {
    std::vector<std::string_view> args(argv + 1, argv + argc);
    if (args.size() < 2 || args[0] != "dead") {
        return false;
    }
    a.command = args[1];
    for (std::size_t i = 2; i < args.size(); ++i) {
        auto value = [&](std::string& out) {
            if (i + 1 >= args.size()) {
                return false;
            }
            out = args[++i];
            return true;
        };
        if (args[i] == "--sqlite") {
            if (!value(a.sqlite)) {
                return false;
            }
        } else if (args[i] == "--table") {
            if (!value(a.table)) {
                return false;
            }
        } else if (args[i] == "--pg") {
            if (!value(a.pg)) {
                return false;
            }
        } else if (args[i] == "--partitions") {
            std::string n;
            if (!value(n)) {
                return false;
            }
            a.partitions = static_cast<std::uint32_t>(std::stoul(n));
        } else if (args[i] == "--nats") {
            if (!value(a.nats)) {
                return false;
            }
        } else if (args[i] == "--kafka") {
            if (!value(a.kafka)) {
                return false;
            }
        } else if (args[i] == "--group") {
            if (!value(a.group)) {
                return false;
            }
        } else if (args[i] == "--topic") {
            if (!value(a.topic)) {
                return false;
            }
        } else if (args[i] == "--stream") {
            if (!value(a.stream)) {
                return false;
            }
        } else if (args[i] == "--limit") {
            std::string n;
            if (!value(n)) {
                return false;
            }
            a.limit = std::stoul(n);
        } else if (a.ref.empty() && !args[i].starts_with("--")) {
            a.ref = args[i];
        } else {
            return false;
        }
    }
    const bool needs_ref = a.command != "list";
    if (a.command != "list" && a.command != "show" && a.command != "requeue" &&
        a.command != "drop") {
        return false;
    }
    const int stores = static_cast<int>(!a.sqlite.empty()) + static_cast<int>(!a.pg.empty()) +
                       static_cast<int>(!a.nats.empty()) + static_cast<int>(!a.kafka.empty());
    // A broker's dead letters are a topic; an outbox's, its table's.
    const bool broker = !a.nats.empty() || !a.kafka.empty();
    const bool one_store = stores == 1 && broker == !a.topic.empty();
    return one_store && needs_ref == !a.ref.empty();
}

// Names and values as they are; a payload's bytes as they are (it may be binary).
void print(const weft::bus::dead_letter& d) {
    std::cout << "ref: " << d.ref << "\n"
              << "topic: " << d.topic << "\n"
              << "reason: " << d.reason << "\n"
              << "id: " << d.message.id.to_string() << "\n"
              << "key: " << d.message.key << "\n"
              << "type: " << d.message.type << "\n";
    for (const auto& h : d.message.headers) {
        std::cout << "header " << h.name << ": " << h.value << "\n";
    }
    std::cout << "payload: " << d.message.payload.size() << " bytes\n";
    std::cout.write(d.message.payload.data(),
                    static_cast<std::streamsize>(d.message.payload.size()));
    std::cout << "\n";
}

auto fail(const std::error_code& ec) -> int {
    std::cerr << "weft-bus: " << ec.message() << "\n";
    return 1;
}

}  // namespace

auto main(int argc, char** argv) -> int {
    arguments a;
    try {
        if (!parse(argc, argv, a)) {
            std::cerr << usage;
            return 2;
        }
    } catch (const std::exception&) {
        std::cerr << usage;
        return 2;
    }
    try {
        std::unique_ptr<weft::bus::dead_letters> store;
        if (!a.sqlite.empty()) {
            store = std::make_unique<weft::bus::sqlite_dead_letters>(a.sqlite, a.table);
        } else if (!a.pg.empty()) {
#if defined(WEFT_BUS_TOOL_PG)
            store = std::make_unique<weft::bus::pg_dead_letters>(weft::bus::pg_outbox_options{
                .conninfo = a.pg, .table = a.table, .partitions = a.partitions});
#else
            std::cerr << "weft-bus: built without PostgreSQL\n";
            return 2;
#endif
        } else if (!a.kafka.empty()) {
#if defined(WEFT_BUS_TOOL_KAFKA)
            store = std::make_unique<weft::bus::kafka_dead_letters>(
                weft::bus::kafka_dead_letters_options{
                    .brokers = a.kafka, .topic = a.topic, .group = a.group});
#else
            std::cerr << "weft-bus: built without Kafka\n";
            return 2;
#endif
        } else {
#if defined(WEFT_BUS_TOOL_NATS)
            store =
                std::make_unique<weft::bus::nats_dead_letters>(weft::bus::nats_dead_letters_options{
                    .url = a.nats, .topic = a.topic, .stream = a.stream});
#else
            std::cerr << "weft-bus: built without NATS\n";
            return 2;
#endif
        }
        if (a.command == "list") {
            auto all = store->list(a.limit);
            if (!all) {
                return fail(all.error());
            }
            for (const auto& d : *all) {
                std::cout << d.ref << "\t" << d.topic << "\t" << d.message.id.to_string() << "\t"
                          << d.reason << "\n";
            }
            return 0;
        }
        if (a.command == "show") {
            auto d = store->show(a.ref);
            if (!d) {
                return fail(d.error());
            }
            print(*d);
            return 0;
        }
        auto r = a.command == "requeue" ? store->requeue(a.ref) : store->drop(a.ref);
        if (!r) {
            return fail(r.error());
        }
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "weft-bus: " << e.what() << "\n";
        return 1;
    }
}
