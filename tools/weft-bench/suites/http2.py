"""HTTP/2: GET / hello with h2load at 1, 10 and 100 streams per connection, h2c with prior
knowledge on every server: weft's examples/hello_http, nginx (http2), Go's net/http and hyper."""
from weftbench.http_systems import HELLO_HTTP, WEFT_BUILD, http_system
from weftbench.suite import (HIGHER, PAIR_CPU_METRICS, PAIR_CPU_ROWS, Metric, Ratio, Scenario,
                             Suite, Target)

SYSTEMS = (
    http_system("weft", (HELLO_HTTP, "--port", "{port}", "--workers", "2"), WEFT_BUILD),
    http_system("nginx", ("{peers}/nginx-hello", "-p", "{port}", "-t", "2", "-2")),
    http_system("go", ("{peers}/go-httphello", "-p", "{port}", "-t", "2", "-h2c")),
    http_system("hyper", ("{peers}/tokio-hyper", "-p", "{port}", "-t", "2", "--h2", "1")),
)
PEERS = tuple(s.name for s in SYSTEMS if s.name != "weft")
AT_MOST_BEST = Target(ratios=(Ratio(PEERS, 1.0),))
ROWS = ("requests_per_s", "mean_latency_ms", *PAIR_CPU_ROWS, "errors")

SUITE = Suite(
    name="http2",
    title="HTTP/2 (h2c): hello at 1, 10 and 100 streams per connection (h2load)",
    seed_file=None,
    notes="No seed has this table. h2load (Debian's nghttp2-client) -t2 -c100 -m{1,10,100} "
          "-D5 (quick: -D1) sends GET / on 100 connections with up to m streams open on each, "
          "over cleartext HTTP/2 with prior knowledge (h2c: no TLS, so the rows measure HTTP/2 "
          "framing, HPACK and stream handling alone; every server is reached the same way); "
          "nghttp checks one GET's body first. requests_per_s counts 2xx responses; h2load "
          "prints no percentiles, so mean_latency_ms is its mean time per request. Servers, 2 "
          "threads/workers each, each at its HTTP/2 defaults: weft's examples/hello_http "
          "(io_uring, work stealing; http2_options: 100 concurrent streams, 64 KiB windows); "
          "nginx (Debian's nginx-light 1.22, `listen ... http2` on a cleartext listener: "
          "128 concurrent streams); Go's net/http with Protocols.SetUnencryptedHTTP2 (Go 1.24+, "
          "GOMAXPROCS 2); hyper 1.x's http2 connection builder on 2 tokio workers. CPU: the "
          "server's (its cgroup), h2load's own and their total per request. Targets: server "
          "CPU per request at most the best peer's, and the total too.",
    systems=SYSTEMS,
    metrics={
        "requests_per_s": Metric("req/s", HIGHER),
        "mean_latency_ms": Metric("ms"),
        **PAIR_CPU_METRICS,
        "errors": Metric("count"),
        "server_rss_kib": Metric("KiB"),
    },
    scenarios=tuple(
        Scenario("h2load", {"t": 2, "c": 100, "m": m, "d": 5}, ROWS, quick={"d": 1},
                 targets={"server_cpu_ns_per_op": AT_MOST_BEST,
                          "total_cpu_ns_per_op": AT_MOST_BEST,
                          "errors": Target(at_most=0)})
        for m in (1, 10, 100)),
    rounds={"quick": 3, "full": 5},
    timeout=120.0,
    unplotted=("ops", "errors", "server_rss_kib"),
)
