#include "weft/bus/pg_connection.hpp"

#include <libpq-fe.h>
#include <sys/socket.h>

#include <string>
#include <string_view>
#include <utility>

#include "weft/core/join_handle.hpp"
#include "weft/io/fd_wait.hpp"
#include "weft/sched/spawn_blocking.hpp"

namespace weft::bus {
namespace {
class pg_category_impl final : public std::error_category {
public:
    [[nodiscard]] auto name() const noexcept -> const char* override { return "postgres"; }
    [[nodiscard]] auto message(int ev) const -> std::string override {
        switch (static_cast<pg_errc>(ev)) {
            case pg_errc::connection_failed:
                return "could not connect to PostgreSQL";
            case pg_errc::query_failed:
                return "PostgreSQL refused the query";
            case pg_errc::connection_lost:
                return "connection to PostgreSQL lost";
        }
        return "unknown postgres error";
    }
};
}  // namespace

auto pg_category() noexcept -> const std::error_category& {
    static const pg_category_impl cat;
    return cat;
}

void pg_rows::free(pg_result* r) noexcept { PQclear(r); }
auto pg_rows::size() const noexcept -> int { return r_ ? PQntuples(r_.get()) : 0; }
auto pg_rows::text(int row, int col) const noexcept -> std::string_view {
    return {PQgetvalue(r_.get(), row, col),
            static_cast<std::size_t>(PQgetlength(r_.get(), row, col))};
}
auto pg_rows::affected() const noexcept -> long {
    const char* n = r_ ? PQcmdTuples(r_.get()) : "";
    return *n != '\0' ? std::stol(n) : 0;
}

pg_connection::~pg_connection() { PQfinish(conn_); }

auto pg_connection::connect(std::string conninfo) -> task<result<std::unique_ptr<pg_connection>>> {
    PGconn* raw = PQconnectStart(conninfo.c_str());
    if (raw == nullptr) {
        co_return make_error_code(pg_errc::connection_failed);
    }
    std::unique_ptr<pg_connection> c{new pg_connection(raw)};
    if (PQstatus(raw) == CONNECTION_BAD) {
        co_return make_error_code(pg_errc::connection_failed);
    }
    // PQconnectPoll says which readiness it needs next; the socket may change between steps.
    PostgresPollingStatusType st = PGRES_POLLING_WRITING;
    while (st != PGRES_POLLING_OK) {
        if (st == PGRES_POLLING_FAILED) {
            c->error_ = PQerrorMessage(raw);
            co_return make_error_code(pg_errc::connection_failed);
        }
        const int fd = PQsocket(raw);
        if (st == PGRES_POLLING_READING) {
            auto w = co_await wait_readable(fd);
            if (!w) {
                co_return w.error();
            }
        } else {
            auto w = co_await wait_writable(fd);
            if (!w) {
                co_return w.error();
            }
        }
        st = PQconnectPoll(raw);
    }
    if (PQsetnonblocking(raw, 1) != 0) {
        c->error_ = PQerrorMessage(raw);
        co_return make_error_code(pg_errc::connection_failed);
    }
    co_return std::move(c);
}

auto pg_connection::query(std::string sql, std::vector<pg_param> params) -> task<result<pg_rows>> {
    std::vector<const char*> values;
    std::vector<int> lengths;
    std::vector<int> formats;
    values.reserve(params.size());
    for (const auto& p : params) {
        values.push_back(p.value ? p.value->data() : nullptr);
        lengths.push_back(p.value ? static_cast<int>(p.value->size()) : 0);
        formats.push_back(p.binary ? 1 : 0);
    }
    // Without parameters, the simple protocol (PQsendQuery): it takes several statements at
    // once (a migration step); the extended one (PQsendQueryParams) takes exactly one.
    const int sent =
        params.empty()
            ? PQsendQuery(conn_, sql.c_str())
            : PQsendQueryParams(conn_, sql.c_str(), static_cast<int>(params.size()), nullptr,
                                values.data(), lengths.data(), formats.data(), 0);
    if (sent == 0) {
        error_ = PQerrorMessage(conn_);
        co_return make_error_code(PQstatus(conn_) == CONNECTION_BAD ? pg_errc::connection_lost
                                                                    : pg_errc::query_failed);
    }
    auto flushed = co_await flush();
    if (!flushed) {
        co_return flushed.error();
    }
    // Read until libpq has a whole result, then drain every result of the query.
    pg_rows last;
    bool failed = false;
    bool committed = false;  // the last statement was a COMMIT that committed
    for (;;) {
        auto ready = co_await wait_result();
        if (!ready) {
            co_return ready.error();
        }
        PGresult* r = PQgetResult(conn_);
        if (r == nullptr) {
            break;
        }
        const auto status = PQresultStatus(r);
        if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
            error_ = PQresultErrorMessage(r);
            failed = true;
        }
        committed = !failed && std::string_view{PQcmdStatus(r)} == "COMMIT";
        last = pg_rows{r};
    }
    settle_commit_actions(committed);
    if (failed) {
        co_return make_error_code(PQstatus(conn_) == CONNECTION_BAD ? pg_errc::connection_lost
                                                                    : pg_errc::query_failed);
    }
    co_return last;
}

// Flush: PQflush answers 1 while some of what was sent is still in libpq's buffer and the
// socket is full.
auto pg_connection::flush() -> task<result<void>> {
    for (;;) {
        const int f = PQflush(conn_);
        if (f == 0) {
            co_return result<void>{};
        }
        if (f < 0) {
            error_ = PQerrorMessage(conn_);
            co_return make_error_code(pg_errc::connection_lost);
        }
        auto w = co_await wait_writable(PQsocket(conn_));
        if (!w) {
            co_return w.error();
        }
    }
}

// Reads until PQgetResult would not block.
auto pg_connection::wait_result() -> task<result<void>> {
    while (PQisBusy(conn_) != 0) {
        auto w = co_await wait_readable(PQsocket(conn_));
        if (!w) {
            co_return w.error();
        }
        if (PQconsumeInput(conn_) == 0) {
            error_ = PQerrorMessage(conn_);
            co_return make_error_code(pg_errc::connection_lost);
        }
    }
    co_return result<void>{};
}

// Pipeline mode (libpq 14+): every statement is queued with PQsendQueryParams, one
// PQpipelineSync ends the batch, and a single flush writes them all. Results then arrive per
// statement (each followed by a null from PQgetResult), and one PGRES_PIPELINE_SYNC closes the
// batch; statements after a failed one come back PGRES_PIPELINE_ABORTED. The connection
// leaves pipeline mode before returning (PQexitPipelineMode needs every result read), except
// when the connection itself is lost.
auto pg_connection::pipeline(std::vector<pg_statement> statements)
    -> task<result<std::vector<pg_rows>>> {
    if (PQenterPipelineMode(conn_) == 0) {
        error_ = PQerrorMessage(conn_);
        co_return make_error_code(pg_errc::query_failed);
    }
    auto lost = [this]() -> std::error_code {
        error_ = PQerrorMessage(conn_);
        return make_error_code(PQstatus(conn_) == CONNECTION_BAD ? pg_errc::connection_lost
                                                                 : pg_errc::query_failed);
    };
    std::vector<const char*> values;
    std::vector<int> lengths;
    std::vector<int> formats;
    for (const auto& st : statements) {
        values.clear();
        lengths.clear();
        formats.clear();
        for (const auto& p : st.params) {
            values.push_back(p.value ? p.value->data() : nullptr);
            lengths.push_back(p.value ? static_cast<int>(p.value->size()) : 0);
            formats.push_back(p.binary ? 1 : 0);
        }
        if (PQsendQueryParams(conn_, st.sql.c_str(), static_cast<int>(st.params.size()), nullptr,
                              values.data(), lengths.data(), formats.data(),
                              st.binary_results ? 1 : 0) == 0) {
            co_return lost();  // nothing of the batch reached the server's queue for a sync
        }
    }
    if (PQpipelineSync(conn_) == 0) {
        co_return lost();
    }
    auto flushed = co_await flush();
    if (!flushed) {
        co_return flushed.error();
    }
    std::vector<pg_rows> out;
    out.reserve(statements.size());
    bool failed = false;
    bool committed = false;  // the last statement was a COMMIT that committed
    for (;;) {
        auto ready = co_await wait_result();
        if (!ready) {
            co_return ready.error();
        }
        PGresult* r = PQgetResult(conn_);
        if (r == nullptr) {
            continue;  // the end of one statement's results
        }
        const auto status = PQresultStatus(r);
        if (status == PGRES_PIPELINE_SYNC) {
            PQclear(r);
            break;
        }
        if (status == PGRES_FATAL_ERROR && !failed) {
            error_ = PQresultErrorMessage(r);
            failed = true;
        } else if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
            failed = true;  // PGRES_PIPELINE_ABORTED after the failed one
        }
        committed = !failed && std::string_view{PQcmdStatus(r)} == "COMMIT";
        out.emplace_back(r);
    }
    if (PQexitPipelineMode(conn_) == 0) {
        co_return lost();
    }
    settle_commit_actions(committed);
    if (failed) {
        co_return make_error_code(PQstatus(conn_) == CONNECTION_BAD ? pg_errc::connection_lost
                                                                    : pg_errc::query_failed);
    }
    co_return out;
}

auto pg_connection::in_transaction() const noexcept -> bool {
    return PQtransactionStatus(conn_) != PQTRANS_IDLE;
}

void pg_connection::on_commit(std::function<void()> fn) {
    if (!in_transaction()) {
        fn();  // committed already (autocommit)
        return;
    }
    after_commit_.push_back(std::move(fn));
}

void pg_connection::settle_commit_actions(bool committed) {
    if (after_commit_.empty() || PQtransactionStatus(conn_) != PQTRANS_IDLE) {
        return;  // no transaction ended (or the connection is lost: dropped with it)
    }
    auto actions = std::move(after_commit_);
    after_commit_.clear();
    if (committed) {
        for (auto& fn : actions) {
            fn();
        }
    }
}

void pg_connection::discard() noexcept {
    after_commit_.clear();
    // The server sees the session end and rolls back; every later call here fails with
    // connection_lost.
    ::shutdown(PQsocket(conn_), SHUT_RDWR);
}

auto pg_connection::abandon_transaction() -> task<void> {
    // Spawned and joined: the caller's stop (a cancelled handler, a timeout) does not reach
    // the ROLLBACK, which must run whatever the caller's state. A join is not cancellable.
    co_await weft::spawn(abandon_now());
}

auto pg_connection::abandon_now() -> task<void> {
    if (PQpipelineStatus(conn_) != PQ_PIPELINE_OFF) {
        discard();  // a pipeline cut off midway: its results cannot be told apart
        co_return;
    }
    if (PQtransactionStatus(conn_) == PQTRANS_ACTIVE) {
        // A query cut off while it ran: the server is asked to cancel it (PQcancel connects
        // and waits for the answer: a blocking call, on the blocking pool), then the rest of
        // its results is read.
        PGcancel* cancel = PQgetCancel(conn_);
        if (cancel == nullptr) {
            discard();
            co_return;
        }
        auto sent = co_await spawn_blocking([cancel] {
            char why[256];
            return PQcancel(cancel, why, sizeof why) == 1;
        });
        PQfreeCancel(cancel);
        if (!sent || !*sent) {
            discard();
            co_return;
        }
    }
    for (;;) {
        auto ready = co_await wait_result();
        if (!ready) {
            discard();
            co_return;
        }
        PGresult* r = PQgetResult(conn_);
        if (r == nullptr) {
            break;
        }
        PQclear(r);
    }
    if (PQtransactionStatus(conn_) == PQTRANS_IDLE) {
        settle_commit_actions(false);
        co_return;
    }
    auto rolled_back = co_await query("ROLLBACK");
    if (!rolled_back || in_transaction()) {
        discard();
    }
}

auto pg_connection::wait_notification() -> task<result<std::string>> {
    for (;;) {
        if (PQconsumeInput(conn_) == 0) {
            error_ = PQerrorMessage(conn_);
            co_return make_error_code(pg_errc::connection_lost);
        }
        std::string channel;
        while (PGnotify* n = PQnotifies(conn_)) {
            if (channel.empty()) {
                channel = n->relname;
            }
            PQfreemem(n);
        }
        if (!channel.empty()) {
            co_return channel;
        }
        auto w = co_await wait_readable(PQsocket(conn_));
        if (!w) {
            co_return w.error();
        }
    }
}

}  // namespace weft::bus
