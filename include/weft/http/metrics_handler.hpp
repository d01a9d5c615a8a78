#pragma once

#include "weft/http/router.hpp"
#include "weft/metrics/registry.hpp"

namespace weft::http {

/// A handler that answers a scrape: `reg` collected and rendered in the format the request's
/// Accept field asks for (OpenMetrics for `application/openmetrics-text`, else the Prometheus
/// text format 0.0.4), with its Content-Type. A collector that throws makes the answer a 500.
///
///     weft::metrics::registry reg;
///     weft::http::server srv{{.metrics = reg}};
///     srv.route(weft::http::method::get, "/metrics", weft::http::metrics_handler(reg));
[[nodiscard]] auto metrics_handler(metrics::registry reg) -> handler;

}  // namespace weft::http
