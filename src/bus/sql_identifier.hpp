#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace weft::bus::detail {

/// The longest table name an outbox or inbox takes: PostgreSQL keeps 63 bytes of a name, and
/// the longest suffix added to it is 9 (`_part_seq`, `_received`).
inline constexpr std::size_t max_table_name = 54;

/// Checks a table name an outbox or inbox builds its SQL from (SQLite and PostgreSQL alike):
/// letters, digits and `_`, not starting with a digit, 1 to max_table_name characters. So no
/// name can change what a statement does. Returns it; throws std::invalid_argument naming
/// `who` otherwise (at construction, before any SQL is built).
inline auto checked_table_name(std::string_view name, std::string_view who) -> std::string {
    auto letter = [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    };
    bool ok = !name.empty() && name.size() <= max_table_name && letter(name.front());
    for (const char c : name) {
        ok = ok && (letter(c) || (c >= '0' && c <= '9'));
    }
    if (!ok) {
        throw std::invalid_argument(std::string(who) + ": table name \"" + std::string(name) +
                                    "\" is not a plain SQL identifier (letters, digits and _, "
                                    "not starting with a digit, at most 54 characters)");
    }
    return std::string(name);
}

/// `name` (checked: no `"` in it) as a quoted identifier, so a keyword is a name too. In
/// PostgreSQL a quoted name keeps its case: every statement of a table quotes it alike. Call it
/// qualified (`detail::quoted`): for a std::string argument, argument-dependent lookup also finds
/// std::quoted wherever <iomanip> is visible, and picks it.
inline auto quoted(std::string_view name) -> std::string {
    std::string q;
    q.reserve(name.size() + 2);
    q += '"';
    q += name;
    q += '"';
    return q;
}

}  // namespace weft::bus::detail
