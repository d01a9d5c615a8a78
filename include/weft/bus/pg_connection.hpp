#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "weft/core/result.hpp"
#include "weft/core/task.hpp"

struct pg_conn;
struct pg_result;

namespace weft::bus {

/// Errors from PostgreSQL (category "postgres"): `connection_failed` (could not connect),
/// `query_failed` (the server refused: an SQL error, a constraint, a serialization failure),
/// `connection_lost`. libpq's own text is in `pg_connection::last_error()`.
enum class pg_errc { connection_failed = 1, query_failed, connection_lost };
[[nodiscard]] auto pg_category() noexcept -> const std::error_category&;
[[nodiscard]] inline auto make_error_code(pg_errc e) noexcept -> std::error_code {
    return {static_cast<int>(e), pg_category()};
}

/// One query's rows (text format, except bytea columns asked for in binary). Move-only.
class pg_rows {
public:
    pg_rows() = default;
    explicit pg_rows(pg_result* r) noexcept : r_(r, &free) {}
    [[nodiscard]] auto size() const noexcept -> int;
    [[nodiscard]] auto text(int row, int col) const noexcept -> std::string_view;
    [[nodiscard]] auto affected() const noexcept -> long;

private:
    static void free(pg_result* r) noexcept;
    std::unique_ptr<pg_result, void (*)(pg_result*)> r_{nullptr, &free};
};

/// A query parameter: text, binary (bytea), or NULL.
struct pg_param {
    std::optional<std::string> value;
    bool binary = false;
};

/// One statement of a pipeline: `$1..$n` parameters; `binary_results`: every column comes back
/// in binary (int8 as 8 bytes big-endian, bytea as its bytes, text as is).
struct pg_statement {
    std::string sql;
    std::vector<pg_param> params{};
    bool binary_results = false;
};

/// A libpq connection driven by weft's reactor: the connection is in non-blocking mode
/// (PQsetnonblocking), every query is sent with PQsendQueryParams, flushed with PQflush while
/// waiting on `wait_writable(PQsocket)`, and read with PQconsumeInput while waiting on
/// `wait_readable(PQsocket)`. So no runtime worker ever blocks inside libpq. Needs a runtime
/// with a reactor (weft::io_runtime_options).
///
/// One query at a time (the protocol is sequential): callers serialise their use of one
/// connection. The caller's transactions are plain SQL on it (`BEGIN` ... `COMMIT`).
///
///     auto c = (co_await weft::bus::pg_connection::connect("host=/run/pg port=5432")).value();
///     (co_await c->query("BEGIN")).value();
///     (co_await outbox.stage(*c, env)).value();
///     (co_await c->query("COMMIT")).value();
///     outbox.notify();
class pg_connection {
public:
    static auto connect(std::string conninfo) -> task<result<std::unique_ptr<pg_connection>>>;
    pg_connection(const pg_connection&) = delete;
    auto operator=(const pg_connection&) -> pg_connection& = delete;
    ~pg_connection();

    /// Runs one statement with `$1..$n` parameters (or, without parameters, one or more
    /// statements separated by `;`); the rows of the last, or `query_failed` (its text in
    /// last_error()).
    auto query(std::string sql, std::vector<pg_param> params = {}) -> task<result<pg_rows>>;
    /// Sends `statements` together in libpq's pipeline mode (one write, one round trip; each
    /// with the extended protocol, so one statement each) and returns their rows in order.
    /// The server runs them in order and, after the first that fails, skips the rest:
    /// `query_failed` (its text in last_error()). Transaction statements (BEGIN, COMMIT) may be
    /// among them; the caller's transaction state after a failure is the server's (a failed
    /// statement inside BEGIN leaves the transaction aborted, to be rolled back).
    auto pipeline(std::vector<pg_statement> statements) -> task<result<std::vector<pg_rows>>>;
    /// Between queries: waits until a NOTIFY arrives on a channel this connection LISTENs to
    /// (one already received during a query counts), drains every one received, and returns
    /// the channel of the first. `operation_canceled` when the awaiting task is stopped (the
    /// connection stays usable); `connection_lost` when it ended.
    auto wait_notification() -> task<result<std::string>>;
    /// True while a transaction is open on the connection (or a query runs on it).
    [[nodiscard]] auto in_transaction() const noexcept -> bool;
    /// Runs `fn` (which must not throw) once the transaction open on the connection commits:
    /// when a query or pipeline whose last statement is a successful COMMIT (or END) leaves
    /// the connection outside a transaction. Dropped when the transaction ends any other way
    /// (ROLLBACK, a COMMIT of a failed transaction, abandon_transaction, the connection lost).
    /// Outside a transaction (an autocommitted statement) `fn` runs at once.
    void on_commit(std::function<void()> fn);
    /// Leaves the connection outside any transaction, with nothing committed: reads the rest
    /// of a query whose caller was stopped midway, then rolls back the open transaction. When
    /// that fails (or a pipeline was cut off) the connection is shut down instead: the server
    /// rolls back as the session ends, and every later call returns connection_lost. Runs to
    /// the end even when the awaiting task is being stopped (it is how a stopped or throwing
    /// caller cleans up).
    auto abandon_transaction() -> task<void>;
    [[nodiscard]] auto last_error() const -> const std::string& { return error_; }
    [[nodiscard]] auto native() const noexcept -> pg_conn* { return conn_; }

private:
    explicit pg_connection(pg_conn* c) noexcept : conn_(c) {}
    auto flush() -> task<result<void>>;
    auto wait_result() -> task<result<void>>;
    auto abandon_now() -> task<void>;
    /// After a query or pipeline: a transaction that ended runs (committed) or drops the
    /// on_commit actions.
    void settle_commit_actions(bool committed);
    void discard() noexcept;
    pg_conn* conn_;
    std::string error_;
    std::vector<std::function<void()>> after_commit_;
};

}  // namespace weft::bus

template <>
struct std::is_error_code_enum<weft::bus::pg_errc> : std::true_type {};
