// A user's program on weft::bus_sqlite, built against the installed tree: an event staged in
// the caller's own SQLite transaction is in the outbox once that transaction commits, and not
// when it rolls back.
#include <sqlite3.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <weft/bus/sqlite_outbox.hpp>
#include <weft/bus/sqlite_txn.hpp>

auto main(int argc, char** argv) -> int {
    const std::filesystem::path path =
        argc > 1 ? std::filesystem::path(argv[1]) : std::filesystem::path("consumer_outbox.db");
    std::filesystem::remove(path);
    weft::bus::sqlite_outbox outbox{path.string()};
    sqlite3* db = nullptr;
    if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
        return 1;
    }
    auto stage_one = [&](bool commit) {
        weft::bus::sqlite_txn txn{db};
        weft::bus::envelope env;
        env.topic = "orders";
        env.payload = "hello";
        auto id = outbox.stage(txn, std::move(env));
        if (id && commit) {
            return txn.commit().has_value();
        }
        return id.has_value();  // the destructor rolls back
    };
    const bool staged = stage_one(true) && stage_one(false);
    outbox.release(db);
    sqlite3_close(db);
    auto rows = outbox.pending_rows();
    std::printf("bus_sqlite: %llu pending row(s)\n",
                rows ? static_cast<unsigned long long>(*rows) : 0ULL);
    return staged && rows && *rows == 1 ? 0 : 1;
}
