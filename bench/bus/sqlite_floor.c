/* The least a relay's database side does per event on SQLite: read the row (seq, encoded
 * envelope, staged_ms) in batches of 512 by `seq > cursor ORDER BY seq LIMIT 512`, then delete
 * the batch as one range in its own transaction, as sqlite_outbox's relay does (WAL,
 * secure_delete off, NOMUTEX, prepared statements kept). Nothing else: no decode, no copy of
 * the bytes (their pointer and length are read), no publish. `drain` is what callgrind counts.
 *   cc -O2 -g -o sqlite_floor bench/bus/sqlite_floor.c -lsqlite3
 *   valgrind --tool=callgrind --toggle-collect=drain ./sqlite_floor FILE N [BATCH]
 * at N = 10000 and 20000; the difference / 10000 is the cost per event (the least SQLite work
 * a relay must do, docs/design/outbox-relay.md). Not built by CMake: a one-off measurement. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void ok(int rc, sqlite3* db, const char* what) {
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
        fprintf(stderr, "%s: %s\n", what, sqlite3_errmsg(db));
        exit(1);
    }
}

static unsigned long sink;

__attribute__((noinline)) static long drain(sqlite3* db, int batch) {
    sqlite3_stmt *rd, *del;
    ok(sqlite3_prepare_v2(db, "SELECT seq, envelope, staged_ms FROM o WHERE seq > ? ORDER BY seq LIMIT ?",
                          -1, &rd, 0), db, "prepare read");
    ok(sqlite3_prepare_v2(db, "DELETE FROM o WHERE seq BETWEEN ? AND ?", -1, &del, 0), db,
       "prepare delete");
    long cursor = 0, total = 0;
    for (;;) {
        sqlite3_bind_int64(rd, 1, cursor);
        sqlite3_bind_int(rd, 2, batch);
        long first = -1, last = -1;
        while (sqlite3_step(rd) == SQLITE_ROW) {
            long seq = sqlite3_column_int64(rd, 0);
            const void* p = sqlite3_column_blob(rd, 1);
            int n = sqlite3_column_bytes(rd, 1);
            long staged = sqlite3_column_int64(rd, 2);
            sink += (unsigned long)p + (unsigned long)n + (unsigned long)staged;
            if (first < 0) first = seq;
            last = seq;
            ++total;
        }
        sqlite3_reset(rd);
        if (first < 0) break;
        ok(sqlite3_exec(db, "BEGIN IMMEDIATE", 0, 0, 0), db, "begin");
        sqlite3_bind_int64(del, 1, first);
        sqlite3_bind_int64(del, 2, last);
        ok(sqlite3_step(del), db, "delete");
        sqlite3_reset(del);
        ok(sqlite3_exec(db, "COMMIT", 0, 0, 0), db, "commit");
        cursor = last;
    }
    sqlite3_finalize(rd);
    sqlite3_finalize(del);
    return total;
}

int main(int argc, char** argv) {
    if (argc < 3) return 2;
    long n = atol(argv[2]);
    int batch = argc > 3 ? atoi(argv[3]) : 512;
    remove(argv[1]);
    sqlite3* db;
    ok(sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, 0), db, "open");
    ok(sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA secure_delete=OFF;"
                        "CREATE TABLE o (seq INTEGER PRIMARY KEY AUTOINCREMENT, id BLOB NOT NULL, "
                        "topic TEXT NOT NULL, key TEXT NOT NULL, envelope BLOB NOT NULL, "
                        "staged_ms INTEGER NOT NULL)", 0, 0, 0), db, "schema");
    sqlite3_stmt* ins;
    ok(sqlite3_prepare_v2(db, "INSERT INTO o (id, topic, key, envelope, staged_ms) VALUES (?, ?, ?, ?, ?)",
                          -1, &ins, 0), db, "prepare insert");
    char env[220], id[16], key[16];
    memset(env, 'x', sizeof env);
    for (long i = 0; i < n; i += 100) {
        ok(sqlite3_exec(db, "BEGIN IMMEDIATE", 0, 0, 0), db, "begin");
        for (long k = i; k < i + 100 && k < n; ++k) {
            memcpy(id, &k, sizeof k);
            memset(id + 8, 1, 8);
            int kl = snprintf(key, sizeof key, "k%ld", k % 100);
            sqlite3_bind_blob(ins, 1, id, 16, SQLITE_TRANSIENT);
            sqlite3_bind_text(ins, 2, "orders", 6, SQLITE_STATIC);
            sqlite3_bind_text(ins, 3, key, kl, SQLITE_TRANSIENT);
            sqlite3_bind_blob(ins, 4, env, sizeof env, SQLITE_TRANSIENT);
            sqlite3_bind_int64(ins, 5, 1700000000000 + k);
            ok(sqlite3_step(ins), db, "insert");
            sqlite3_reset(ins);
        }
        ok(sqlite3_exec(db, "COMMIT", 0, 0, 0), db, "commit");
    }
    sqlite3_finalize(ins);
    long got = drain(db, batch);
    printf("drained %ld of %ld (sink %lu)\n", got, n, sink & 1);
    sqlite3_close(db);
    return got == n ? 0 : 1;
}
