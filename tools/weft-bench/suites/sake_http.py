"""Seed 000 (Sake)'s HTTP section: `wrk -t4 -c100` against the seed's three server
architectures, rebuilt on weft by bench/http/sake_architectures (--arch A: the handler in the
connection's task; B: connection -> channel -> one coordinator -> worker pool; C: a task per
request calling pool.map), beside examples/hello_http."""
from weftbench.http_systems import HELLO_HTTP, WEFT_BUILD, http_system
from weftbench.suite import (HIGHER, PAIR_CPU_METRICS, PAIR_CPU_ROWS, Derived, Input, Metric,
                             Scenario, Seed, Suite, Target)

ARCHS = "{bin}/sake_architectures"
ROWS = ("requests_per_s", "mean_latency_ms", "p99_ms", *PAIR_CPU_ROWS, "errors")
PARAMS = {"t": 4, "c": 100, "d": 30}
SEEDS = {  # the seed's wrk -t4 -c100 -d30s on macOS
    "B": {"requests_per_s": Seed(8005, "8,005 req/s: channel coordination (benchmark_server.nv)"),
          "mean_latency_ms": Seed(12.75, "12.75 ms")},
    "C": {"requests_per_s": Seed(544, "544 req/s: spawn → pool.map per request "
                                      "(test_worker_spawn_http_server.nv)"),
          "mean_latency_ms": Seed(5.18, "5.18 ms")},
}


def arch(name):
    return Scenario("wrk", {**PARAMS, "arch": name}, ROWS, quick={"d": 2},
                    seed=SEEDS.get(name, {}), targets={"errors": Target(at_most=0)},
                    server=(ARCHS, "--arch", name, "--port", "{port}", "--workers", "2"))


def ratio(top, bottom, at_least):
    return Derived("wrk", {"arch": f"{top} / {bottom}"}, "ratio",
                   inputs={"top": Input("wrk", {"arch": top}, "requests_per_s"),
                           "bottom": Input("wrk", {"arch": bottom}, "requests_per_s")},
                   formula=lambda m: m["top"] / m["bottom"],
                   target=Target(at_least=at_least))


SUITE = Suite(
    name="sake-http",
    title="Sake (seed 000): HTTP with wrk -t4 -c100 on the seed's three server architectures",
    seed_file="000_c29498296902f75d.txt",
    notes="The seed measured two Navi servers with wrk -t4 -c100 -d30s on macOS: channel "
          "coordination 8,005 req/s (12.75 ms) and spawn → pool.map per request 544 req/s "
          "(5.18 ms), a 14.7x collapse. Here the same command (-d30s; quick -d2s) runs against "
          "weft's bench/http/sake_architectures --arch A|B|C --workers 2 (rows arch=A/B/C; "
          "shown 'not built' until that program is built) and against examples/hello_http "
          "(the row without arch). The derived rows give B and C relative to A, and C to B: "
          "the collapse is gone when B and C keep at least 0.67x of A and C 0.9x of B.",
    systems=(http_system("weft", (HELLO_HTTP, "--port", "{port}", "--workers", "2"),
                         WEFT_BUILD),),
    metrics={
        "requests_per_s": Metric("req/s", HIGHER),
        "mean_latency_ms": Metric("ms"),
        "p99_ms": Metric("ms"),
        **PAIR_CPU_METRICS,
        "errors": Metric("count"),
        "server_rss_kib": Metric("KiB"),
        "ratio": Metric("x", HIGHER),
    },
    scenarios=(
        Scenario("wrk", PARAMS, ROWS, quick={"d": 2}, targets={"errors": Target(at_most=0)}),
        *(arch(a) for a in "ABC"),
    ),
    derived=(ratio("B", "A", 0.67), ratio("C", "A", 0.67), ratio("C", "B", 0.9)),
    rounds={"quick": 3, "full": 5},
    unplotted=("ops", "errors"),
    timeout=120.0,
)
