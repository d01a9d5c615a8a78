#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>

#include "weft/log/field.hpp"
#include "weft/metrics/registry.hpp"

namespace weft::log {

enum class level : std::uint8_t { trace, debug, info, warn, error, off };

/// How a record is written, one line each:
/// - json: `{"ts":"2026-01-02T03:04:05.678901Z","level":"info","msg":"...","key":value,...}`
///   (JSON Lines; strings escaped per RFC 8259, control characters as \u00XX);
/// - logfmt: `ts=2026-01-02T03:04:05.678901Z level=info msg="..." key=value ...` (a value
///   with a space, `=`, `"` or a control character quoted and escaped).
enum class log_format : std::uint8_t { json, logfmt };

struct logger_options {
    /// Records below it are skipped at the call (one relaxed load, nothing formatted).
    level min_level = level::info;
    log_format format = log_format::json;
    /// Where lines go (not closed by the logger).
    int fd = 2;
    /// Lines queued for the writer at most; a record that finds it full is dropped and
    /// counted (logger::dropped), so a slow or blocked output never blocks the caller.
    std::size_t queue_lines = 8192;
};

/// The trace a record belongs to (W3C trace context ids, lowercase hex), written as the
/// reserved fields `trace_id` and `span_id` when not empty.
struct span_ids {
    std::string_view trace_id{};
    std::string_view span_id{};
};

/// Structured logs written by a thread of their own. A record is formatted on the caller's
/// thread into one line and queued (a short lock, never held during IO); the writer thread
/// writes the queued lines in batches. Any thread may log; a worker is never blocked by the
/// output: when the queue is full the record is dropped and counted.
///
/// Reserved keys: `ts`, `level`, `msg`, `trace_id`, `span_id`; a field with one of them is
/// written with a leading underscore (`_msg`). The destructor writes what is queued, then
/// stops the writer (it waits while the output blocks).
///
///     weft::log::logger lg{{.min_level = weft::log::level::info}};
///     lg.info("listening", {{"port", 8080}});
class logger {
public:
    explicit logger(logger_options o = {});
    logger(const logger&) = delete;
    auto operator=(const logger&) -> logger& = delete;
    ~logger();

    [[nodiscard]] auto enabled(level l) const noexcept -> bool {
        return l >= min_.load(std::memory_order_relaxed) && l != level::off;
    }
    void set_level(level l) noexcept { min_.store(l, std::memory_order_relaxed); }

    void log(level l,
             std::string_view msg,
             std::initializer_list<field> fields = {},
             span_ids ids = {}) noexcept {
        if (enabled(l)) {
            write(l, msg, fields.begin(), fields.size(), ids);
        }
    }
    void debug(std::string_view msg, std::initializer_list<field> fields = {}) noexcept {
        log(level::debug, msg, fields);
    }
    void info(std::string_view msg, std::initializer_list<field> fields = {}) noexcept {
        log(level::info, msg, fields);
    }
    void warn(std::string_view msg, std::initializer_list<field> fields = {}) noexcept {
        log(level::warn, msg, fields);
    }
    void error(std::string_view msg, std::initializer_list<field> fields = {}) noexcept {
        log(level::error, msg, fields);
    }

    /// Records dropped because the queue was full (or a line could not be made).
    [[nodiscard]] auto dropped() const noexcept -> std::uint64_t;
    /// Lines written out.
    [[nodiscard]] auto written() const noexcept -> std::uint64_t;
    /// Lines queued and not yet taken by the writer.
    [[nodiscard]] auto queued() const noexcept -> std::size_t;
    /// Waits until every line queued before the call has been written.
    void flush();

    struct state;

private:
    void write(
        level l, std::string_view msg, const field* fields, std::size_t n, span_ids ids) noexcept;

    std::atomic<level> min_;
    std::unique_ptr<state> s_;
};

/// One record as a line (with its newline) in `f`; the logger's formatter, for tests and for
/// writers of one's own.
void format_record(std::string& out,
                   log_format f,
                   level l,
                   std::string_view msg,
                   const field* fields,
                   std::size_t n,
                   span_ids ids);

/// Exposes `lg`'s counters: `weft_log_dropped_total` and `weft_log_written_total`. Keep the
/// handle no longer than the logger.
[[nodiscard]] auto collect_logger(metrics::registry& reg, const logger& lg)
    -> metrics::collector_handle;

}  // namespace weft::log
