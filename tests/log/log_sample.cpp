// Writes log records with awkward values (quotes, backslashes, control bytes, UTF-8, numbers at
// their limits) as JSON lines to stdout: the input of test_log_json.py, which parses each line
// with Python's json module.

#include <cstdint>
#include <limits>
#include <string_view>

#include "weft/log/logger.hpp"

auto main() -> int {
    weft::log::logger out{
        {.min_level = weft::log::level::debug, .format = weft::log::log_format::json, .fd = 1}};
    out.info("plain", {{"n", 1}});
    out.warn("quote \" backslash \\ newline \n tab \t",
             {{"ctl", std::string_view("\x01\x1f\x7f", 3)}, {"utf8", "caf\xc3\xa9 \xe2\x9c\x93"}});
    out.error("limits", {{"i64", std::numeric_limits<std::int64_t>::min()},
                         {"u64", std::numeric_limits<std::uint64_t>::max()},
                         {"tiny", 5e-324},
                         {"nan", std::numeric_limits<double>::quiet_NaN()},
                         {"flag", false}});
    out.log(weft::log::level::debug, "traced", {{"level", "user"}},
            {.trace_id = "4bf92f3577b34da6a3ce929d0e0e4736", .span_id = "00f067aa0ba902b7"});
    return 0;
}
