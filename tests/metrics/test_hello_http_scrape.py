"""Runs hello_http, sends it requests, scrapes GET /metrics over HTTP in both formats and reads
them with prometheus_client's parsers: the counts of the requests sent must be there.

usage: test_hello_http_scrape.py <hello_http binary>
"""
import signal
import subprocess
import sys
import urllib.error
import urllib.request

from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_parse
from prometheus_client.parser import text_string_to_metric_families as prom_parse


def get(base, path, headers=None):
    req = urllib.request.Request(base + path, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers.get("Content-Type"), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read().decode()


def sample(families, family, name, labels):
    for f in families:
        if f.name == family:
            for s in f.samples:
                if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                    return s.value
    raise AssertionError(f"no sample {name} {labels}")


def main():
    proc = subprocess.Popen([sys.argv[1], "--port", "0", "--workers", "2"],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("listening on "), line
        base = "http://" + line.split()[-1].replace("0.0.0.0", "127.0.0.1")
        for _ in range(5):
            assert get(base, "/")[0] == 200
        assert get(base, "/missing")[0] == 404
        status, ctype, text = get(base, "/metrics")
        assert status == 200 and ctype.startswith("text/plain; version=0.0.4"), (status, ctype)
        fams = list(prom_parse(text))
        route = {"route": "/", "method": "GET", "status": "2xx"}
        assert sample(fams, "weft_http_requests", "weft_http_requests_total", route) == 5
        assert sample(fams, "weft_http_requests", "weft_http_requests_total",
                      {"route": "", "method": "GET", "status": "4xx"}) == 1
        status, ctype, text = get(base, "/metrics",
                                  {"Accept": "application/openmetrics-text; version=1.0.0"})
        assert ctype.startswith("application/openmetrics-text"), ctype
        fams = list(om_parse(text))
        assert sample(fams, "weft_http_requests", "weft_http_requests_total", route) == 5
        # The first scrape is counted once its response was ready.
        assert sample(fams, "weft_http_requests", "weft_http_requests_total",
                      {"route": "/metrics", "method": "GET", "status": "2xx"}) == 1
        assert sample(fams, "weft_http_request_duration_seconds",
                      "weft_http_request_duration_seconds_count",
                      {"route": "/", "method": "GET"}) == 5
        assert sample(fams, "weft_runtime_workers", "weft_runtime_workers", {}) == 2
        print("hello_http /metrics parsed in both formats")
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
    assert rc == 0, rc


if __name__ == "__main__":
    main()
