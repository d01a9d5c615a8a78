#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "weft/trace/context.hpp"

namespace weft::trace {

class tracer;

/// OpenTelemetry's span kinds (their OTLP numbers).
enum class span_kind : std::uint8_t {
    internal = 1,
    server = 2,
    client = 3,
    producer = 4,
    consumer = 5
};

/// OpenTelemetry's status codes (their OTLP numbers): unset unless the work says otherwise.
enum class status_code : std::uint8_t { unset = 0, ok = 1, error = 2 };

/// One attribute of a span: a key and a string, integer, floating-point or boolean value.
struct attribute {
    std::string key;
    std::variant<std::string, std::int64_t, double, bool> value;
    friend auto operator==(const attribute&, const attribute&) -> bool = default;
};

/// A finished (or running) span as the exporter sends it. Times are nanoseconds since the Unix
/// epoch (std::chrono::system_clock); a parent id of all zero means a root span.
struct span_data {
    trace_id trace{};
    span_id id{};
    span_id parent{};
    std::string name{};
    span_kind kind = span_kind::internal;
    std::uint64_t start_ns = 0;
    std::uint64_t end_ns = 0;
    /// Requests carry three or four (OpenTelemetry's HTTP and messaging conventions): the
    /// vector is reserved for that many when the span starts, so adding them allocates once.
    std::vector<attribute> attributes{};
    status_code status = status_code::unset;
    std::string status_message{};
    /// The tracestate the span was started under (verbatim), exported as the span's traceState.
    std::string state{};
};

/// A span in progress: started by tracer::start, ended once by end() (or by its destructor),
/// which hands its data to the tracer's export queue. Move-only. A default-constructed span
/// (or one started on a null tracer) is inert: it records nothing and its context() is the
/// parent context it was given, so instrumented code pays nothing when tracing is off.
/// One task at a time may use a span (it is not synchronised).
///
///     auto s = tr.start("GET /items/{id}", weft::trace::span_kind::server, parent);
///     s.set_attribute("http.response.status_code", std::int64_t{200});
///     s.end();
class span {
public:
    span() = default;
    span(span&& o) noexcept;
    auto operator=(span&& o) noexcept -> span&;
    span(const span&) = delete;
    auto operator=(const span&) -> span& = delete;
    ~span() { end(); }

    /// Whether it records (a tracer started it and it has not ended).
    [[nodiscard]] auto recording() const noexcept -> bool { return tracer_ != nullptr; }
    /// The context children of this span take as their parent (and the one to propagate): this
    /// span's ids while it records; for an inert span, the context it was given.
    [[nodiscard]] auto context() const noexcept -> const trace::context& { return ctx_; }

    void set_attribute(std::string_view key, std::string_view value);
    void set_attribute(std::string_view key, const char* value) {
        set_attribute(key, std::string_view(value));
    }
    void set_attribute(std::string_view key, std::int64_t value);
    void set_attribute(std::string_view key, double value);
    void set_attribute(std::string_view key, bool value);
    void set_status(status_code code, std::string_view message = {});

    /// Ends the span now (its end time) and queues it for export; later calls do nothing.
    void end() noexcept;

private:
    friend class tracer;
    trace::context ctx_{};
    tracer* tracer_ = nullptr;
    span_data data_{};
};

}  // namespace weft::trace
