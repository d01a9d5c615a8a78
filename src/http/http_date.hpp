#pragma once

// The Date field of responses. Internal to weft::http.

#include <ctime>
#include <string_view>

namespace weft::http::detail {

/// The Date field's value for the current second, and that second.
struct http_date_value {
    std::string_view text;  // IMF-fixdate; valid on this thread until the next http_date()
    std::time_t second;
};

/// The Date field's value for now, rendered at most once a second per thread (a thread_local
/// cache: the text is rebuilt when the second changes).
[[nodiscard]] auto http_date() noexcept -> http_date_value;

}  // namespace weft::http::detail
