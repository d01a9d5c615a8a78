#include "http_date.hpp"

#include <ctime>

namespace weft::http::detail {

namespace {

// The text of one second's Date value; trivially destructible, so the thread_local needs no
// guard on access.
struct date_cache {
    std::time_t second = -1;
    char text[32] = {};
    std::size_t len = 0;
};
thread_local date_cache tl_date;

void two(char* p, int v) {
    p[0] = static_cast<char>('0' + v / 10);
    p[1] = static_cast<char>('0' + v % 10);
}

}  // namespace

auto http_date() noexcept -> http_date_value {
    const std::time_t now = std::time(nullptr);
    date_cache& d = tl_date;
    if (now != d.second) {
        // IMF-fixdate (RFC 9110 5.6.7), rendered by hand: strftime follows the C locale.
        static constexpr const char* days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
        static constexpr const char* months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                 "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
        std::tm tm{};
        gmtime_r(&now, &tm);
        char* p = d.text;
        for (int i = 0; i < 3; ++i) {
            *p++ = days[tm.tm_wday][i];
        }
        *p++ = ',';
        *p++ = ' ';
        two(p, tm.tm_mday);
        p += 2;
        *p++ = ' ';
        for (int i = 0; i < 3; ++i) {
            *p++ = months[tm.tm_mon][i];
        }
        *p++ = ' ';
        const int year = tm.tm_year + 1900;
        two(p, year / 100);
        two(p + 2, year % 100);
        p += 4;
        *p++ = ' ';
        two(p, tm.tm_hour);
        p[2] = ':';
        two(p + 3, tm.tm_min);
        p[5] = ':';
        two(p + 6, tm.tm_sec);
        p += 8;
        for (char c : std::string_view{" GMT"}) {
            *p++ = c;
        }
        d.len = static_cast<std::size_t>(p - d.text);
        d.second = now;
    }
    return {{d.text, d.len}, d.second};
}

}  // namespace weft::http::detail
