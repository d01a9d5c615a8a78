"""HTTP pipelining, the TechEmpower plaintext shape: wrk with a Lua script sending 16 pipelined
GET / per write on 256 connections, on weft and every HTTP peer (weftbench/http_systems.py)."""
from weftbench.http_systems import CEILING, PEERS, SERVERS_NOTE, WEFT, WEFT_VARIANTS
from weftbench.suite import HIGHER, Metric, Ratio, Scenario, Suite, Target

ROWS = ("requests_per_s", "p99_ms", "server_cpu_ns_per_op", "errors")
PARAMS = {"t": 2, "c": 256, "d": 5, "depth": 16}

SUITE = Suite(
    name="http-pipeline",
    title="HTTP pipelining: wrk, 16 requests per write, 256 connections",
    seed_file=None,
    notes="No seed has this table; it is the shape of TechEmpower's plaintext test (wrk with a "
          "pipelining script, depth 16). wrk -t2 -c256 -d5s (quick -d1s); requests_per_s "
          "counts responses. " + SERVERS_NOTE + " Responses per write are not reported: "
          "examples/hello_http does not print its server's stats (stats().writes), and no "
          "peer counts its writes. minihttp (may_minihttp on 2 may workers, built for "
          "TechEmpower's plaintext test) is the pipelining ceiling; the issue's target: weft "
          ">= nginx and >= 0.8x minihttp in requests/s. A run whose responses had any error "
          "is left out of the medians.",
    systems=(WEFT, *PEERS, CEILING),
    metrics={
        "requests_per_s": Metric("req/s", HIGHER),
        "mean_latency_ms": Metric("ms"),
        "p99_ms": Metric("ms"),
        "server_cpu_ns_per_op": Metric("ns"),
        "errors": Metric("count"),
        "server_rss_kib": Metric("KiB"),
    },
    scenarios=(
        Scenario("wrk", PARAMS, ROWS, quick={"d": 1},
                 targets={"requests_per_s": Target(ratios=(Ratio(("nginx",), 1.0),
                                                           Ratio(("minihttp",), 0.8))),
                          "errors": Target(at_most=0)}),
        *(Scenario("wrk", {**PARAMS, **tag}, ROWS, quick={"d": 1}, only=("weft",), **variant)
          for tag, variant in WEFT_VARIANTS if tag["weft"] == "per-core"),
    ),
    rounds={"quick": 3, "full": 5},
    unplotted=("ops", "errors"),
    timeout=120.0,
)
