#include "pg_outbox_claim.hpp"

#include <algorithm>
#include <utility>

#include "pg_literals.hpp"
#include "sql_identifier.hpp"

namespace weft::bus::detail {

auto pg_claim(const std::string& table,
              const std::vector<std::int64_t>& owned,
              std::uint32_t batch_size,
              const std::vector<std::string>& skip_keys,
              const std::vector<std::int64_t>* held) -> pg_statement {
    std::vector<pg_param> args;
    args.push_back(text_param(int_array(owned)));
    args.push_back(text_param(std::to_string(std::max<std::uint32_t>(1, batch_size))));
    args.push_back(text_param(text_array(skip_keys)));
    std::string held_clause;
    if (held != nullptr && !held->empty()) {
        args.push_back(text_param(seq_ranges(*held)));
        held_clause = " AND NOT ($4::int8multirange @> seq)";
    }
    return {"SELECT seq, envelope, (extract(epoch from staged_at) * 1000)::bigint, part FROM " +
                detail::quoted(table) + " WHERE part = ANY($1::int[]) AND key <> ALL($3::text[])" +
                held_clause + " ORDER BY seq LIMIT $2 FOR UPDATE SKIP LOCKED",
            std::move(args), true};
}

}  // namespace weft::bus::detail
