#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "weft/bus/dead_letters.hpp"

struct sqlite3;

namespace weft::bus {

/// The dead letters of a sqlite_outbox: the rows of `<table>_dead` (events the broker refused
/// for good). `ref` is the row's seq; `reason` the broker's refusal; `topic` the event's.
/// requeue moves the row back into `<table>` in one transaction, with a new seq (after every
/// row there, so a running relay reads it) and the envelope's bytes as they were staged.
/// Opens its own connection to the file (the outbox's may be in use); blocking, like every
/// dead_letters.
///
///     weft::bus::sqlite_dead_letters dead{"app.db", "weft_outbox"};
///     for (const auto& d : dead.list(100).value()) { std::cout << d.ref << ' ' << d.reason; }
class sqlite_dead_letters final : public dead_letters {
public:
    /// Throws std::invalid_argument for a bad table name, std::system_error when the file
    /// cannot be opened.
    explicit sqlite_dead_letters(std::string path, std::string table = "weft_outbox");
    ~sqlite_dead_letters() override;

    auto list(std::size_t limit) -> result<std::vector<dead_letter>> override;
    auto show(std::string_view ref) -> result<dead_letter> override;
    auto requeue(std::string_view ref) -> result<void> override;
    auto drop(std::string_view ref) -> result<void> override;

private:
    sqlite3* db_ = nullptr;
    std::string table_;
    std::string dead_;
};

}  // namespace weft::bus
