#include "weft/log/logger.hpp"

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "weft/core/detail/json_text.hpp"

namespace weft::log {

namespace {

auto level_name(level l) noexcept -> std::string_view {
    switch (l) {
        case level::trace:
            return "trace";
        case level::debug:
            return "debug";
        case level::info:
            return "info";
        case level::warn:
            return "warn";
        case level::error:
            return "error";
        case level::off:
            break;
    }
    return "off";
}

auto reserved(std::string_view k) noexcept -> bool {
    return k == "ts" || k == "level" || k == "msg" || k == "trace_id" || k == "span_id";
}

/// A logfmt value: bare when it has no space, `=`, `"`, backslash or control character (and
/// is not empty), else quoted with those escaped.
void logfmt_value(std::string& out, std::string_view s) {
    bool plain = !s.empty();
    for (char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if (c <= 0x20 || c == '=' || c == '"' || c == '\\' || c == 0x7f) {
            plain = false;
            break;
        }
    }
    if (plain) {
        out += s;
        return;
    }
    out += '"';
    weft::detail::append_json_escaped(out, s);  // the same escapes
    out += '"';
}

void append_number(std::string& out, const field& f, bool json) {
    char buf[32];
    std::to_chars_result r{};
    switch (f.type()) {
        case field::kind::signed_int:
            r = std::to_chars(buf, buf + sizeof(buf), f.as_signed());
            break;
        case field::kind::unsigned_int:
            r = std::to_chars(buf, buf + sizeof(buf), f.as_unsigned());
            break;
        case field::kind::floating:
            if (!std::isfinite(f.as_double())) {
                // JSON has no NaN or infinity: written as a string there.
                const char* s = std::isnan(f.as_double()) ? "NaN"
                                : f.as_double() > 0       ? "+Inf"
                                                          : "-Inf";
                if (json) {
                    out += '"';
                    out += s;
                    out += '"';
                } else {
                    out += s;
                }
                return;
            }
            r = std::to_chars(buf, buf + sizeof(buf), f.as_double());
            break;
        default:
            return;
    }
    out.append(buf, r.ptr);
}

/// The time, UTC, to the microsecond. The part to the second is kept per thread and made again
/// only when the second changes (gmtime_r and the date's digits cost more than the rest of a
/// typical record).
void append_time(std::string& out) {
    struct second_cache {
        std::int64_t secs = -1;
        char text[20] = {};  // YYYY-MM-DDTHH:MM:SS
    };
    thread_local second_cache cache;
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
    const std::int64_t secs = us / 1'000'000;
    if (secs != cache.secs) {
        const auto t = static_cast<std::time_t>(secs);
        std::tm tm{};
        ::gmtime_r(&t, &tm);
        char buf[80];  // what -Wformat-truncation sees as possible for any int
        std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900,
                      tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
        std::memcpy(cache.text, buf, sizeof(cache.text) - 1);
        cache.secs = secs;
    }
    out.append(cache.text, sizeof(cache.text) - 1);
    char frac[8] = {'.', '0', '0', '0', '0', '0', '0', 'Z'};
    auto f = static_cast<std::uint32_t>(us % 1'000'000);
    for (int i = 6; i >= 1; --i) {
        frac[i] = static_cast<char>('0' + f % 10);
        f /= 10;
    }
    out.append(frac, sizeof(frac));
}

void append_key(std::string& out, std::string_view k, bool json) {
    if (json) {
        out += ",\"";
        if (reserved(k)) {
            out += '_';
        }
        weft::detail::append_json_escaped(out, k);
        out += "\":";
    } else {
        out += ' ';
        if (reserved(k)) {
            out += '_';
        }
        // A logfmt key is written without its spaces, `=` and quotes (they would split it).
        for (char c : k) {
            if (static_cast<unsigned char>(c) > 0x20 && c != '=' && c != '"') {
                out += c;
            }
        }
        out += '=';
    }
}

void append_string(std::string& out, std::string_view v, bool json) {
    if (json) {
        out += '"';
        weft::detail::append_json_escaped(out, v);
        out += '"';
    } else {
        logfmt_value(out, v);
    }
}

}  // namespace

void format_record(std::string& out,
                   log_format f,
                   level l,
                   std::string_view msg,
                   const field* fields,
                   std::size_t n,
                   span_ids ids) {
    const bool json = f == log_format::json;
    if (json) {
        out += "{\"ts\":\"";
        append_time(out);
        out += "\",\"level\":\"";
        out += level_name(l);
        out += "\",\"msg\":";
        append_string(out, msg, true);
    } else {
        out += "ts=";
        append_time(out);
        out += " level=";
        out += level_name(l);
        out += " msg=";
        append_string(out, msg, false);
    }
    auto id = [&](std::string_view key, std::string_view v) {
        if (!v.empty()) {
            out += json ? ",\"" : " ";
            out += key;
            out += json ? "\":" : "=";
            append_string(out, v, json);
        }
    };
    id("trace_id", ids.trace_id);
    id("span_id", ids.span_id);
    for (std::size_t i = 0; i < n; ++i) {
        const field& fl = fields[i];
        append_key(out, fl.key(), json);
        switch (fl.type()) {
            case field::kind::string:
                append_string(out, fl.as_string(), json);
                break;
            case field::kind::boolean:
                out += fl.as_bool() ? "true" : "false";
                break;
            default:
                append_number(out, fl, json);
        }
    }
    out += json ? "}\n" : "\n";
}

struct logger::state {
    logger_options opts;
    std::mutex mu;
    std::condition_variable cv;       // the writer waits here for lines or stop
    std::condition_variable done_cv;  // flush() waits here
    std::deque<std::string> lines;    // guarded by mu
    std::uint64_t taken = 0;          // guarded by mu: lines the writer took
    std::uint64_t pushed = 0;         // guarded by mu: lines queued ever
    std::uint64_t finished = 0;       // guarded by mu: lines the writer is done with
    bool stopping = false;            // guarded by mu
    // Relaxed: counts read on their own by dropped()/written() and the collector.
    std::atomic<std::uint64_t> dropped{0};
    std::atomic<std::uint64_t> written{0};
    std::thread writer;

    void run() {
        std::vector<std::string> batch;
        std::string out;
        std::unique_lock lock(mu);
        for (;;) {
            cv.wait(lock, [&] { return stopping || !lines.empty(); });
            if (lines.empty()) {
                return;  // stopping, and everything queued is written
            }
            batch.assign(std::make_move_iterator(lines.begin()),
                         std::make_move_iterator(lines.end()));
            lines.clear();
            taken += batch.size();
            lock.unlock();
            out.clear();
            for (const auto& l : batch) {
                out += l;
            }
            write_all(out);
            written.fetch_add(batch.size(), std::memory_order_relaxed);
            lock.lock();
            finished += batch.size();
            done_cv.notify_all();
        }
    }

    void write_all(std::string_view s) const noexcept {
        while (!s.empty()) {
            const ssize_t n = ::write(opts.fd, s.data(), s.size());
            if (n < 0) {
                if (errno == EINTR) {
                    continue;
                }
                return;  // an output that fails loses its lines; nothing else can be done
            }
            s.remove_prefix(static_cast<std::size_t>(n));
        }
    }
};

logger::logger(logger_options o) : min_(o.min_level), s_(std::make_unique<state>()) {
    s_->opts = std::move(o);
    s_->writer = std::thread([s = s_.get()] { s->run(); });
}

logger::~logger() {
    {
        std::lock_guard lock(s_->mu);
        s_->stopping = true;
    }
    s_->cv.notify_one();
    s_->writer.join();
}

void logger::write(
    level l, std::string_view msg, const field* fields, std::size_t n, span_ids ids) noexcept {
    try {
        std::string line;
        line.reserve(128 + msg.size());
        format_record(line, s_->opts.format, l, msg, fields, n, ids);
        {
            std::lock_guard lock(s_->mu);
            if (s_->lines.size() >= s_->opts.queue_lines) {
                s_->dropped.fetch_add(1, std::memory_order_relaxed);
                return;
            }
            s_->lines.push_back(std::move(line));
            ++s_->pushed;
        }
        s_->cv.notify_one();
    } catch (...) {
        s_->dropped.fetch_add(1, std::memory_order_relaxed);  // no memory for the line
    }
}

auto logger::dropped() const noexcept -> std::uint64_t {
    return s_->dropped.load(std::memory_order_relaxed);
}

auto logger::written() const noexcept -> std::uint64_t {
    return s_->written.load(std::memory_order_relaxed);
}

auto logger::queued() const noexcept -> std::size_t {
    std::lock_guard lock(s_->mu);
    return s_->lines.size();
}

void logger::flush() {
    std::unique_lock lock(s_->mu);
    const std::uint64_t target = s_->pushed;
    s_->done_cv.wait(lock, [&] { return s_->finished >= target; });
}

auto collect_logger(metrics::registry& reg, const logger& lg) -> metrics::collector_handle {
    return reg.add_collector([&lg](std::vector<metrics::family_snapshot>& out) {
        out.push_back({.name = "weft_log_dropped",
                       .help = "Log records dropped because the writer's queue was full.",
                       .type = metrics::metric_type::counter,
                       .series = {{.value = static_cast<double>(lg.dropped())}}});
        out.push_back({.name = "weft_log_written",
                       .help = "Log lines written out.",
                       .type = metrics::metric_type::counter,
                       .series = {{.value = static_cast<double>(lg.written())}}});
    });
}

}  // namespace weft::log
