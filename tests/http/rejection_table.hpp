#pragma once

// Hostile and malformed requests, each with the exact status weft answers and whether the
// connection closes after it, plus a few accepted edge cases (status 0) whose keep-alive
// outcome is the point. test_rejections.cpp feeds every row whole, cut at every byte, byte by
// byte, and through every scan path; the fuzz corpus was seeded from these rows.

#include <string>
#include <vector>

#include "weft/http/request_limits.hpp"

namespace weft::http::test {

struct rejection_row {
    const char* name;
    std::string request;
    int status;   ///< 0: accepted
    bool closes;  ///< the connection closes after it
    request_limits limits = {};
    /// The server's answer where it refuses what the parser accepts (CONNECT: 501, no tunnel),
    /// with a close; 0: the parser's.
    int server_status = 0;

    /// What the server answers over a socket (0: the request is served), and whether it closes.
    [[nodiscard]] auto served_status() const -> int {
        return server_status != 0 ? server_status : status;
    }
    [[nodiscard]] auto served_closes() const -> bool { return server_status != 0 || closes; }
};

[[nodiscard]] inline auto small_body_limit() -> request_limits {
    request_limits l;
    l.body = 16;
    return l;
}

[[nodiscard]] inline auto rejection_rows() -> std::vector<rejection_row> {
    using namespace std::string_literals;
    const std::string get = "GET / HTTP/1.1\r\nHost: a\r\n";
    const std::string post = "POST / HTTP/1.1\r\nHost: a\r\n";
    request_limits tiny_ext;
    tiny_ext.chunk_extensions = 16;
    request_limits tiny_line;
    tiny_line.request_line = 32;
    request_limits tiny_block;
    tiny_block.header_block = 48;
    request_limits trailer_block;
    trailer_block.header_block = 64;
    request_limits few_fields;
    few_fields.fields = 3;

    return {
        // ---- framing: Content-Length / Transfer-Encoding (smuggling) ----
        {"cl_then_te", post + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
         400, true},
        {"te_then_cl", post + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
         400, true},
        {"te_in_http10", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400,
         true},
        // A list that does not end in chunked leaves the length unknowable: 400 (RFC 9112 6.3);
        // one that does, with a coding weft does not implement before it: 501 (RFC 9112 6.1).
        {"te_gzip", post + "Transfer-Encoding: gzip\r\n\r\n", 400, true},
        {"te_chunked_then_gzip", post + "Transfer-Encoding: chunked, gzip\r\n\r\n", 400, true},
        {"te_gzip_then_chunked", post + "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501,
         true},
        {"te_unknown_with_param_then_chunked",
         post + "Transfer-Encoding: x-zip;level=1, chunked\r\n\r\n0\r\n\r\n", 501, true},
        {"te_two_fields_gzip_last",
         post + "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n", 400, true},
        {"te_two_fields_chunked_last",
         post + "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 501,
         true},
        {"te_identity", post + "Transfer-Encoding: identity\r\n\r\n", 400, true},
        {"te_chunked_twice", post + "Transfer-Encoding: chunked, chunked\r\n\r\n", 400, true},
        {"te_empty", post + "Transfer-Encoding: \r\n\r\n", 400, true},
        {"te_chunked_with_param", post + "Transfer-Encoding: chunked;q=1\r\n\r\n", 400, true},
        {"te_coding_not_token", post + "Transfer-Encoding: g(z)ip, chunked\r\n\r\n", 400, true},
        {"cl_differ", post + "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400, true},
        {"cl_list", post + "Content-Length: 5, 5\r\n\r\nhello", 400, true},
        {"cl_plus", post + "Content-Length: +5\r\n\r\nhello", 400, true},
        {"cl_minus", post + "Content-Length: -1\r\n\r\n", 400, true},
        {"cl_hex", post + "Content-Length: 0x5\r\n\r\nhello", 400, true},
        {"cl_inner_space", post + "Content-Length: 1 0\r\n\r\n", 400, true},
        {"cl_empty", post + "Content-Length: \r\n\r\n", 400, true},
        {"cl_overflow", post + "Content-Length: 18446744073709551616\r\n\r\n", 400, true},
        {"cl_over_limit", post + "Content-Length: 1048577\r\n\r\n", 413, true},
        // ---- chunked bodies ----
        {"chunk_size_not_hex", post + "Transfer-Encoding: chunked\r\n\r\nzz\r\n", 400, true},
        {"chunk_size_negative", post + "Transfer-Encoding: chunked\r\n\r\n-5\r\nhello\r\n", 400,
         true},
        {"chunk_size_0x", post + "Transfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n", 400, true},
        {"chunk_size_empty", post + "Transfer-Encoding: chunked\r\n\r\n\r\nhello\r\n", 400, true},
        {"chunk_size_overflow",
         post + "Transfer-Encoding: chunked\r\n\r\n10000000000000000\r\nx\r\n", 400, true},
        {"chunk_size_space_before_crlf",
         post + "Transfer-Encoding: chunked\r\n\r\n5 \r\nhello\r\n0\r\n\r\n", 400, true},
        {"chunk_over_limit", post + "Transfer-Encoding: chunked\r\n\r\n11\r\n", 413, true,
         small_body_limit()},
        {"chunk_sum_over_limit",
         post + "Transfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n9\r\n123456789\r\n0\r\n\r\n",
         413, true, small_body_limit()},
        {"chunk_data_missing_crlf",
         post + "Transfer-Encoding: chunked\r\n\r\n5\r\nhelloX\r\n0\r\n\r\n", 400, true},
        {"chunk_data_bare_lf", post + "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\n0\r\n\r\n",
         400, true},
        {"chunk_size_bare_lf", post + "Transfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n",
         400, true},
        {"chunk_size_bare_cr", post + "Transfer-Encoding: chunked\r\n\r\n5\rhello\r\n0\r\n\r\n",
         400, true},
        {"chunk_ext_no_name", post + "Transfer-Encoding: chunked\r\n\r\n5;=x\r\nhello\r\n0\r\n\r\n",
         400, true},
        {"chunk_ext_bad_quote",
         post + "Transfer-Encoding: chunked\r\n\r\n5;a=\"x\r\nhello\r\n0\r\n\r\n", 400, true},
        {"chunk_ext_too_large",
         post + "Transfer-Encoding: chunked\r\n\r\n5;aaaaaaaaaaaaaaaaaaaa=b\r\nhello\r\n0\r\n\r\n",
         400, true, tiny_ext},
        {"trailer_obs_fold", post + "Transfer-Encoding: chunked\r\n\r\n0\r\nX: a\r\n b\r\n\r\n",
         400, true},
        {"trailer_bare_lf", post + "Transfer-Encoding: chunked\r\n\r\n0\r\nX: a\n\r\n", 400, true},
        {"last_chunk_missing_final_crlf", post + "Transfer-Encoding: chunked\r\n\r\n0\r\nX\r\n\r\n",
         400, true},
        // ---- line endings ----
        {"request_line_bare_cr", "GET / HTTP/1.1\rHost: a\r\n\r\n", 400, true},
        {"request_line_bare_lf", "GET / HTTP/1.1\nHost: a\r\n\r\n", 400, true},
        {"field_bare_lf", "GET / HTTP/1.1\r\nHost: a\n\r\n", 400, true},
        {"field_bare_cr", get + "X: a\rb\r\n\r\n", 400, true},
        {"end_bare_lf", get + "\n", 400, true},
        {"leading_bare_lf", "\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", 400, true},
        // ---- header syntax ----
        {"obs_fold", get + "X: a\r\n b\r\n\r\n", 400, true},
        {"obs_fold_tab", get + "X: a\r\n\tb\r\n\r\n", 400, true},
        {"whitespace_before_colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400, true},
        {"tab_before_colon", get + "X\t: a\r\n\r\n", 400, true},
        {"whitespace_before_first_field", "GET / HTTP/1.1\r\n Host: a\r\n\r\n", 400, true},
        {"field_without_colon", get + "X a\r\n\r\n", 400, true},
        {"field_empty_name", get + ": a\r\n\r\n", 400, true},
        {"field_name_not_token", get + "X(y): a\r\n\r\n", 400, true},
        {"value_nul", get + "X: a\0b\r\n\r\n"s, 400, true},
        {"value_control", get + "X: a\x01z\r\n\r\n", 400, true},
        {"value_del", get + "X: a\x7f\r\n\r\n", 400, true},
        {"value_escape", get + "X: \x1b[31m\r\n\r\n", 400, true},
        // ---- Host ----
        {"host_missing", "GET / HTTP/1.1\r\n\r\n", 400, true},
        {"host_repeated", get + "Host: a\r\n\r\n", 400, true},
        {"host_space", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400, true},
        {"host_userinfo", "GET / HTTP/1.1\r\nHost: u@a\r\n\r\n", 400, true},
        {"host_bad_port", "GET / HTTP/1.1\r\nHost: a:8x\r\n\r\n", 400, true},
        {"host_path", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400, true},
        {"host_unclosed_ipv6", "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", 400, true},
        {"host_bad_percent", "GET / HTTP/1.1\r\nHost: a%zz\r\n\r\n", 400, true},
        // ---- request line ----
        {"method_not_token", "G(T / HTTP/1.1\r\nHost: a\r\n\r\n", 400, true},
        {"method_empty", " / HTTP/1.1\r\nHost: a\r\n\r\n", 400, true},
        {"method_tab", "GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n", 400, true},
        {"double_space", "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400, true},
        {"http09", "GET /\r\n\r\n", 400, true},
        {"target_fragment", "GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n", 400, true},
        {"target_non_ascii", "GET /\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n", 400, true},
        {"target_control", "GET /\x01 HTTP/1.1\r\nHost: a\r\n\r\n", 400, true},
        {"connect_origin_form", "CONNECT / HTTP/1.1\r\nHost: a\r\n\r\n", 400, true},
        {"connect_no_port", "CONNECT a.example HTTP/1.1\r\nHost: a\r\n\r\n", 400, true},
        {"get_authority_form", "GET a.example:80 HTTP/1.1\r\nHost: a\r\n\r\n", 400, true},
        {"get_asterisk", "GET * HTTP/1.1\r\nHost: a\r\n\r\n", 400, true},
        {"absolute_userinfo", "GET http://u@a/ HTTP/1.1\r\nHost: a\r\n\r\n", 400, true},
        {"absolute_empty_host", "GET http:///x HTTP/1.1\r\nHost: a\r\n\r\n", 400, true},
        {"target_too_long", "GET /" + std::string(8 * 1024, 'a') + " HTTP/1.1\r\nHost: a\r\n\r\n",
         414, true},
        {"request_line_over_small_limit",
         "GET /0123456789012345678901234567 HTTP/1.1\r\nHost: a\r\n\r\n", 414, true, tiny_line},
        {"version_lowercase", "GET / http/1.1\r\nHost: a\r\n\r\n", 400, true},
        {"version_two_digit_minor", "GET / HTTP/1.10\r\nHost: a\r\n\r\n", 400, true},
        {"version_missing_minor", "GET / HTTP/1\r\nHost: a\r\n\r\n", 400, true},
        {"version_trailing_space", "GET / HTTP/1.1 \r\nHost: a\r\n\r\n", 400, true},
        {"version_2", "GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505, true},
        {"version_0_9", "GET / HTTP/0.9\r\nHost: a\r\n\r\n", 505, true},
        {"version_3", "GET / HTTP/3.0\r\n\r\n", 505, true},
        // ---- sizes ----
        {"header_block_too_large", get + "X: " + std::string(16 * 1024, 'v') + "\r\n\r\n", 431,
         true},
        {"header_block_over_small_limit", get + "X-Long: 0123456789012345678901234567890\r\n\r\n",
         431, true, tiny_block},
        {"too_many_fields", get + "A: 1\r\nB: 2\r\nC: 3\r\n\r\n", 431, true, few_fields},
        {"trailers_too_many",
         post + "Transfer-Encoding: chunked\r\n\r\n0\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n", 431,
         true, few_fields},
        {"trailer_over_block_limit",  // 431 at any cut, whatever follows the limit
         post + "Transfer-Encoding: chunked\r\n\r\n0\r\nX: " + std::string(70, 'v') +
             "\x01\r\n\r\n",
         431, true, trailer_block},
        // ---- Expect ----
        {"expect_unknown", get + "Expect: 200-ok\r\n\r\n", 417, true},
        // ---- accepted edge cases: the keep-alive outcome ----
        {"ok_http11_keep_alive", get + "\r\n", 0, false},
        {"ok_http11_close", get + "Connection: close\r\n\r\n", 0, true},
        {"ok_http11_close_in_list", get + "Connection: Upgrade, CLOSE\r\n\r\n", 0, true},
        {"ok_http10_close", "GET / HTTP/1.0\r\n\r\n", 0, true},
        {"ok_http10_keep_alive", "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 0, false},
        {"ok_http12_as_11", "GET / HTTP/1.2\r\nHost: a\r\n\r\n", 0, false},
        {"ok_leading_empty_lines", "\r\n\r\n" + get + "\r\n", 0, false},
        {"ok_cl_repeated_equal", post + "Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello", 0,
         false},
        {"ok_cl_leading_zeros", post + "Content-Length: 005\r\n\r\nhello", 0, false},
        {"ok_chunked_ext_trailer",
         post + "Transfer-Encoding: Chunked\r\n\r\n5;a=b;c=\"d\\\"e\"\r\nhello\r\n0\r\nX-T: "
                "1\r\n\r\n",
         0, false},
        {"ok_chunked_sum_at_limit",
         post + "Transfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n8\r\n12345678\r\n0\r\n\r\n", 0,
         false, small_body_limit()},
        {"ok_options_asterisk", "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", 0, false},
        {"ok_connect_authority",
         "CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n",
         0,
         false,
         {},
         501},
        {"ok_absolute_form", "GET http://a.example:8080/p?q HTTP/1.1\r\nHost: x\r\n\r\n", 0, false},
        {"ok_host_ipv6", "GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n", 0, false},
        {"ok_host_empty", "GET / HTTP/1.1\r\nHost:\r\n\r\n", 0, false},
        {"ok_http10_no_host_expect_ignored", "GET / HTTP/1.0\r\nExpect: 200-ok\r\n\r\n", 0, true},
        {"ok_obs_text_value", get + "X: caf\xc3\xa9\t!\r\n\r\n", 0, false},
    };
}

}  // namespace weft::http::test
