#include "weft/bus/sqlite_txn.hpp"

#include <sqlite3.h>

#include <string>

#include "sqlite_statement.hpp"

namespace weft::bus {
namespace {
class sqlite_category_impl final : public std::error_category {
public:
    [[nodiscard]] auto name() const noexcept -> const char* override { return "sqlite"; }
    [[nodiscard]] auto message(int ev) const -> std::string override { return sqlite3_errstr(ev); }
};
}  // namespace

auto sqlite_category() noexcept -> const std::error_category& {
    static const sqlite_category_impl cat;
    return cat;
}

sqlite_txn::sqlite_txn(sqlite3* db) : db_(db) {
    if (const int rc = detail::sqlite_exec(db_, "BEGIN IMMEDIATE"); rc != 0) {
        throw std::system_error(detail::sqlite_error(rc), "weft::bus::sqlite_txn: BEGIN");
    }
    open_ = true;
}

sqlite_txn::~sqlite_txn() { rollback(); }

auto sqlite_txn::commit() -> result<void> {
    if (!open_) {
        return std::errc::invalid_argument;
    }
    if (const int rc = detail::sqlite_exec(db_, "COMMIT"); rc != 0) {
        rollback();
        return detail::sqlite_error(rc);
    }
    open_ = false;
    auto actions = std::move(after_commit_);
    after_commit_.clear();
    for (auto& fn : actions) {
        fn();
    }
    return {};
}

void sqlite_txn::rollback() noexcept {
    if (open_) {
        open_ = false;
        (void)detail::sqlite_exec(db_, "ROLLBACK");
        after_commit_.clear();
    }
}

}  // namespace weft::bus
