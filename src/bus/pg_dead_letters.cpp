#include "weft/bus/pg_dead_letters.hpp"

#include <libpq-fe.h>

#include <charconv>
#include <cstdint>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "sql_identifier.hpp"
#include "weft/bus/envelope_codec.hpp"

namespace weft::bus {

namespace {

auto not_found() -> std::error_code {
    return std::make_error_code(std::errc::no_such_file_or_directory);
}

auto parse_seq(std::string_view ref, std::int64_t& seq) -> bool {
    const auto [p, ec] = std::from_chars(ref.data(), ref.data() + ref.size(), seq);
    return ec == std::errc{} && p == ref.data() + ref.size();
}

using connection = std::unique_ptr<PGconn, decltype(&PQfinish)>;
using rows = std::unique_ptr<PGresult, decltype(&PQclear)>;

auto connect(const std::string& conninfo) -> result<connection> {
    connection c{PQconnectdb(conninfo.c_str()), &PQfinish};
    if (c == nullptr || PQstatus(c.get()) != CONNECTION_OK) {
        return make_error_code(pg_errc::connection_failed);
    }
    return c;
}

// Runs one statement with text parameters; its rows, or query_failed (connection_lost when
// the connection broke under it).
auto exec(PGconn* c, const std::string& sql, const std::vector<std::string>& params)
    -> result<rows> {
    std::vector<const char*> values;
    values.reserve(params.size());
    for (const auto& p : params) {
        values.push_back(p.c_str());
    }
    rows r{PQexecParams(c, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(),
                        nullptr, nullptr, 0),
           &PQclear};
    const ExecStatusType st = r != nullptr ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        return make_error_code(PQstatus(c) == CONNECTION_OK ? pg_errc::query_failed
                                                            : pg_errc::connection_lost);
    }
    return r;
}

// Row `i` of `SELECT seq, envelope, reason, topic` (text format: the bytea as hex).
auto row_of(const PGresult* r, int i) -> result<dead_letter> {
    std::size_t n = 0;
    unsigned char* bytes =
        PQunescapeBytea(reinterpret_cast<const unsigned char*>(PQgetvalue(r, i, 1)), &n);
    if (bytes == nullptr) {
        return std::make_error_code(std::errc::not_enough_memory);
    }
    auto env = decode(std::string_view(reinterpret_cast<const char*>(bytes), n));
    PQfreemem(bytes);
    if (!env) {
        return env.error();
    }
    return dead_letter{.ref = PQgetvalue(r, i, 0),
                       .message = std::move(*env),
                       .reason = PQgetvalue(r, i, 2),
                       .topic = PQgetvalue(r, i, 3)};
}

}  // namespace

pg_dead_letters::pg_dead_letters(pg_outbox_options options)
    : options_(std::move(options)), outbox_(options_) {}

pg_dead_letters::~pg_dead_letters() = default;

auto pg_dead_letters::list(std::size_t limit) -> result<std::vector<dead_letter>> {
    auto c = connect(options_.conninfo);
    if (!c) {
        return c.error();
    }
    auto r = exec(c->get(),
                  "SELECT seq, envelope, reason, topic FROM " +
                      detail::quoted(options_.table + "_dead") + " ORDER BY seq LIMIT $1",
                  {std::to_string(limit)});
    if (!r) {
        return r.error();
    }
    std::vector<dead_letter> out;
    for (int i = 0; i < PQntuples(r->get()); ++i) {
        auto d = row_of(r->get(), i);
        if (!d) {
            return d.error();
        }
        out.push_back(std::move(*d));
    }
    return out;
}

auto pg_dead_letters::show(std::string_view ref) -> result<dead_letter> {
    std::int64_t seq = 0;
    if (!parse_seq(ref, seq)) {
        return not_found();
    }
    auto c = connect(options_.conninfo);
    if (!c) {
        return c.error();
    }
    auto r = exec(c->get(),
                  "SELECT seq, envelope, reason, topic FROM " +
                      detail::quoted(options_.table + "_dead") + " WHERE seq = $1",
                  {std::to_string(seq)});
    if (!r) {
        return r.error();
    }
    if (PQntuples(r->get()) == 0) {
        return not_found();
    }
    return row_of(r->get(), 0);
}

auto pg_dead_letters::requeue(std::string_view ref) -> result<void> {
    std::int64_t seq = 0;
    if (!parse_seq(ref, seq)) {
        return not_found();
    }
    auto c = connect(options_.conninfo);
    if (!c) {
        return c.error();
    }
    PGconn* conn = c->get();
    const std::string dead = detail::quoted(options_.table + "_dead");
    const std::string s = std::to_string(seq);
    // The key decides the partition; the row stays locked from here to the delete.
    auto steps = [&]() -> result<bool> {
        if (auto b = exec(conn, "BEGIN", {}); !b) {
            return b.error();
        }
        auto k = exec(conn, "SELECT key FROM " + dead + " WHERE seq = $1 FOR UPDATE", {s});
        if (!k) {
            return k.error();
        }
        if (PQntuples(k->get()) == 0) {
            return false;
        }
        const std::string part = std::to_string(outbox_.partition_of(PQgetvalue(k->get(), 0, 0)));
        if (auto i = exec(conn,
                          "INSERT INTO " + detail::quoted(options_.table) +
                              " (id, topic, key, part, envelope, staged_at) SELECT id, topic, "
                              "key, $2, envelope, staged_at FROM " +
                              dead + " WHERE seq = $1",
                          {s, part});
            !i) {
            return i.error();
        }
        if (auto d = exec(conn, "DELETE FROM " + dead + " WHERE seq = $1", {s}); !d) {
            return d.error();
        }
        if (options_.listen_notify) {
            if (auto n = exec(conn, "SELECT pg_notify($1, '')", {options_.table + "_wake"}); !n) {
                return n.error();
            }
        }
        if (auto e = exec(conn, "COMMIT", {}); !e) {
            return e.error();
        }
        return true;
    };
    auto done = steps();
    if (!done || !*done) {
        (void)exec(conn, "ROLLBACK", {});
    }
    if (!done) {
        return done.error();
    }
    if (!*done) {
        return not_found();
    }
    return {};
}

auto pg_dead_letters::drop(std::string_view ref) -> result<void> {
    std::int64_t seq = 0;
    if (!parse_seq(ref, seq)) {
        return not_found();
    }
    auto c = connect(options_.conninfo);
    if (!c) {
        return c.error();
    }
    auto r = exec(c->get(),
                  "DELETE FROM " + detail::quoted(options_.table + "_dead") + " WHERE seq = $1",
                  {std::to_string(seq)});
    if (!r) {
        return r.error();
    }
    if (std::string_view(PQcmdTuples(r->get())) != "1") {
        return not_found();
    }
    return {};
}

}  // namespace weft::bus
