#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "weft/core/task.hpp"
#include "weft/http/client_pool.hpp"
#include "weft/trace/tracer.hpp"

namespace weft::trace {

struct otlp_exporter_options {
    /// The collector's OTLP/HTTP traces endpoint.
    std::string url = "http://127.0.0.1:4318/v1/traces";
    /// How often the queue is drained when it holds fewer than a batch.
    std::chrono::milliseconds interval{1000};
    /// Spans sent in one request at most.
    std::size_t batch_spans = 512;
    /// The connection to the collector (its request_timeout bounds one export).
    http::client_options client{.max_per_host = 2, .request_timeout = std::chrono::seconds{10}};
};

/// Sends a tracer's finished spans to an OpenTelemetry collector over OTLP/HTTP with JSON
/// encoding (POST, `Content-Type: application/json`; otlp_json), in batches, through weft's
/// own HTTP client. `run()` is the background task: spawn it on the runtime; it drains the
/// queue every `interval` (sooner while a full batch waits) and, once `stop()` is called,
/// sends what is left and returns. A batch the collector refuses or cannot take (an error, a
/// status other than 2xx) is dropped and counted in failed_spans: export never retries
/// without bound and never blocks the workers that end spans (the tracer's queue bound does).
///
///     weft::trace::otlp_exporter ex{tr, {.url = "http://collector:4318/v1/traces"}};
///     auto h = weft::spawn(ex.run());
///     ... ex.stop(); co_await h;     // the last spans are sent before it returns
class otlp_exporter {
public:
    otlp_exporter(tracer& t, otlp_exporter_options o = {});
    otlp_exporter(const otlp_exporter&) = delete;
    auto operator=(const otlp_exporter&) -> otlp_exporter& = delete;

    /// The export loop; one at a time. Returns after stop(), once the queue is sent.
    [[nodiscard]] auto run() -> task<void>;
    /// Asks run() to send what is queued and return (any thread; it notices within interval).
    void stop() noexcept { stop_.store(true, std::memory_order_release); }
    /// Sends every span queued now, in batches (from a task; also used by run()).
    [[nodiscard]] auto flush() -> task<void>;

    /// Spans the collector accepted (a 2xx answer).
    [[nodiscard]] auto exported_spans() const noexcept -> std::uint64_t {
        return exported_.load(std::memory_order_relaxed);
    }
    /// Spans in batches that failed (transport error or non-2xx status).
    [[nodiscard]] auto failed_spans() const noexcept -> std::uint64_t {
        return failed_.load(std::memory_order_relaxed);
    }

private:
    tracer& t_;
    otlp_exporter_options o_;
    http::client_pool http_;
    // stop_: release by stop(), acquire by run(); it publishes nothing else. The counters
    // are relaxed: read as statistics.
    std::atomic<bool> stop_{false};
    std::atomic<std::uint64_t> exported_{0};
    std::atomic<std::uint64_t> failed_{0};
};

}  // namespace weft::trace
