// Prints a registry holding every kind of family (labels needing escapes, a histogram with
// labels, a runtime's collector) in the format named by argv[1] ("prometheus" or
// "openmetrics"): the input of test_metrics_parse.py, which reads it with prometheus_client's
// parsers.

#include <cstdio>
#include <cstring>
#include <limits>

#include "weft/metrics/registry.hpp"
#include "weft/metrics/runtime_collector.hpp"
#include "weft/sched/runtime.hpp"

auto main(int argc, char** argv) -> int {
    if (argc != 2) {
        std::fprintf(stderr, "usage: metrics_sample prometheus|openmetrics\n");
        return 2;
    }
    const auto fmt = std::strcmp(argv[1], "openmetrics") == 0
                         ? weft::metrics::exposition_format::openmetrics
                         : weft::metrics::exposition_format::prometheus_text;
    weft::metrics::registry reg;
    weft::runtime rt{{.workers = 2}};
    auto keep = weft::metrics::collect_runtime(reg, rt);
    auto req = reg.add_counter_family("sample_requests", "Requests \\ by \"route\"\nand status.",
                                      {"route", "status"});
    req.with({"/items/{id}", "2xx"}).inc(7);
    req.with({"quote\" back\\ nl\n", "5xx"}).inc(1);
    reg.add_gauge("sample_temperature", "A gauge.").add(-1.25);
    auto lat = reg.add_histogram_family("sample_latency_seconds", "Latency.", {"route"},
                                        weft::metrics::duration_buckets());
    auto items = lat.with({"/items/{id}"});
    for (double v : {0.0001, 0.001, 0.2, 3.0, 100.0}) {
        items.observe(v);
    }
    (void)lat.with({"/"});  // a series with no observations
    const std::string out = reg.render(fmt);
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
}
