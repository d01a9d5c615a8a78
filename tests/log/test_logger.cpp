// The logger: records dropped (and counted) while the output blocks, nothing made for a record
// below the level, and the two line formats.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <thread>

#include "weft/log/logger.hpp"
#include "weft/metrics/registry.hpp"

namespace {

std::atomic<std::uint64_t> allocations{0};

}  // namespace

// Counts every allocation of this test binary (the level test reads the count around a call).
auto operator new(std::size_t n) -> void* {
    allocations.fetch_add(1, std::memory_order_relaxed);
    if (void* p = std::malloc(n == 0 ? 1 : n)) {
        return p;
    }
    throw std::bad_alloc();
}
// g++ 12 at -O1 inlines these into GoogleTest's `new TestClass`, takes that for the library's
// operator new, and reports the free() of its pointer as a mismatch: this file replaces both.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace {

using weft::log::field;
using weft::log::level;
using weft::log::log_format;
using weft::log::logger;

auto read_all(int fd) -> std::string {
    std::string out;
    char buf[65536];
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof(buf));
        if (n <= 0) {
            return out;
        }
        out.append(buf, static_cast<std::size_t>(n));
    }
}

// The writer blocks inside write() on a pipe nobody reads (a line larger than the pipe holds):
// the queue fills, and every record past it is dropped and counted, never blocking the caller.
TEST(logger, drops_are_counted_while_the_output_blocks) {
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    ASSERT_GT(::fcntl(p[1], F_SETPIPE_SZ, 4096), 0);
    std::string drained;
    std::thread reader;
    {
        logger lg{
            {.min_level = level::info, .format = log_format::json, .fd = p[1], .queue_lines = 4}};
        weft::metrics::registry reg;
        auto keep = weft::log::collect_logger(reg, lg);
        const std::string big(256 * 1024, 'x');
        lg.info(big);
        while (lg.queued() != 0) {  // the writer took it, and blocks writing it
            std::this_thread::yield();
        }
        for (int i = 0; i < 10; ++i) {
            lg.info("small", {{"i", i}});
        }
        EXPECT_EQ(lg.queued(), 4U);
        EXPECT_EQ(lg.dropped(), 6U);
        const std::string text = reg.render(weft::metrics::exposition_format::prometheus_text);
        EXPECT_NE(text.find("weft_log_dropped_total 6\n"), std::string::npos) << text;
        reader = std::thread([&] { drained = read_all(p[0]); });
        lg.flush();
        EXPECT_EQ(lg.written(), 5U);
        keep.reset();
    }
    ::close(p[1]);
    reader.join();
    ::close(p[0]);
    std::size_t lines = 0;
    for (char c : drained) {
        lines += c == '\n' ? 1 : 0;
    }
    EXPECT_EQ(lines, 5U);
    // The four queued were the first four records after the big one.
    EXPECT_NE(drained.find("\"i\":3}"), std::string::npos);
    EXPECT_EQ(drained.find("\"i\":4}"), std::string::npos);
}

// Below the level, a call formats nothing and allocates nothing, whatever its fields.
TEST(logger, a_record_below_the_level_allocates_nothing) {
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    logger lg{{.min_level = level::warn, .fd = p[1]}};
    const std::string long_value(1000, 'v');
    const auto before = allocations.load();
    for (int i = 0; i < 1000; ++i) {
        lg.info("request served", {{"route", "/items/{id}"}, {"status", 200}, {"v", long_value}});
        lg.debug("detail", {{"ms", 1.5}});
    }
    EXPECT_EQ(allocations.load(), before);
    lg.warn("kept", {{"v", long_value}});  // and one at the level does allocate its line
    EXPECT_GT(allocations.load(), before);
    lg.flush();
    EXPECT_EQ(lg.written(), 1U);
    ::close(p[1]);
    EXPECT_NE(read_all(p[0]).find("\"msg\":\"kept\""), std::string::npos);
    ::close(p[0]);
}

auto without_time(const std::string& line) -> std::string {
    // Both formats start with the time: `{"ts":"...",` or `ts=... `.
    const auto json = line.starts_with("{");
    const auto end = json ? line.find("\",", 7) + 2 : line.find(' ') + 1;
    return line.substr(end);
}

TEST(format_record, json_and_logfmt_escape_and_prefix_reserved_keys) {
    const field fs[] = {{"path", "/a b\"c\\"},
                        {"n", -3},
                        {"u", std::uint64_t{18446744073709551615ULL}},
                        {"ok", true},
                        {"ratio", 0.25},
                        {"msg", "user's msg"},
                        {"ctl", std::string_view("\x01\n", 2)}};
    std::string json;
    weft::log::format_record(
        json, log_format::json, level::warn, "hi \"there\"", fs, 7,
        {.trace_id = "4bf92f3577b34da6a3ce929d0e0e4736", .span_id = "00f067aa0ba902b7"});
    EXPECT_EQ(without_time(json),
              "\"level\":\"warn\",\"msg\":\"hi \\\"there\\\"\","
              "\"trace_id\":\"4bf92f3577b34da6a3ce929d0e0e4736\",\"span_id\":\"00f067aa0ba902b7\","
              "\"path\":\"/a b\\\"c\\\\\",\"n\":-3,\"u\":18446744073709551615,\"ok\":true,"
              "\"ratio\":0.25,\"_msg\":\"user's msg\",\"ctl\":\"\\u0001\\n\"}\n");
    std::string lf;
    weft::log::format_record(lf, log_format::logfmt, level::info, "started", fs, 7, {});
    EXPECT_EQ(without_time(lf),
              "level=info msg=started path=\"/a b\\\"c\\\\\" n=-3 u=18446744073709551615 ok=true "
              "ratio=0.25 _msg=\"user's msg\" ctl=\"\\u0001\\n\"\n");
}

// A field that is not UTF-8 (bytes a client sent) still makes a valid JSON line, its bytes
// above 0x7F written as \u00XX: a log shipper refuses a line it cannot parse.
TEST(format_record, text_that_is_not_utf8_is_escaped_byte_by_byte) {
    const field fs[] = {{"path", std::string_view("/\xff\xc3", 3)}, {"name", "caf\xc3\xa9"}};
    std::string json;
    weft::log::format_record(json, log_format::json, level::info, "m", fs, 2, {});
    EXPECT_EQ(without_time(json),
              "\"level\":\"info\",\"msg\":\"m\",\"path\":\"/"
              "\\u00ff\\u00c3\",\"name\":\"caf\xc3\xa9\"}\n");
}

}  // namespace
