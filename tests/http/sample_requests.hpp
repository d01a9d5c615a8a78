#pragma once

// The three request shapes weft's parser is measured and tested with: what wrk sends (40
// bytes), what a browser sends for a page (703 bytes, 15 fields), and the same with a
// 4 KiB Cookie.

#include <string>

namespace weft::http::test {

[[nodiscard]] inline auto wrk_request() -> std::string {
    return "GET / HTTP/1.1\r\nHost: localhost:8080\r\n\r\n";
}

[[nodiscard]] inline auto browser_request() -> std::string {
    return "GET /index.html?lang=en HTTP/1.1\r\n"
           "Host: www.example.com\r\n"
           "Connection: keep-alive\r\n"
           "Cache-Control: max-age=0\r\n"
           "sec-ch-ua: \"Chromium\";v=\"118\", \"Google Chrome\";v=\"118\", "
           "\"Not=A?Brand\";v=\"99\"\r\n"
           "sec-ch-ua-mobile: ?0\r\n"
           "sec-ch-ua-platform: \"Linux\"\r\n"
           "Upgrade-Insecure-Requests: 1\r\n"
           "User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
           "Chrome/118.0.0.0 Safari/537.36\r\n"
           "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,"
           "image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7\r\n"
           "Sec-Fetch-Site: none\r\n"
           "Sec-Fetch-Mode: navigate\r\n"
           "Sec-Fetch-User: ?1\r\n"
           "Sec-Fetch-Dest: document\r\n"
           "Accept-Encoding: gzip, deflate, br\r\n"
           "Accept-Language: en-GB,en-US;q=0.9,en;q=0.8\r\n"
           "\r\n";
}

/// The browser request with a Cookie field that brings it to 4 KiB.
[[nodiscard]] inline auto cookie_request() -> std::string {
    std::string r = browser_request();
    r.resize(r.size() - 2);  // reopen the header section
    // Built with append: g++ 12 at -O3 warns falsely (-Wrestrict) on chains of operator+.
    std::string cookie = "Cookie: ";
    for (int i = 0; r.size() + cookie.size() + 4 < 4096; ++i) {
        cookie.append("c").append(std::to_string(i)).append("=");
        cookie.append(24, static_cast<char>('a' + i % 26)).append("; ");
    }
    cookie.resize(4096 - r.size() - 4);
    r.append(cookie).append("\r\n\r\n");
    return r;
}

}  // namespace weft::http::test
