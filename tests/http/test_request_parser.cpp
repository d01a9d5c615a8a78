#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "http/connection_driver.hpp"
#include "http/sample_requests.hpp"
#include "weft/http/request_parser.hpp"
#include "weft/http/scan_path.hpp"

// Counts allocations in this binary, to show that parsing allocates nothing for up to 32
// fields. relaxed: only the test thread reads it, around its own calls.
namespace {
std::atomic<std::size_t> allocations{0};
}  // namespace

auto operator new(std::size_t n) -> void* {
    allocations.fetch_add(1, std::memory_order_relaxed);
    if (void* p = std::malloc(n == 0 ? 1 : n)) {
        return p;
    }
    throw std::bad_alloc{};
}
// g++ sees operator new's pointer reach free() once these are inlined into gtest's code, and
// warns: here operator new is malloc, so the pair matches.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

namespace weft::http::test {
namespace {

auto parse_all(request_parser& p, std::string_view in) -> parse_status { return p.parse(in); }

// Each test runs on every scan path the CPU has.
class request_parser_test : public ::testing::TestWithParam<scan_path> {
protected:
    void SetUp() override {
        if (!scan_path_supported(GetParam())) {
            GTEST_SKIP() << "this CPU has no " << to_string(GetParam());
        }
        saved_ = active_scan_path();
        ASSERT_TRUE(set_scan_path(GetParam()));
    }
    void TearDown() override { set_scan_path(saved_); }

private:
    scan_path saved_ = scan_path::scalar;
};

auto inside(std::string_view view, std::string_view buf) -> bool {
    return view.data() >= buf.data() && view.data() + view.size() <= buf.data() + buf.size();
}

TEST_P(request_parser_test, wrk_get) {
    const std::string in = wrk_request();
    ASSERT_EQ(in.size(), 40U);
    request_parser p;
    ASSERT_EQ(parse_all(p, in), parse_status::complete);
    const request_head& h = p.head();
    EXPECT_EQ(h.size(), 40U);
    EXPECT_EQ(h.method(), method::get);
    EXPECT_EQ(h.method_name(), "GET");
    EXPECT_EQ(h.target(), "/");
    EXPECT_EQ(h.form(), target_form::origin);
    EXPECT_EQ(h.path(), "/");
    EXPECT_FALSE(h.has_query());
    EXPECT_EQ(h.version_minor(), 1);
    EXPECT_TRUE(h.keep_alive());
    EXPECT_FALSE(h.expect_continue());
    EXPECT_EQ(h.framing().kind, body_kind::none);
    EXPECT_EQ(h.host(), "localhost:8080");
    ASSERT_EQ(h.field_count(), 1U);
    EXPECT_EQ(h.field(0).name, "Host");
    // Zero-copy: every view points into the input.
    EXPECT_TRUE(inside(h.method_name(), in));
    EXPECT_TRUE(inside(h.target(), in));
    EXPECT_TRUE(inside(h.field(0).name, in));
    EXPECT_TRUE(inside(h.field(0).value, in));
}

TEST_P(request_parser_test, browser_request) {
    const std::string in = browser_request();
    request_parser p;
    ASSERT_EQ(parse_all(p, in), parse_status::complete);
    const request_head& h = p.head();
    EXPECT_EQ(h.size(), in.size());
    EXPECT_EQ(h.field_count(), 15U);
    EXPECT_EQ(h.path(), "/index.html");
    EXPECT_EQ(h.query(), "lang=en");
    EXPECT_EQ(h.find("user-agent").value_or(""),
              "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
              "Chrome/118.0.0.0 Safari/537.36");
    EXPECT_EQ(h.find("SEC-CH-UA-PLATFORM").value_or(""), "\"Linux\"");
    EXPECT_EQ(h.find("accept-encoding").value_or(""), "gzip, deflate, br");
    EXPECT_FALSE(h.find("cookie").has_value());
    EXPECT_TRUE(h.keep_alive());
    for (header_field f : h.fields()) {
        EXPECT_TRUE(inside(f.name, in));
        EXPECT_TRUE(inside(f.value, in));
        EXPECT_FALSE(f.value.empty());
        EXPECT_NE(f.value.front(), ' ');
        EXPECT_NE(f.value.back(), ' ');
    }
}

TEST_P(request_parser_test, cookie_request) {
    const std::string in = cookie_request();
    ASSERT_EQ(in.size(), 4096U);
    request_parser p;
    ASSERT_EQ(parse_all(p, in), parse_status::complete);
    const auto cookie = p.head().find("Cookie");
    ASSERT_TRUE(cookie.has_value());
    EXPECT_GT(cookie->size(), 3300U);
    EXPECT_TRUE(cookie->starts_with("c0=aaaa"));
    EXPECT_EQ(p.head().field_count(), 16U);
}

TEST_P(request_parser_test, every_prefix_is_incomplete_and_fully_scanned) {
    // Incremental: a prefix leaves the parser waiting with every byte of it examined (it
    // resumes at the end, never rescanning), and the whole then completes the same way.
    for (const std::string& in : {wrk_request(), browser_request(), cookie_request()}) {
        request_parser p;
        std::string buf;
        for (std::size_t i = 0; i + 1 < in.size(); ++i) {
            buf.push_back(in[i]);
            ASSERT_EQ(p.parse(buf), parse_status::incomplete) << i;
            ASSERT_EQ(p.scanned(), buf.size()) << i;
        }
        buf.push_back(in.back());
        ASSERT_EQ(p.parse(buf), parse_status::complete);
        EXPECT_EQ(record_head(p.head()), [&] {
            request_parser whole;
            EXPECT_EQ(whole.parse(in), parse_status::complete);
            return record_head(whole.head());
        }());
    }
}

TEST_P(request_parser_test, split_at_every_byte_matches_whole) {
    for (const std::string& in : {wrk_request(), browser_request(), cookie_request()}) {
        const connection_record whole = run_connection(in, {});
        ASSERT_EQ(whole.requests.size(), 1U);
        for (std::size_t cut = 1; cut < in.size(); ++cut) {
            ASSERT_EQ(run_connection(in, {cut}), whole) << cut;
        }
    }
}

TEST_P(request_parser_test, pipelined_requests_back_to_back) {
    const std::string in = wrk_request() +
                           "POST /submit HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello" +
                           browser_request() +
                           "PUT /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                           "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n" +
                           "GET /last HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
    const connection_record whole = run_connection(in, {});
    ASSERT_EQ(whole.requests.size(), 5U);
    EXPECT_EQ(whole.error, parse_error::none);
    EXPECT_FALSE(whole.partial);
    EXPECT_EQ(whole.requests[1].body, "hello");
    EXPECT_EQ(whole.requests[2].path, "/index.html");
    EXPECT_EQ(whole.requests[3].body, "abcde");
    EXPECT_EQ(whole.requests[4].path, "/last");
    EXPECT_TRUE(whole.closes());

    // By hand, as a server walks one buffer: each head's size leads to its body, then the next.
    std::string_view rest = in;
    request_parser p;
    ASSERT_EQ(p.parse(rest), parse_status::complete);
    EXPECT_EQ(p.head().path(), "/");
    rest.remove_prefix(p.head().size());
    p.reset();
    ASSERT_EQ(p.parse(rest), parse_status::complete);
    EXPECT_EQ(p.head().path(), "/submit");
    ASSERT_EQ(p.head().framing().kind, body_kind::content_length);
    EXPECT_EQ(rest.substr(p.head().size(), p.head().framing().length), "hello");

    // Cut everywhere, the same five requests.
    for (std::size_t cut = 1; cut < in.size(); cut += 7) {
        ASSERT_EQ(run_connection(in, {cut}), whole) << cut;
    }
}

TEST_P(request_parser_test, no_allocation_up_to_32_fields) {
    const auto with_fields = [](int n) {
        std::string r = "GET / HTTP/1.1\r\nHost: a\r\n";
        for (int i = 1; i < n; ++i) {
            r += "X-Field-" + std::to_string(i) + ": value " + std::to_string(i) + "\r\n";
        }
        return r + "\r\n";
    };
    const std::string in32 = with_fields(32);
    const std::string in33 = with_fields(33);
    request_parser p;
    std::size_t before = allocations.load(std::memory_order_relaxed);
    ASSERT_EQ(p.parse(in32), parse_status::complete);
    EXPECT_EQ(p.head().field_count(), 32U);
    EXPECT_EQ(allocations.load(std::memory_order_relaxed), before);

    p.reset();
    before = allocations.load(std::memory_order_relaxed);
    ASSERT_EQ(p.parse(in33), parse_status::complete);
    EXPECT_EQ(p.head().field_count(), 33U);
    EXPECT_GT(allocations.load(std::memory_order_relaxed), before);
    EXPECT_EQ(p.head().field(32).name, "X-Field-32");
    EXPECT_EQ(p.head().field(32).value, "value 32");

    // The overflow memory is kept across reset(): the next big request allocates nothing.
    p.reset();
    before = allocations.load(std::memory_order_relaxed);
    ASSERT_EQ(p.parse(in33), parse_status::complete);
    EXPECT_EQ(allocations.load(std::memory_order_relaxed), before);
}

TEST_P(request_parser_test, rebase_after_the_buffer_moves) {
    std::string a = browser_request();
    request_parser p;
    ASSERT_EQ(p.parse(a), parse_status::complete);
    const request_record before = record_head(p.head());
    // The server compacts: the request's bytes move to a new place, the old ones are reused.
    std::string b = "...." + a;
    std::fill(a.begin(), a.end(), '#');
    p.head().rebase(b.data() + 4);
    EXPECT_EQ(record_head(p.head()), before);
    EXPECT_TRUE(inside(p.head().target(), b));
    EXPECT_EQ(p.head().data(), b.data() + 4);
}

TEST_P(request_parser_test, buffer_may_move_between_calls) {
    const std::string in = browser_request();
    request_parser p;
    std::string first = in.substr(0, 300);
    ASSERT_EQ(p.parse(first), parse_status::incomplete);
    std::string moved = in;  // another allocation: the bytes moved, as after a reallocation
    first.assign(first.size(), '#');
    ASSERT_EQ(p.parse(moved), parse_status::complete);
    EXPECT_EQ(p.head().find("user-agent")->substr(0, 11), "Mozilla/5.0");
    EXPECT_TRUE(inside(p.head().target(), moved));
}

TEST_P(request_parser_test, repeated_names_and_case_insensitive_lookup) {
    const std::string in =
        "GET / HTTP/1.1\r\nHost: a\r\nAccept: text/html\r\nX-A: 1\r\naccept: image/png, "
        "*/*\r\nACCEPT:  \t\r\n\r\n";
    request_parser p;
    ASSERT_EQ(p.parse(in), parse_status::complete);
    std::vector<std::string_view> v;
    for (std::string_view x : p.head().values("Accept")) {
        v.push_back(x);
    }
    ASSERT_EQ(v.size(), 3U);
    EXPECT_EQ(v[0], "text/html");
    EXPECT_EQ(v[1], "image/png, */*");
    EXPECT_EQ(v[2], "");
    EXPECT_EQ(p.head().find("aCcEpT").value_or("?"), "text/html");
    EXPECT_TRUE(p.head().values("x-b").empty());
    EXPECT_FALSE(p.head().values("x-a").empty());
    EXPECT_FALSE(p.head().find("X").has_value());
}

TEST_P(request_parser_test, target_forms_and_path_query_split) {
    struct row {
        std::string line;
        target_form form;
        std::string path;
        std::string query;
        bool has_query;
        std::string authority;
    };
    const std::vector<row> rows = {
        {"GET /a/b?x=1&y=2?z HTTP/1.1", target_form::origin, "/a/b", "x=1&y=2?z", true, ""},
        {"GET /a? HTTP/1.1", target_form::origin, "/a", "", true, ""},
        {"GET /a HTTP/1.1", target_form::origin, "/a", "", false, ""},
        {"GET //a//b HTTP/1.1", target_form::origin, "//a//b", "", false, ""},
        {"GET /%7Euser HTTP/1.1", target_form::origin, "/%7Euser", "", false, ""},
        {"GET http://h.example:1/p?q HTTP/1.1", target_form::absolute, "/p", "q", true,
         "h.example:1"},
        {"GET https://h.example HTTP/1.1", target_form::absolute, "/", "", false, "h.example"},
        {"GET http://h.example?q HTTP/1.1", target_form::absolute, "/", "q", true, "h.example"},
        {"GET http://[::1]:8/ HTTP/1.1", target_form::absolute, "/", "", false, "[::1]:8"},
        {"OPTIONS * HTTP/1.1", target_form::asterisk, "*", "", false, ""},
        {"OPTIONS /x HTTP/1.1", target_form::origin, "/x", "", false, ""},
        {"CONNECT h.example:443 HTTP/1.1", target_form::authority, "", "", false, "h.example:443"},
        {"CONNECT [::1]:443 HTTP/1.1", target_form::authority, "", "", false, "[::1]:443"},
    };
    for (const row& r : rows) {
        SCOPED_TRACE(r.line);
        const std::string in = r.line + "\r\nHost: h\r\n\r\n";
        request_parser p;
        ASSERT_EQ(p.parse(in), parse_status::complete) << describe(p.error());
        EXPECT_EQ(p.head().form(), r.form);
        EXPECT_EQ(p.head().path(), r.path);
        EXPECT_EQ(p.head().query(), r.query);
        EXPECT_EQ(p.head().has_query(), r.has_query);
        EXPECT_EQ(p.head().authority(), r.authority);
    }
}

// The last transfer coding must be chunked, or the body's length cannot be known: 400 (RFC
// 9112 6.3). A list ending in chunked with another coding before it names a coding weft does
// not implement: 501. A coding that is not a token is malformed: 400.
TEST_P(request_parser_test, transfer_coding_list_must_end_in_chunked) {
    const std::vector<std::pair<std::string, parse_error>> rows = {
        {"gzip", parse_error::chunked_not_last},
        {"identity", parse_error::chunked_not_last},
        {"chunked, gzip", parse_error::chunked_not_last},
        {"chunked;q=1", parse_error::chunked_not_last},
        {"chunked, , x-custom", parse_error::chunked_not_last},
        {"gzip, chunked", parse_error::unsupported_transfer_coding},
        {"x-custom ; a=b , Chunked", parse_error::unsupported_transfer_coding},
        {"g(z)ip, chunked", parse_error::bad_transfer_encoding},
        {";a=b, chunked", parse_error::bad_transfer_encoding},
        {"chunked, chunked", parse_error::bad_transfer_encoding},
        {"chunked", parse_error::none},
        {", chunked ,", parse_error::none},
    };
    for (const auto& [codings, error] : rows) {
        SCOPED_TRACE(codings);
        request_parser p;
        const parse_status st =
            p.parse("POST /u HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: " + codings + "\r\n\r\n");
        EXPECT_EQ(st, error == parse_error::none ? parse_status::complete : parse_status::error);
        EXPECT_EQ(p.error(), error) << describe(p.error());
    }
    // Across fields, the last coding of the last field is the last one.
    request_parser p;
    EXPECT_EQ(p.parse("POST /u HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
                      "Transfer-Encoding: gzip\r\n\r\n"),
              parse_status::error);
    EXPECT_EQ(p.error(), parse_error::chunked_not_last);
    EXPECT_EQ(status_of(parse_error::chunked_not_last), 400);
    EXPECT_EQ(status_of(parse_error::unsupported_transfer_coding), 501);
}

TEST_P(request_parser_test, methods) {
    const std::vector<std::pair<std::string, method>> rows = {
        {"GET", method::get},     {"HEAD", method::head},      {"POST", method::post},
        {"PUT", method::put},     {"DELETE", method::delete_}, {"OPTIONS", method::options},
        {"TRACE", method::trace}, {"PATCH", method::patch},    {"PURGE", method::other},
        {"get", method::other},   {"M-SEARCH", method::other},
    };
    for (const auto& [name, m] : rows) {
        const std::string in = name + " / HTTP/1.1\r\nHost: a\r\n\r\n";
        request_parser p;
        ASSERT_EQ(p.parse(in), parse_status::complete) << name;
        EXPECT_EQ(p.head().method(), m) << name;
        EXPECT_EQ(p.head().method_name(), name);
    }
}

TEST_P(request_parser_test, expect_continue_and_framing) {
    request_parser p;
    ASSERT_EQ(p.parse("POST /u HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: "
                      "10\r\n\r\n"),
              parse_status::complete);
    EXPECT_TRUE(p.head().expect_continue());
    EXPECT_EQ(p.head().framing().kind, body_kind::content_length);
    EXPECT_EQ(p.head().framing().length, 10U);

    p.reset();
    ASSERT_EQ(p.parse("POST /u HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n"),
              parse_status::complete);
    EXPECT_FALSE(p.head().expect_continue()) << "ignored in HTTP/1.0";
    EXPECT_FALSE(p.head().keep_alive());

    p.reset();
    ASSERT_EQ(p.parse("POST /u HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: CHUNKED \r\n\r\n"),
              parse_status::complete);
    EXPECT_EQ(p.head().framing().kind, body_kind::chunked);
}

TEST_P(request_parser_test, limits_are_inclusive) {
    const request_limits l;
    // A request line of exactly the limit is accepted; one more byte is 414.
    const std::string head = "GET /";
    const std::string tail = " HTTP/1.1";
    for (std::size_t extra : {0U, 1U}) {
        const std::string line =
            head + std::string(l.request_line - head.size() - tail.size() + extra, 'a') + tail;
        request_parser p;
        const auto st = p.parse(line + "\r\nHost: a\r\n\r\n");
        if (extra == 0) {
            EXPECT_EQ(st, parse_status::complete) << describe(p.error());
        } else {
            EXPECT_EQ(status_of(p.error()), 414);
        }
    }
    // A header section of exactly the limit is accepted; one more byte is 431.
    for (std::size_t extra : {0U, 1U}) {
        const std::string fields_head = "Host: a\r\nX: ";
        const std::string v(l.header_block - fields_head.size() - 4 + extra, 'v');
        request_parser p;
        const auto st = p.parse("GET / HTTP/1.1\r\n" + fields_head + v + "\r\n\r\n");
        if (extra == 0) {
            EXPECT_EQ(st, parse_status::complete) << describe(p.error());
        } else {
            EXPECT_EQ(status_of(p.error()), 431);
        }
    }
    // 100 fields are accepted, 101 are 431.
    for (std::size_t n : {100U, 101U}) {
        std::string in = "GET / HTTP/1.1\r\nHost: a\r\n";
        for (std::size_t i = 1; i < n; ++i) {
            in += "F" + std::to_string(i) + ": v\r\n";
        }
        request_parser p;
        const auto st = p.parse(in + "\r\n");
        if (n == 100) {
            EXPECT_EQ(st, parse_status::complete) << describe(p.error());
        } else {
            EXPECT_EQ(p.error(), parse_error::too_many_fields);
        }
    }
    // A Content-Length of the body limit is accepted; one more is 413.
    for (std::uint64_t n : {l.body, l.body + 1}) {
        request_parser p;
        const auto st = p.parse(
            "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: " + std::to_string(n) + "\r\n\r\n");
        EXPECT_EQ(st, n == l.body ? parse_status::complete : parse_status::error);
    }
}

TEST_P(request_parser_test, over_long_line_rejected_before_it_ends) {
    // The limit is checked as bytes arrive: no need to wait for a CRLF that may never come.
    request_parser p;
    const std::string in = "GET /" + std::string(9000, 'a');
    EXPECT_EQ(p.parse(in), parse_status::error);
    EXPECT_EQ(p.error(), parse_error::request_line_too_long);
    EXPECT_LE(p.scanned(), p.limits().request_line + 2);

    request_parser q;
    const std::string fields = "GET / HTTP/1.1\r\nHost: a\r\nX: " + std::string(20000, 'v');
    EXPECT_EQ(q.parse(fields), parse_status::error);
    EXPECT_EQ(q.error(), parse_error::header_block_too_large);
}

TEST_P(request_parser_test, sticky_results_and_reset) {
    request_parser p;
    const std::string in = wrk_request();
    ASSERT_EQ(p.parse(in), parse_status::complete);
    EXPECT_EQ(p.parse(in), parse_status::complete);
    p.reset();
    ASSERT_EQ(p.parse("BAD\x01"), parse_status::error);
    EXPECT_EQ(p.parse("anything"), parse_status::error);
    EXPECT_EQ(p.error(), parse_error::bad_method);
    p.reset();
    EXPECT_EQ(p.error(), parse_error::none);
    ASSERT_EQ(p.parse(in), parse_status::complete);
    EXPECT_EQ(p.head().field_count(), 1U);
}

TEST_P(request_parser_test, input_shorter_than_what_was_scanned_is_an_error_not_a_read) {
    request_parser p;
    const std::string in = "GET /index.html HTTP/1.1\r\nHost: a";
    ASSERT_EQ(p.parse(in), parse_status::incomplete);
    ASSERT_EQ(p.scanned(), in.size());
    // A caller that lost bytes: under ASan the old code read past the 5-byte input here.
    const std::string shorter = in.substr(0, 5);
    EXPECT_EQ(p.parse(shorter), parse_status::error);
    EXPECT_EQ(p.error(), parse_error::input_shrank);
    EXPECT_EQ(status_of(p.error()), 500);
}

// A valid Host is remembered per thread so that the next equal one is not looked at again:
// a value that differs from it in any byte (same length or not) must still be checked in full.
TEST_P(request_parser_test, host_remembered_only_when_valid) {
    const auto host_error = [](std::string_view host) {
        request_parser p;
        const std::string in = "GET / HTTP/1.1\r\nHost: " + std::string(host) + "\r\n\r\n";
        (void)p.parse(in);
        return p.error();
    };
    const std::string good = "www.example.com:8080";
    for (int round = 0; round < 2; ++round) {
        EXPECT_EQ(host_error(good), parse_error::none);
        for (std::size_t i = 0; i < good.size(); ++i) {
            for (const char bad : {' ', '/', '@', '"', '<'}) {
                if (bad == ' ' && (i == 0 || i + 1 == good.size())) {
                    continue;  // whitespace around a value is not part of it
                }
                std::string h = good;
                h[i] = bad;
                EXPECT_EQ(host_error(h), parse_error::bad_host) << h;
                EXPECT_EQ(host_error(good), parse_error::none);  // kept after a refusal
            }
        }
        EXPECT_EQ(host_error(good + "x"), parse_error::bad_host);  // a port of "8080x"
        EXPECT_EQ(host_error(good.substr(0, 7)), parse_error::none);
        EXPECT_EQ(host_error("a%zz"), parse_error::bad_host);
        EXPECT_EQ(host_error(""), parse_error::none);  // empty is allowed (RFC 9110 7.2)
        EXPECT_EQ(host_error("a b"), parse_error::bad_host);
    }
    // 8 to 62 bytes (the word-compare lengths) and beyond what is remembered (63, 100).
    for (const std::size_t n : {8U, 9U, 15U, 16U, 17U, 62U, 63U, 100U}) {
        const std::string h(n, 'h');
        EXPECT_EQ(host_error(h), parse_error::none) << n;
        std::string b = h;
        b[n - 1] = '#';
        EXPECT_EQ(host_error(b), parse_error::bad_host) << n;
        b = h;
        b[0] = '{';
        EXPECT_EQ(host_error(b), parse_error::bad_host) << n;
    }
}

// The version read as one word when 8 bytes are there, byte by byte otherwise: the same
// verdicts either way.
TEST_P(request_parser_test, version_word_and_bytes_agree) {
    for (const std::string v : {"HTTP/1.1", "HTTP/1.0", "HTTP/1.9", "HTTP/2.0", "HTTP/1.x",
                                "http/1.1", "HTTP/1,1", "HTTP/0.9", "HTTX/1.1"}) {
        const std::string in = "GET / " + v + "\r\nHost: a\r\n\r\n";
        request_parser whole;
        const parse_status st = whole.parse(in);
        request_parser split;  // the version arrives a byte at a time
        parse_status st2 = parse_status::incomplete;
        for (std::size_t n = 1; n <= in.size() && st2 == parse_status::incomplete; ++n) {
            st2 = split.parse(std::string_view{in}.substr(0, n));
        }
        EXPECT_EQ(st, st2) << v;
        EXPECT_EQ(whole.error(), split.error()) << v;
        if (st == parse_status::complete) {
            EXPECT_EQ(whole.head().version_minor(), split.head().version_minor()) << v;
        }
    }
}

TEST(parse_error, statuses_and_error_codes) {
    EXPECT_EQ(status_of(parse_error::none), 0);
    EXPECT_EQ(status_of(parse_error::bare_lf), 400);
    EXPECT_EQ(status_of(parse_error::body_too_large), 413);
    EXPECT_EQ(status_of(parse_error::request_line_too_long), 414);
    EXPECT_EQ(status_of(parse_error::unsupported_expectation), 417);
    EXPECT_EQ(status_of(parse_error::too_many_fields), 431);
    EXPECT_EQ(status_of(parse_error::unsupported_transfer_coding), 501);
    EXPECT_EQ(status_of(parse_error::unsupported_version), 505);
    const std::error_code ec = parse_error::obs_fold;
    EXPECT_STREQ(ec.category().name(), "weft.http");
    EXPECT_EQ(ec.message(), "obsolete line folding");
}

INSTANTIATE_TEST_SUITE_P(paths,
                         request_parser_test,
                         ::testing::Values(scan_path::avx2, scan_path::sse2, scan_path::scalar),
                         [](const auto& info) { return std::string{to_string(info.param)}; });

}  // namespace
}  // namespace weft::http::test
