"""Parses metrics_sample's output with prometheus_client's parsers (the Prometheus text format
and the strict OpenMetrics one) and checks the values came through, escapes included.

usage: test_metrics_parse.py <metrics_sample binary>
"""
import subprocess
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_parse
from prometheus_client.parser import text_string_to_metric_families as prom_parse


def families(text, parse):
    return {f.name: f for f in parse(text)}


def check(fams):
    req = fams["sample_requests"]
    assert req.type == "counter", req.type
    values = {(s.labels["route"], s.labels["status"]): s.value for s in req.samples
              if s.name == "sample_requests_total"}
    assert values[("/items/{id}", "2xx")] == 7, values
    assert values[('quote" back\\ nl\n', "5xx")] == 1, values
    assert req.documentation == 'Requests \\ by "route"\nand status.', repr(req.documentation)
    assert fams["sample_temperature"].samples[0].value == -1.25
    lat = fams["sample_latency_seconds"]
    assert lat.type == "histogram", lat.type
    items = [s for s in lat.samples if s.labels.get("route") == "/items/{id}"]
    count = [s.value for s in items if s.name.endswith("_count")]
    total = [s.value for s in items if s.name.endswith("_sum")]
    inf = [s.value for s in items if s.name.endswith("_bucket") and s.labels["le"] == "+Inf"]
    le_1ms = [s.value for s in items if s.name.endswith("_bucket") and float(s.labels["le"]) == 0.001]
    assert count == [5] and inf == [5] and le_1ms == [2], (count, inf, le_1ms)
    assert abs(total[0] - 103.2011) < 1e-9, total
    workers = fams["weft_runtime_workers"].samples[0].value
    assert workers == 2, workers
    assert len(fams["weft_runtime_park_attempts"].samples) >= 2


def main():
    binary = sys.argv[1]
    prom = subprocess.run([binary, "prometheus"], check=True, capture_output=True, text=True).stdout
    om = subprocess.run([binary, "openmetrics"], check=True, capture_output=True, text=True).stdout
    check(families(prom, prom_parse))
    check(families(om, om_parse))
    print("both formats parsed")


if __name__ == "__main__":
    main()
